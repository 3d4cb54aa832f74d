"""Real Slurm jobs on the local cluster: the example job scripts and the launchers, each
verified by the placement probe; a wrong binding is caught."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND
from paths import REPO
from slurm_helpers import sbatch_wait

EXAMPLES = REPO / "docs" / "examples"
WHEREAMI = REPO / "kernels" / "bin" / "whereami"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first"),
]


def placements(text: str) -> dict[tuple[int, int], int]:
    out = {}
    for line in text.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            if doc.get("kernel") == "whereami":
                for p in doc["placement"]:
                    out[(p["rank"], p["thread"])] = p["cpu"]
    return out


def test_cluster_binds_with_task_affinity(local_slurm: dict[str, str]) -> None:
    out = subprocess.run(
        [
            "srun",
            "-n",
            "2",
            "--cpu-bind=map_cpu:1,0",
            "bash",
            "-c",
            "echo $SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2)",
        ],
        capture_output=True,
        text=True,
        env=local_slurm,
        timeout=60,
    )
    assert sorted(out.stdout.split("\n")[:2]) == ["0 1", "1 0"], out.stderr


@pytest.mark.parametrize(
    "script,expected",
    [
        ("openmp-only.sbatch", {(0, 0): 0, (0, 1): 1}),
        ("mpi-two-ranks-srun.sbatch", {(0, 0): 0, (1, 0): 1}),
        ("hybrid-per-l3.sbatch", {(0, 0): 0, (0, 1): 1}),  # mpirun inside the allocation
        ("mpi-every-other-core.sbatch", {(0, 0): 0}),
    ],
)
def test_example_job_scripts(
    local_slurm: dict[str, str], tmp_path: Path, script: str, expected: dict[tuple[int, int], int]
) -> None:
    env = {**local_slurm, "TOPOBIND_ROOT": str(REPO)}
    job = sbatch_wait(EXAMPLES / script, tmp_path, env)
    assert job.returncode == 0, job.output
    assert "threads on their planned CPUs" in job.output
    assert placements(job.output) == expected


def test_node_validation_array(local_slurm: dict[str, str], tmp_path: Path) -> None:
    from topobind.measure.results import load_result

    env = {
        **local_slurm,
        "TOPOBIND_ROOT": str(REPO),
        "RESULTS_DIR": str(tmp_path / "res"),
        "STREAM_ELEMENTS": "4M",
        "STREAM_TRIALS": "3",
    }
    job = sbatch_wait(EXAMPLES / "node-validation-array.sbatch", tmp_path, env)
    assert job.returncode == 0
    results = [load_result(p) for p in sorted((tmp_path / "res").glob("*/stream-*.json"))]
    # every array task ran every layout: the nodes are compared on the same kernels
    assert sorted(r.layout for r in results) == sorted(["compact", "every-other-core",
                                                        "per-l3"] * 3)  # fmt: skip
    assert all(r.valid for r in results)


def test_wrong_binding_is_caught_in_slurm(local_slurm: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "wrong.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --exclusive\n"
        f"{TOPOBIND} verify --layout compact --ranks 2 -- "
        "srun -n 2 --cpu-bind=map_cpu:1,0\n"
    )
    job = sbatch_wait(script, tmp_path, local_slurm)
    assert job.returncode != 0
    assert job.output.count("MISMATCH") == 2


def test_ranks_come_from_the_allocation(local_slurm: dict[str, str], tmp_path: Path) -> None:
    """No --ranks: `#SBATCH --ntasks=2` gives 2 ranks (srun), each verified on its CPU."""
    script = tmp_path / "alloc.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --exclusive\n"
        f"{REPO}/launchers/topobind-run --layout compact --verify -- {WHEREAMI}\n"
    )
    job = sbatch_wait(script, tmp_path, local_slurm)
    assert job.returncode == 0, job.output
    assert "all 2 threads on their planned CPUs, bound to them" in job.output
    assert placements(job.output) == {(0, 0): 0, (1, 0): 1}
    assert not list(tmp_path.glob(".topobind-run-*"))


def test_ignored_binding_is_caught_in_slurm(local_slurm: dict[str, str], tmp_path: Path) -> None:
    """srun --cpu-bind=none and OMP_PROC_BIND=false: every task may run anywhere. Whatever
    CPU each happened to run on, verify fails."""
    script = tmp_path / "unbound.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --exclusive\n"
        f"{TOPOBIND} verify --layout compact -- "
        "srun --cpu-bind=none env OMP_NUM_THREADS=1 OMP_PROC_BIND=false\n"
    )
    job = sbatch_wait(script, tmp_path, local_slurm)
    assert job.returncode == 1, job.output
    assert job.output.count("MISMATCH (") == 2
    assert "0 of 2 threads bound to their planned CPU; 2 not" in job.output


def test_two_ranks_through_mpirun_inside_the_allocation(
    local_slurm: dict[str, str], tmp_path: Path
) -> None:
    """topobind-run --launcher mpirun in a 2-task job: OpenMPI's mpirun starts both ranks
    inside the allocation with the plan's flags, and --verify proves each on its PU."""
    script = tmp_path / "mpirun.sbatch"
    run = f"{REPO}/launchers/topobind-run --layout compact --launcher mpirun"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --exclusive\n"
        f"{run} --dry-run -- {WHEREAMI}\n{run} --verify -- {WHEREAMI}\n"
    )
    job = sbatch_wait(script, tmp_path, local_slurm)
    assert job.returncode == 0, job.output
    # OpenMPI 5 (first on PATH under make test) or 4: either maps by ppr and binds to cores
    assert re.search(r"mpirun -np 2 --map-by ppr:\S+ --bind-to core ", job.output), job.output
    assert "all 2 threads on their planned CPUs, bound to them" in job.output
    assert placements(job.output) == {(0, 0): 0, (1, 0): 1}
