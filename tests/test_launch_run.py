"""`topobind run`, `topobind verify`, `topobind env` and the launcher scripts, run for real."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
WHEREAMI = REPO / "kernels" / "bin" / "whereami"
RUN = str(REPO / "launchers" / "topobind-run")
NO_SLURM = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}

pytestmark = [
    pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 PUs"),
]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, env=NO_SLURM, cwd=cwd, timeout=120
    )


def placements(stdout: str) -> dict[tuple[int, int], int]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            for p in json.loads(line)["placement"]:
                out[(p["rank"], p["thread"])] = p["cpu"]
    return out


def test_openmp_only_verified(tmp_path: Path) -> None:
    out = run(
        RUN, "--layout", "compact", "--threads", "2", "--verify", "--", str(WHEREAMI), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "all 2 threads on their planned CPUs" in out.stderr
    assert placements(out.stdout) == {(0, 0): 0, (0, 1): 1}
    assert not list(tmp_path.iterdir()), "run left files behind"


@pytest.mark.parametrize("mpi", ["openmpi4", "openmpi5"])
def test_two_mpi_ranks_verified(mpi: str, tmp_path: Path) -> None:
    out = run(
        RUN,
        "--layout",
        "compact",
        "--ranks",
        "2",
        "--mpi",
        mpi,
        "--verify",
        "--",
        str(WHEREAMI),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert placements(out.stdout) == {(0, 0): 0, (1, 0): 1}


def test_arguments_pass_through_untouched(tmp_path: Path) -> None:
    args = ["a b", "$HOME", ";", "*", "'q'", ""]
    out = run(
        RUN, "--layout", "compact", "--ranks", "1", "--", "printf", "<%s>\n", *args, cwd=tmp_path
    )
    assert out.returncode == 0
    assert out.stdout.splitlines() == [f"<{a}>" for a in args]


@pytest.mark.parametrize("ranks", ["1", "2"])
def test_exit_status_passed_through(ranks: str, tmp_path: Path) -> None:
    out = run(RUN, "--ranks", ranks, "--", "sh", "-c", "exit 7", cwd=tmp_path)
    assert out.returncode == 7


def test_dry_run_prints_exact_command(tmp_path: Path) -> None:
    out = run(
        TOPOBIND,
        "run",
        "--dry-run",
        "--layout",
        "compact",
        "--ranks",
        "2",
        "--mpi",
        "openmpi4",
        "--",
        "./app",
        "x y",
        cwd=tmp_path,
    )
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert "export OMP_NUM_THREADS=1" in lines and "export OMP_PROC_BIND=close" in lines
    cmd = next(ln for ln in lines if ln.startswith("/usr/bin/mpirun"))
    assert cmd.startswith("/usr/bin/mpirun -np 2 --map-by ppr:2:l3cache:PE=1 --bind-to core ")
    assert cmd.endswith("-- ./app 'x y'")


def test_verify_catches_a_wrong_binding() -> None:
    # The plan wants threads on CPUs 0 and 1; taskset forces both onto CPU 1.
    out = run(
        TOPOBIND,
        "verify",
        "--layout",
        "compact",
        "--threads",
        "2",
        "--",
        "env",
        "OMP_NUM_THREADS=2",
        "OMP_PROC_BIND=false",
        "taskset",
        "-c",
        "1",
    )
    assert out.returncode == 1
    assert "MISMATCH" in out.stdout and "1 of 2 threads on their planned CPU" in out.stdout


def test_verify_passes_a_right_binding_and_json() -> None:
    out = run(
        TOPOBIND,
        "verify",
        "--layout",
        "compact",
        "--threads",
        "2",
        "-f",
        "json",
        "--",
        "env",
        "OMP_NUM_THREADS=2",
        "OMP_PLACES={0},{1}",
        "OMP_PROC_BIND=close",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and [r["cpu"] for r in doc["rows"]] == [0, 1]


def test_bad_input(tmp_path: Path) -> None:
    out = run(RUN, "--launcher", "srun", "--", "true", cwd=tmp_path)
    assert out.returncode == 2 and "needs a Slurm allocation" in out.stderr
    out = run(RUN, "--ranks", "5", "--", "true", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    out = run(RUN, "--layout", "compact", cwd=tmp_path)
    assert out.returncode == 2 and "no program given" in out.stderr
    env = {**NO_SLURM, "TOPOBIND_KERNELS_DIR": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [TOPOBIND, "run", "--verify", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 2 and "make kernels" in out.stderr


def test_env_launcher_is_evaluable() -> None:
    script = (
        f'eval "$({REPO}/launchers/topobind-env --layout compact --threads 2)"; '
        'echo "$OMP_NUM_THREADS $OMP_PLACES $OMP_PROC_BIND"'
    )
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "2 {0},{1} close"
