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
from gpu_stand_ins import build_stand_in
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


# ------------------------------------------------------------ what each rank's runtime sees
#: two NVIDIA GPUs in two PCI domains; the second on the bus is the faster one
BUSES = ("0000:41:00.0", "0001:00:06.0")
UUIDS = ("GPU-11111111-2222-3333-4444-555555555555", "GPU-99999999-8888-7777-6666-555555555555")
FAKE_GPUS = f"{BUSES[0]}={UUIDS[0]}=1;{BUSES[1]}={UUIDS[1]}=2"


def fake_libcuda(tmp_path: Path) -> Path:
    """The stand-in CUDA driver (tests/launch/fake_libcuda.c) built into ``tmp_path``/lib."""
    return build_stand_in(tmp_path / "lib", "libcuda.so.1")


def nvidia_xml(path: Path) -> Path:
    """This machine's hwloc XML with an NVIDIA GPU (a PCI device only: no hwloc plugin) below
    each of its first two cores, at BUSES."""
    root = ET.fromstring(
        subprocess.run(
            ["lstopo-no-graphics", "--of", "xml", "-"], capture_output=True, text=True, check=True
        ).stdout
    )
    cores = [e for e in root.iter("object") if e.get("type") == "Core"]
    if len(cores) < 2 or len(load("live").cores) < 2:
        pytest.skip("needs 2 usable cores")
    for core, bus in zip(cores, BUSES, strict=False):
        attrs = {"type": "PCIDev", "pci_busid": bus, "pci_type": "0302 [10de:2330] [10de:16c1] a1"}
        ET.SubElement(core, "object", attrs)
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode"))
    return path


