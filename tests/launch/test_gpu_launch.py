"""The per-gpu plan launched for real on this machine (2 cores, no GPU): the live topology
with a fake GPU attached to every core and one InfiniBand NIC (``live_gpu_xml``), planned,
emitted for OpenMPI 4, OpenMPI 5 and Slurm, each rank's variables exported by the
``topobind plan -f rank-env`` wrapper, and ``topobind verify`` checking CPUs and variables."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND, run_topobind
from ompi_oracle import OMPI4, OMPI5, ROOT_ENV, have_ompi4, have_ompi5
from slurm_helpers import sbatch_wait

from topobind.topo.topology import load

pytestmark = pytest.mark.slow


def live_gpu_xml(path: Path) -> Path:
    """This machine's hwloc XML with GPU rsmiN (AMD, PCI c<N>:00.0) below core N and an
    mlx5_0 NIC below the first package."""
    text = subprocess.run(
        ["lstopo-no-graphics", "--of", "xml", "-"], capture_output=True, text=True, check=True
    ).stdout
    root = ET.fromstring(text)
    cores = [e for e in root.iter("object") if e.get("type") == "Core"]
    if len(cores) < 2 or len(load("live").cores) < 2:
        pytest.skip("needs 2 usable cores")
    for i, core in enumerate(cores):
        pci = ET.SubElement(
            core,
            "object",
            {"type": "PCIDev", "pci_busid": f"0000:c{i:x}:00.0", "pci_type": "0380 [1002:7408]"},
        )
        ET.SubElement(pci, "object", {"type": "OSDev", "name": f"rsmi{i}", "subtype": "RSMI"})
    pkg = next(e for e in root.iter("object") if e.get("type") == "Package")
    nic = ET.SubElement(
        pkg,
        "object",
        {"type": "PCIDev", "pci_busid": "0000:e0:00.0", "pci_type": "0207 [15b3:1019]"},
    )
    ET.SubElement(nic, "object", {"type": "OSDev", "name": "mlx5_0"})
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode"))
    return path


def topobind(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **ROOT_ENV}
    return run_topobind(*args, env=env, cwd=cwd)


def prepare(tmp_path: Path, reverse: bool = False) -> tuple[dict[str, object], Path]:
    """(plan JSON, rank-env wrapper) of per-gpu with 2 ranks; ``reverse``: the wrapper of the
    other order (rank 0 gets GPU 1), a wrong launch verify must catch."""
    xml = live_gpu_xml(tmp_path / "node.xml")
    made = topobind("plan", "-t", str(xml), "-l", "per-gpu", "-r", "2", "-f", "json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "plan.json").write_text(made.stdout)
    order = ["--order", "cpu"]
    wrong = []
    if reverse:  # give rank 0 the last core's GPU: the GPU order reversed
        text = xml.read_text().replace("rsmi0", "rsmiX").replace("rsmi1", "rsmi0")
        (tmp_path / "wrong.xml").write_text(text.replace("rsmiX", "rsmi1"))
        wrong = ["-t", str(tmp_path / "wrong.xml")]
    wrapper = topobind(
        "plan",
        *(wrong or ["-t", str(xml)]),
        "-l",
        "per-gpu",
        "-r",
        "2",
        *order,
        "-f",
        "rank-env",
        cwd=tmp_path,
    )
    assert wrapper.returncode == 0, wrapper.stderr
    (tmp_path / "select.sh").write_text(wrapper.stdout)
    return json.loads(made.stdout), tmp_path / "select.sh"


def _check_ok(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 of 2 threads bound to their planned CPU" in out.stdout
    assert "4 of 4 device variables as planned" in out.stdout
    if not load("live").devices.gpus:
        assert "(this node has no GPU)" in out.stdout


def test_plan_carries_the_variables(tmp_path: Path) -> None:
    plan, _ = prepare(tmp_path)
    ranks = plan["ranks"]  # type: ignore[index]
    assert [r["env"] for r in ranks] == [
        {"ROCR_VISIBLE_DEVICES": str(i), "UCX_NET_DEVICES": "mlx5_0:1"} for i in range(2)
    ]


@pytest.mark.parametrize("version", [4, 5])
def test_openmpi_launch_verified(version: int, tmp_path: Path) -> None:
    if not (have_ompi5() if version == 5 else have_ompi4()):
        pytest.skip(f"OpenMPI {version} not installed")
    plan, wrapper = prepare(tmp_path)
    argv = plan["launch"]["openmpi" if version == 5 else "openmpi4"]  # type: ignore[index]
    if "rankfile" in plan["launch"]:  # type: ignore[operator]
        key = "rankfile" if version == 5 else "rankfile4"
        (tmp_path / "topobind.rankfile").write_text(plan["launch"][key])  # type: ignore[index]
    mpirun = OMPI5 if version == 5 else OMPI4
    out = topobind(
        "verify",
        "--plan",
        "plan.json",
        "--",
        mpirun,
        *argv[1:],
        "sh",
        str(wrapper),
        cwd=tmp_path,
    )
    _check_ok(out)


def test_wrong_variables_are_caught(tmp_path: Path) -> None:
    if not have_ompi5():
        pytest.skip("OpenMPI 5 not installed")
    plan, wrapper = prepare(tmp_path, reverse=True)
    argv = plan["launch"]["openmpi"]  # type: ignore[index]
    out = topobind(
        "verify", "--plan", "plan.json", "--", OMPI5, *argv[1:], "sh", str(wrapper), cwd=tmp_path
    )
    assert out.returncode == 1
    assert "2 of 2 threads bound to their planned CPU" in out.stdout  # CPUs fine
    assert out.stdout.count("MISMATCH") == 2  # ROCR_VISIBLE_DEVICES of both ranks
    assert "2 of 4 device variables as planned; 2 not" in out.stdout


def test_slurm_launch_verified(local_slurm: dict[str, str], tmp_path: Path) -> None:
    plan, wrapper = prepare(tmp_path)
    srun = " ".join(plan["launch"]["srun"])  # type: ignore[index]
    script = tmp_path / "gpu.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --exclusive\n"
        f"{TOPOBIND} verify --plan {tmp_path}/plan.json -- {srun} sh {wrapper}\n"
    )
    job = sbatch_wait(script, tmp_path, local_slurm)
    assert job.returncode == 0, job.output
    assert "--gpu-bind=none" in srun
    assert "4 of 4 device variables as planned" in job.output


def test_slurmd_reads_the_gres_conf(tmp_path: Path) -> None:
    """slurmd -G (real Slurm, no daemon started) parses the gres.conf lines for this node and
    keeps each GPU's Cores=; the device files become /dev/null and /dev/zero, which exist."""
    import re
    import shutil

    if shutil.which("slurmd") is None:
        pytest.skip("slurmd not installed")
    xml = live_gpu_xml(tmp_path / "node.xml")
    made = topobind("plan", "-t", str(xml), "-l", "per-gpu", "-f", "gres", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    wanted = re.findall(r"^Name=gpu .*Cores=(\S+)$", made.stdout, re.M)
    if len(wanted) > 2:
        pytest.skip("more than 2 cores: only /dev/null and /dev/zero stand in for GPUs")
    files = iter(["/dev/null", "/dev/zero"])
    gres = re.sub(r"(?m)^Name=gpu File=\S+", lambda _m: f"Name=gpu File={next(files)}", made.stdout)
    (tmp_path / "gres.conf").write_text(gres)
    node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True).stdout.splitlines()[0]
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=t\nSlurmctldHost=localhost\nGresTypes=gpu\n{node} Gres=gpu:{len(wanted)}\n"
    )
    out = subprocess.run(
        ["slurmd", "-G", "-f", str(conf)], capture_output=True, text=True, timeout=60
    )
    text = out.stdout + out.stderr
    assert "error" not in text.lower(), text
    assert re.findall(r"Cores=(\S+)", text) == wanted  # core i holds GPU i (live_gpu_xml)
    assert wanted == [str(c.logical) for c in load("live").cores]


