"""Real placement on this machine's cores: the emitted OMP_* environment and mpirun flags
put every thread and rank on the planned CPU, as the whereami probe reports it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ompi_oracle import OMPI4, OMPI5, ROOT_ENV, have_ompi4, have_ompi5
from paths import REPO
from plans import plan_of

from topobind.emit.omp import omp_env
from topobind.emit.openmpi import openmpi_argv
from topobind.plan.model import Plan
from topobind.topo.topology import load

WHEREAMI = REPO / "kernels" / "bin" / "whereami"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first"),
]


def _probe(cmd: list[str], env: dict[str, str]) -> list[dict]:  # type: ignore[type-arg]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=True)
    docs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [p for d in docs for p in d["placement"]]


def _live_plan(layout: str, **kw: int) -> Plan:
    topo = load("live")
    if len(topo.cores) < 2:
        pytest.skip("needs 2 cores")
    return plan_of(topo, layout, **kw)


def _reversed(plan: Plan) -> Plan:
    """The same plan with the thread order reversed, so a test passing by luck would fail."""
    r0 = plan.ranks[0]
    return plan._replace(ranks=(r0._replace(places=tuple(reversed(r0.places))),))


@pytest.mark.parametrize("reverse", [False, True])
def test_openmp_threads_on_planned_pus(reverse: bool) -> None:
    plan = _live_plan("compact", ranks=1, threads=2)
    if reverse:
        plan = _reversed(plan)
    env = {**os.environ, **omp_env(plan)}
    placement = _probe([str(WHEREAMI)], env)
    got = {p["thread"]: p["cpu"] for p in placement}
    assert got == {t: place[0] for t, place in enumerate(plan.ranks[0].places)}


@pytest.mark.parametrize(
    "version,mpirun",
    [
        pytest.param(5, OMPI5, marks=pytest.mark.skipif(not have_ompi5(), reason="no OpenMPI 5")),
        pytest.param(4, OMPI4, marks=pytest.mark.skipif(not have_ompi4(), reason="no OpenMPI 4")),
    ],
)
def test_mpi_ranks_on_planned_cores(version: int, mpirun: str, tmp_path: Path) -> None:
    plan = _live_plan("compact", ranks=2, threads=1)
    launch = openmpi_argv(plan, version, rankfile_path=str(tmp_path / "rf"))
    if launch.rankfile:
        (tmp_path / "rf").write_text(launch.rankfile)
    env = {**os.environ, **ROOT_ENV, **omp_env(plan)}
    placement = _probe([mpirun, *launch.argv[1:], str(WHEREAMI)], env)
    got = {p["rank"]: p["cpu"] for p in placement}
    assert got == {r.rank: r.places[0][0] for r in plan.ranks}
    for p in placement:  # bound, not floating: the mask is the planned core's PUs
        assert p["affinity"] == list(plan.core_pus(plan.ranks[p["rank"]]))
