"""Kernels: where threads and ranks really ran (whereami, c2c, stream placement)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from conftest_kernels import omp_env

from topobind.measure import programs as kernels
from topobind.measure import results

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0),
        reason="needs CPUs 0 and 1 in the affinity mask",
    ),
    pytest.mark.usefixtures("built_kernels"),
]
MPIRUN4 = "/usr/bin/mpirun"
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.mark.parametrize(("places", "cpus"), [("{0},{1}", [0, 1]), ("{1},{0}", [1, 0])])
def test_whereami_follows_omp_places(places: str, cpus: list[int]) -> None:
    res = kernels.run_kernel("whereami", ["--spin-ms", "20"], env=omp_env(2, places))
    assert res.kernel == "whereami" and res.headline is None and res.metrics == {}
    assert res.threads == 2
    assert [p.thread for p in res.placement] == [0, 1]
    assert res.cpus() == cpus
    assert [p.affinity for p in res.placement] == [(c,) for c in cpus]
    assert all(p.host == res.host for p in res.placement)
    assert res.params["omp_places"] == [[c] for c in cpus]


def test_whereami_rank_from_launcher_environment() -> None:
    res = kernels.run_kernel(
        "whereami",
        ["--spin-ms", "1"],
        env={**omp_env(1), "SLURM_PROCID": None, "SLURM_NTASKS": None}
        | {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"},
    )
    assert res.ranks == 2 and res.rank == 1
    assert [(p.rank, p.thread) for p in res.placement] == [(1, 0)]


@pytest.mark.slow
@pytest.mark.skipif(not Path(MPIRUN4).exists(), reason="OpenMPI 4 mpirun not installed")
def test_whereami_json_lines_under_mpirun() -> None:
    run = kernels.run_kernel_raw(
        "whereami",
        ["--spin-ms", "5"],
        env={**omp_env(1), **MPI_ENV},
        launcher=[MPIRUN4, "-np", "2", "--bind-to", "core", "--map-by", "core"],
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 2
    docs = sorted(results.load_results(run.stdout), key=lambda r: r.placement[0].rank)
    assert [r.placement[0].rank for r in docs] == [0, 1]
    assert all(r.ranks == 2 for r in docs)
    masks = [r.placement[0].affinity for r in docs]
    assert all(m is not None and len(m) == 1 for m in masks) and masks[0] != masks[1]
    assert [r.placement[0].cpu for r in docs] == [m[0] for m in masks if m]


@pytest.mark.slow
@pytest.mark.skipif(not Path(MPIRUN4).exists(), reason="OpenMPI 4 mpirun not installed")
def test_whereami_mpi_gathers_one_document() -> None:
    if not (kernels.kernels_dir() or Path()).joinpath("whereami-mpi").exists():
        pytest.skip("whereami-mpi not built (no mpicc)")
    run = kernels.run_kernel_raw(
        "whereami-mpi",
        ["--spin-ms", "5"],
        env={**omp_env(2), **MPI_ENV},
        launcher=[MPIRUN4, "-np", "2", "--bind-to", "core", "--map-by", "core"],
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("\n") == 1
    res = results.load_result(run.stdout)
    assert res.ranks == 2 and res.params["mpi"] is True
    assert sorted((p.rank, p.thread) for p in res.placement) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for rank in (0, 1):
        cpus = {p.cpu for p in res.placement if p.rank == rank}
        assert len(cpus) == 1  # --bind-to core: both threads of a rank share its core


@pytest.mark.slow
def test_c2c_pair_0_1() -> None:
    res = kernels.run_kernel("c2c", ["--cpus", "0,1", "--iters", "2000", "--samples", "5"])
    assert res.valid
    assert res.headline is not None and res.headline.unit == "ns"
    assert math.isfinite(res.headline.value) and res.headline.value > 0
    m = res.matrices["c2c"]
    assert m.rows == m.cols == (0, 1) and m.row_kind == m.col_kind == "cpu"
    assert m.value(0, 0) is None and m.value(1, 1) is None  # the diagonal: not measured
    assert m.value(0, 1) == m.value(1, 0) == res.headline.value
    assert res.cpus() == [0, 1]
    assert len(res.params["pair_samples_ns"][0]) == 5


@pytest.mark.slow
def test_stream_records_bound_threads() -> None:
    res = kernels.run_kernel(
        "stream",
        ["--elements", "10M", "--trials", "2", "--pages", "4k"],
        env=omp_env(2, "{1},{0}"),
    )
    assert res.cpus() == [1, 0]
    assert [p.numa for p in res.placement] == [_node_of(1), _node_of(0)]


def _node_of(cpu: int) -> int:
    nodes = list(Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node[0-9]*"))
    return int(nodes[0].name[4:]) if nodes else 0