def test_topobind_run_sets_and_verifies_each_ranks_variables(tmp_path: Path) -> None:
    """topobind run: the per-rank step exports ranks[].env; --verify proves it (mpirun)."""
    if not have_ompi5():
        pytest.skip("OpenMPI 5 not installed")
    xml = live_gpu_xml(tmp_path / "node.xml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = subprocess.run(
        [
            TOPOBIND,
            "run",
            "-t",
            str(xml),
            "-l",
            "per-gpu",
            "--launcher",
            "mpirun",
            "--mpi",
            "openmpi5",
            "--verify",
            "--",
            "sh",
            "-c",
            'echo "rank=$OMPI_COMM_WORLD_RANK gpu=$ROCR_VISIBLE_DEVICES nic=$UCX_NET_DEVICES"',
        ],
        capture_output=True,
        text=True,
        env={**env, **ROOT_ENV},
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all 4 device variables as planned" in out.stderr
    assert sorted(ln for ln in out.stdout.splitlines() if ln.startswith("rank=")) == [
        "rank=0 gpu=0 nic=mlx5_0:1",
        "rank=1 gpu=1 nic=mlx5_0:1",
    ]


def test_topobind_run_in_slurm(local_slurm: dict[str, str], tmp_path: Path) -> None:
    """The same inside a Slurm job: srun with the masks, --gpu-bind=none, the variables."""
    xml = live_gpu_xml(tmp_path / "node.xml")
    script = tmp_path / "run.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --exclusive\n"
        f"{TOPOBIND} run -t {xml} -l per-gpu --verify -- "
        "sh -c 'echo rank=$SLURM_PROCID gpu=$ROCR_VISIBLE_DEVICES'\n"
    )
    job = sbatch_wait(script, tmp_path, local_slurm)
    assert job.returncode == 0, job.output
    assert "all 4 device variables as planned" in job.output
    assert sorted(ln for ln in job.output.splitlines() if ln.startswith("rank=")) == [
        "rank=0 gpu=0",
        "rank=1 gpu=1",
    ]
