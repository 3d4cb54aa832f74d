"""``{rank}`` in a report path, read by one helper (libtb/src/tb_env.c) in the kernels'
``--json FILE`` and the hugepage shim's ``TOPOBIND_HUGE_REPORT`` (rankstep/hugepreload.c).

The shim had its own copy: it read no ``PMI_RANK`` (under MPICH's and Intel MPI's Hydra every
rank's report got the same name, rank 0's) and pasted the rank variable's text into the path
as it was (``SLURM_PROCID=../x`` put the report elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from paths import RANKSTEP_BIN, REPO

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("built_kernels")]

SHIM = RANKSTEP_BIN / "libtbhugepages.so"
BIGALLOC = RANKSTEP_BIN / "tb-bigalloc"
WHEREAMI = REPO / "kernels" / "bin" / "whereami"
LAUNCHER_VARS = ("OMPI_", "PMIX_", "PMI_", "MPI_LOCALRANKID", "SLURM_", "OMP_", "LD_PRELOAD")
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}

# (the launcher's variables, the rank the path gets)
CASES = [
    pytest.param({"PMI_RANK": "3"}, 3, id="mpich-hydra"),
    pytest.param({"PMI_RANK": "6", "SLURM_PROCID": "0"}, 6, id="mpiexec-in-sbatch"),
    pytest.param({"OMPI_COMM_WORLD_RANK": "4", "SLURM_PROCID": "0"}, 4, id="openmpi"),
    pytest.param({"PMIX_RANK": "2"}, 2, id="pmix"),
    pytest.param({"SLURM_PROCID": "5"}, 5, id="srun"),
    pytest.param({}, 0, id="no-launcher"),
    pytest.param({"PMI_RANK": "../../etc"}, 0, id="path-in-pmi-rank"),
    pytest.param({"SLURM_PROCID": "../x"}, 0, id="path-in-slurm-procid"),
    pytest.param({"OMPI_COMM_WORLD_RANK": "1" + "0" * 30}, 0, id="10^30"),
    pytest.param({"OMPI_COMM_WORLD_RANK": "100000001"}, 0, id="over-the-bound"),
    pytest.param({"SLURM_PROCID": "7/x"}, 0, id="digits-then-path"),
    pytest.param({"PMI_RANK": "1x"}, 0, id="digits-then-letter"),
    pytest.param({"PMI_RANK": "../../etc", "SLURM_PROCID": "2"}, 2, id="skipped-like-tb_env_rank"),
]


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def shim_report(tmp_path: Path, env: dict[str, str]) -> list[str]:
    """Files the shim's report of one small program wrote under TMP_PATH/shim, its report path
    three folders deep (so a '../..' pasted in would stay inside)."""
    root = tmp_path / "shim"
    deep = root / "a" / "b" / "c"
    deep.mkdir(parents=True)
    run_env = {
        **CLEAN,
        **env,
        "LD_PRELOAD": str(SHIM),
        "TOPOBIND_HUGE_REPORT": str(deep / "huge-{rank}.json"),
    }
    run = subprocess.run(
        [str(BIGALLOC), "1"], env=run_env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return files_under(root)


@pytest.mark.parametrize(("env", "rank"), CASES)
def test_the_shims_report_path_takes_the_launchers_rank(
    tmp_path: Path, env: dict[str, str], rank: int
) -> None:
    assert shim_report(tmp_path, env) == [f"a/b/c/huge-{rank}.json"]


@pytest.mark.parametrize(("env", "rank"), CASES)
def test_a_kernel_reads_the_same_rank_as_the_shim(
    tmp_path: Path, env: dict[str, str], rank: int
) -> None:
    """whereami's --json FILE and its document's rank agree with the shim's report name."""
    out = tmp_path / "kernel"
    out.mkdir()
    run = subprocess.run(
        [str(WHEREAMI), "--json", str(out / "w-{rank}.json")],
        env={**CLEAN, **env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert files_under(out) == [f"w-{rank}.json"]
    assert json.loads((out / f"w-{rank}.json").read_text())["rank"] == rank


def test_a_path_too_long_once_expanded_is_refused_with_the_reason(tmp_path: Path) -> None:
    """Each "{rank}" grows to 9 digits here: 3,600 bytes given, 5,400 once expanded. The
    kernel says so (it said "File name too long" of a path cut at 4,095 bytes); the shim
    writes no report and, verbose, says why."""
    path = str(tmp_path / ("{rank}" * 600))
    env = {**CLEAN, "SLURM_PROCID": "100000000", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [str(WHEREAMI), "--json", path], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "longer than 4095 bytes once {rank} and {pid} are expanded" in run.stderr
    env |= {"LD_PRELOAD": str(SHIM), "TOPOBIND_HUGE_REPORT": path, "TOPOBIND_HUGE_VERBOSE": "1"}
    run = subprocess.run([str(BIGALLOC), "1"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "TOPOBIND_HUGE_REPORT is too long" in run.stderr
    assert files_under(tmp_path) == []


MPIEXEC = REPO / ".venv-mpich" / "bin" / "mpiexec"


@pytest.mark.skipif(not MPIEXEC.exists(), reason="MPICH not set up: make setup-mpis")
def test_each_rank_of_a_real_mpich_launch_writes_its_own_report(tmp_path: Path) -> None:
    """MPICH's Hydra sets PMI_RANK alone: both ranks wrote huge-0.json before."""
    run = subprocess.run(
        [str(MPIEXEC), "-n", "2", "-genv", "LD_PRELOAD", str(SHIM),
         "-genv", "TOPOBIND_HUGE_REPORT", str(tmp_path / "huge-{rank}.json"),
         str(BIGALLOC), "1"],
        env=CLEAN, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert files_under(tmp_path) == ["huge-0.json", "huge-1.json"]
    pids = {json.loads((tmp_path / f"huge-{r}.json").read_text())["pid"] for r in (0, 1)}
    assert len(pids) == 2