def run_verified(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """topobind run --layout per-gpu --verify (OpenMPI 5) of a 2-GPU node, each rank's probe
    asking the stand-in CUDA driver which GPUs it sees."""
    if not have_ompi5():
        pytest.skip("OpenMPI 5 not installed")
    xml = nvidia_xml(tmp_path / "node.xml")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_"))}
    args = ["run", "-t", str(xml), "-l", "per-gpu", "--launcher", "mpirun", "--mpi", "openmpi5"]
    return subprocess.run(
        [TOPOBIND, *args, "--verify", "--", "true"],
        capture_output=True,
        text=True,
        env={**base, **ROOT_ENV, "TB_FAKE_CUDA_GPUS": FAKE_GPUS, **env},
        cwd=tmp_path,
        timeout=120,
    )


def test_each_ranks_cuda_runtime_sees_its_planned_gpu(tmp_path: Path) -> None:
    """Issue 27 item 4: the probe asks each rank's CUDA driver; the plan pins the order
    (CUDA_DEVICE_ORDER=PCI_BUS_ID), so the faster second GPU is still device 1."""
    lib = fake_libcuda(tmp_path)
    out = run_verified(tmp_path, LD_LIBRARY_PATH=str(lib))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 of 4 device variables as planned" in out.stderr
    assert "GPU runtime: 2 of 2 ranks saw their planned GPUs" in out.stderr
    rows = [ln.split() for ln in out.stderr.splitlines() if ln.strip().endswith(UUIDS)]
    assert [(r[0], r[2], r[3], r[4], r[5]) for r in rows] == [
        ("0", BUSES[0], BUSES[0], "OK", UUIDS[0]),
        ("1", BUSES[1], BUSES[1], "OK", UUIDS[1]),
    ]


def test_a_runtime_that_renumbers_the_gpus_is_a_mismatch(tmp_path: Path) -> None:
    """A CUDA runtime numbering fastest first (CUDA_DEVICE_ORDER lost on the way, here: the
    stand-in told to ignore it): the variables are as planned, the GPUs are not."""
    lib = fake_libcuda(tmp_path)
    out = run_verified(tmp_path, LD_LIBRARY_PATH=str(lib), TB_FAKE_CUDA_IGNORE_ORDER="1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "MISMATCH  cuda device 0 is 0001:00:06.0, planned 0000:41:00.0" in out.stderr
    assert "MISMATCH  cuda device 0 is 0000:41:00.0, planned 0001:00:06.0" in out.stderr
    assert "GPU runtime: 0 of 2 ranks saw their planned GPUs; 2 MISMATCH" in out.stderr


def test_no_gpu_driver_is_unverifiable_never_ok(tmp_path: Path) -> None:
    out = run_verified(tmp_path, LD_LIBRARY_PATH=str(tmp_path))  # no libcuda.so.1 there
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("this node has an NVIDIA driver")
    assert out.returncode == 0, out.stdout + out.stderr
    runtime = out.stderr.split("GPUs planned")[1]
    assert runtime.count("UNVERIFIABLE  no GPU runtime library") == 2
    assert " OK" not in runtime
    assert "GPU runtime: 0 of 2 ranks saw their planned GPUs; 2 UNVERIFIABLE" in runtime


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
    assert "4 of 4 device variables as planned" in out.stderr
    assert "UNVERIFIABLE" in out.stderr and " OK " not in out.stderr.split("GPUs planned")[1]
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
    assert "4 of 4 device variables as planned" in job.output
    assert sorted(ln for ln in job.output.splitlines() if ln.startswith("rank=")) == [
        "rank=0 gpu=0",
        "rank=1 gpu=1",
    ]


@pytest.mark.parametrize(
    "block",
    [
        None,
        5,
        {"api": 7, "devices": "x"},
        {"api": "cuda", "devices": [5, {"pci": 12}, {"pci": "0000:41:00.0", "uuid": ["u"]}]},
        {"api": "cuda", "error": "x" * 10000, "devices": [{"pci": "0000:41:00.0"}] * 10000},
    ],
)
def test_hostile_gpu_runtime_blocks_are_judged_not_tracebacks(block: object) -> None:
    """A probe's params.gpu_runtime is untrusted: whatever it holds, a row (never OK unless
    the runtime listed exactly the planned bus id), bounded."""
    from topobind.launch.verify_devices import RUNTIME, check_env
    from topobind.plan.model import PlannedRank

    params = {"device_env": {"CUDA_VISIBLE_DEVICES": "0"}, "gpu_runtime": block}
    doc = {"kernel": "whereami", "host": "h", "rank": 0, "placement": [], "params": params}
    planned = [PlannedRank(0, ((0,),), (0,), {"CUDA_VISIBLE_DEVICES": "0"}, ("0000:41:00.0",))]
    (row,) = [r for r in check_env(planned, json.dumps(doc)) if r.variable == RUNTIME]
    assert row.verdict in ("MISMATCH", "UNVERIFIABLE") and len(row.seen or "") < 64 * 14


def test_a_rank_whose_gpu_is_on_another_numa_node_gets_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As hpcat prints: rank CPUs on NUMA 0, its GPU (Tioga's 0000:c1:00.0) on NUMA 3."""
    from paths import TOPOLOGIES

    from topobind.launch import verify_devices
    from topobind.plan.model import PlannedRank

    tioga = TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml"
    if not tioga.exists():
        pytest.fail(f"{tioga} missing from the repository's topologies/")
    monkeypatch.setattr(verify_devices, "_LIVE", [load(str(tioga))])
    seen = verify_devices.Seen({"api": "hip", "devices": [{"pci": "0000:c1:00.0"}]})
    for cpus, note in [((0,), "CPUs on NUMA 0, GPU 0000:c1:00.0 on NUMA 3"), ((48,), "")]:
        rank = PlannedRank(0, ((cpus[0],),), cpus, {}, ("0000:c1:00.0",))
        row = verify_devices.runtime_row(0, "h", rank.gpus, seen)
        assert verify_devices._with_numa_note(row, rank).note == note


def test_a_rank_whose_runtime_sees_no_gpu_is_a_mismatch(tmp_path: Path) -> None:
    """The job may use only the first GPU (the stand-in driver shows one): rank 1's
    CUDA_VISIBLE_DEVICES=1 names none it may use, cuInit says CUDA_ERROR_NO_DEVICE. That is a
    wrong placement (the launch is stopped), not a node without a driver."""
    lib = fake_libcuda(tmp_path)
    one = f"{BUSES[0]}={UUIDS[0]}=1"
    out = run_verified(tmp_path, LD_LIBRARY_PATH=str(lib), TB_FAKE_CUDA_GPUS=one)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "MISMATCH  cuda sees no GPU (CUDA_ERROR_NO_DEVICE)" in out.stderr
    assert "GPU runtime: 1 of 2 ranks saw their planned GPUs; 1 MISMATCH" in out.stderr


def test_a_runtime_refusing_the_variables_is_a_mismatch() -> None:
    """A real driver answers CUDA_ERROR_INVALID_DEVICE (101) to an index listed twice or an
    invalid CUDA_DEVICE_ORDER (data/cuda-visible-h200.tsv); a driver failing otherwise is a
    MISMATCH too (issue 37 item 3), with its words; a code that is not a number counts as
    none."""
    from topobind.launch.verify_devices import Seen, runtime_row

    def row(code: object, error: str) -> tuple[str | None, str]:
        seen = Seen({"api": "cuda", "error": error, "code": code, "devices": []})
        got = runtime_row(0, "n1", ["0000:41:00.0"], seen)
        return got.status, got.note

    status, note = row(101, "cuInit failed: CUDA_ERROR_INVALID_DEVICE (101)")
    assert status == "MISMATCH" and "CUDA_DEVICE_ORDER" in note
    assert row(999, "cuInit failed: CUDA_ERROR_UNKNOWN (999)") == (
        "MISMATCH",
        "cuda: cuInit failed: CUDA_ERROR_UNKNOWN (999)",
    )
    assert row("101", "cuInit failed") == ("MISMATCH", "cuda: cuInit failed")
    assert row(True, "cuInit failed")[0] == "MISMATCH"


def test_a_failing_or_hung_driver_stops_the_launch(tmp_path: Path) -> None:
    """Issue 37 items 3 and 13: cuInit answering CUDA_ERROR_DEVICES_UNAVAILABLE, or
    cuDeviceGetPCIBusId never returning (1 s bound): MISMATCH, exit 1, never a hang."""
    lib = fake_libcuda(tmp_path)
    out = run_verified(tmp_path, LD_LIBRARY_PATH=str(lib), TB_FAKE_CUDA_FAIL="cuInit=46")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "MISMATCH  cuda: cuInit failed: CUDA_ERROR_DEVICES_UNAVAILABLE (46)" in out.stderr
    out = run_verified(
        tmp_path,
        LD_LIBRARY_PATH=str(lib),
        TB_FAKE_CUDA_HANG="cuDeviceGetPCIBusId",
        TOPOBIND_GPU_PROBE_TIMEOUT="1",
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cuDeviceGetPCIBusId(device 0) did not answer within 1 s" in out.stderr
    assert "GPU runtime: 0 of 2 ranks saw their planned GPUs; 2 MISMATCH" in out.stderr


def test_a_two_vendor_node_is_verified_rank_by_rank(tmp_path: Path) -> None:
    """Issue 37 item 5: an NVIDIA GPU near core 0, an AMD one near core 1; rank 0 is judged
    by CUDA, rank 1 by HIP, both stand-ins loaded (was: both by CUDA, rank 1 a MISMATCH)."""
    if not have_ompi5():
        pytest.skip("OpenMPI 5 not installed")
    lib = fake_libcuda(tmp_path)
    build_stand_in(lib, "libamdhip64.so.6")
    xml = nvidia_xml(tmp_path / "node.xml")
    text = xml.read_text().replace(
        f'pci_busid="{BUSES[1]}" pci_type="0302 [10de:2330]',
        'pci_busid="0000:c1:00.0" pci_type="0380 [1002:7408]',
    )
    assert "0000:c1:00.0" in text
    xml.write_text(text)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_", "ROCR_"))}
    args = ["run", "-t", str(xml), "-l", "per-gpu", "--launcher", "mpirun", "--mpi", "openmpi5"]
    env = {"LD_LIBRARY_PATH": str(lib), "TB_FAKE_CUDA_GPUS": f"{BUSES[0]}={UUIDS[0]}=1",
           "TB_FAKE_HIP_GPUS": "0000:c1:00.0"}  # fmt: skip
    out = subprocess.run(
        [TOPOBIND, *args, "--verify", "--", "true"],
        capture_output=True,
        text=True,
        env={**base, **ROOT_ENV, **env},
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "GPU runtime: 2 of 2 ranks saw their planned GPUs" in out.stderr
