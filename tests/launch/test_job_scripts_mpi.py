"""Job scripts that just work: an MPI+OpenMP program through ``topobind-run`` on the local
3-node cluster (MpiDefault=none) gets srun's ``--mpi`` from the MPI it links, ``--verify``
runs the MPI probe (so a launch that cannot start MPI fails before the program), options
reach srun (``--srun-args``), and the threads per rank are checked against the job's."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, run_topobind, venv_bin
from paths import REPO
from slurm_helpers import (
    SlurmCluster,
    sbatch_wait,
    slurm_cluster3,  # noqa: F401  (session fixture)
)
from test_mpi_families import HYBRID_C

MPICC4 = Path("/usr/bin/mpicc")


def tb(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_topobind(*args, env={**NO_SLURM, **env}, timeout=120)


JOB = {"SLURM_JOB_ID": "42", "SLURM_NTASKS_PER_NODE": "1", "SLURM_JOB_NUM_NODES": "1"}


@pytest.mark.slow
def test_threads_disagreeing_with_the_job_are_warned_both_ways() -> None:
    out = tb("env", "-t", "synthetic:pack:1 core:2 pu:1", "-l", "compact", "--threads", "1",
             env={**JOB, "SLURM_CPUS_PER_TASK": "2"})  # fmt: skip
    assert out.returncode == 0
    assert "1 thread(s) per rank (--threads) but Slurm gives each task 2 CPU(s)" in out.stderr
    assert "1 CPU(s) of each task idle" in out.stderr
    out = tb("env", "-t", "synthetic:pack:1 core:2 pu:1", "-l", "compact",
             env={**JOB, "SLURM_CPUS_PER_TASK": "1", "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert "export OMP_NUM_THREADS=2" in out.stdout
    assert "OMP_NUM_THREADS=1 is exported but 2 thread(s) per rank are planned" in out.stderr
    assert "give --threads 1 to keep it" in out.stderr
    agree = tb("env", "-t", "synthetic:pack:1 core:2 pu:1", "-l", "compact", "--threads", "2",
               env={**JOB, "SLURM_CPUS_PER_TASK": "2", "OMP_NUM_THREADS": "2"})  # fmt: skip
    assert "warning" not in agree.stderr


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hybrid MPI+OpenMP program built with /usr/bin/mpicc (OpenMPI 4), in the
    repository's build/ (every node of the local cluster sees it)."""
    if not MPICC4.exists():
        pytest.skip("no /usr/bin/mpicc")
    d = REPO / "build" / "test-job-scripts-mpi"
    d.mkdir(parents=True, exist_ok=True)
    (d / "hybrid.c").write_text(HYBRID_C)
    subprocess.run([str(MPICC4), "-fopenmp", "-O1", str(d / "hybrid.c"), "-o", str(d / "hybrid")],
                   check=True, timeout=120)  # fmt: skip
    return d / "hybrid"


def _job(tmp_path: Path, cluster: SlurmCluster, run: str) -> tuple[int, str]:
    script = tmp_path / "job.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH -N 3 --ntasks-per-node=1 -c 2 --exclusive --time=3\n"
        f"export PATH={venv_bin('topobind').parent}:$PATH\nunset SLURM_MPI_TYPE\n{run}\n"
    )
    env = {k: v for k, v in cluster.env.items() if k != "SLURM_MPI_TYPE"}
    job = sbatch_wait(script, cluster=cluster, env=env, workdir=tmp_path, timeout=240)
    return job.returncode, job.output


@pytest.mark.slow
def test_hybrid_job_under_mpidefault_none_starts_without_exports(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    hybrid: Path,
    tmp_path: Path,
) -> None:
    conf = slurm_cluster3.run(["scontrol", "show", "config"]).stdout
    assert re.search(r"^MpiDefault\s*=\s*none", conf, re.M), "the test needs MpiDefault=none"
    run = f"topobind-run --layout compact --threads 2 --verify -- {hybrid} 300"
    code, out = _job(tmp_path, slurm_cluster3, run)
    assert code == 0, out
    assert "srun --mpi=pmix starts its MPI" in out
    assert "verify: all 6 threads on their planned CPUs" in out
    assert "size=3 sum=3" in out  # one MPI world of 3 ranks, not 3 singletons
    seen = re.findall(r"rank=(\d) thread=(\d) cpu=(\d)", out)
    assert sorted((r, t) for r, t, _ in seen) == [
        (str(r), str(t)) for r in range(3) for t in range(2)
    ]
    assert all(t == c for _, t, c in seen), out  # thread k on CPU k of its node (compact)


@pytest.mark.slow
def test_an_mpich_program_gets_pmi2(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A hybrid program built with MPICH (PyPI, .venv-mpich) gets --mpi=pmi2 (this MPICH
    refuses PMIx: "unsupported PMI version PMIx") and its own MPI probe verifies it."""
    mpicc = REPO / ".venv-mpich" / "bin" / "mpicc"
    if not mpicc.exists():
        pytest.skip("MPICH not installed (make setup-mpis)")
    d = REPO / "build" / "test-job-scripts-mpi"
    d.mkdir(parents=True, exist_ok=True)
    (d / "hybrid.c").write_text(HYBRID_C)
    prog = d / "hybrid-mpich"
    subprocess.run([str(mpicc), "-fopenmp", "-O1", str(d / "hybrid.c"), "-o", str(prog)],
                   check=True, timeout=120)  # fmt: skip
    run = f"topobind-run --layout compact --threads 2 --verify -- {prog} 300"
    code, out = _job(tmp_path, slurm_cluster3, run)
    assert code == 0, out
    assert "srun --mpi=pmi2 starts its MPI" in out
    assert "verify: all 6 threads on their planned CPUs" in out and "size=3 sum=3" in out


@pytest.mark.slow
def test_a_launch_that_cannot_start_mpi_fails_verification_first(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    hybrid: Path,
    tmp_path: Path,
) -> None:
    """--srun-args '--mpi=none' reaches srun (it wins over the detected --mpi): the MPI
    probe cannot start MPI, so the program is not launched."""
    run = shlex.join(["topobind-run", "--layout", "compact", "--threads", "2", "--verify",
                      "--srun-args", "--mpi=none", "--", str(hybrid), "300"])  # fmt: skip
    code, out = _job(tmp_path, slurm_cluster3, run)
    assert code != 0, out
    assert "rank=" not in out and "size=" not in out, out  # the program never ran
    assert "--mpi=pmix" not in out
