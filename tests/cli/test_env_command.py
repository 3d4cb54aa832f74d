"""``topobind env`` in its own command module: the exports of the launch engine's, without it."""

from __future__ import annotations

import pytest
from paths import TOPOLOGIES

from topobind.emit.omp import script_env
from topobind.launch.rank_step import job_env
from topobind.launch.shape import JobShape
from topobind.plan import request
from topobind.topo.topology import load

CASES = [
    ("192em64t-24n8c2t.xml", "spread", None, 192),
    ("192em64t-24n8c2t.xml", "compact", 2, 4),
    ("192em64t-24n8c2t.xml", "spread", 3, 1),  # one rank: its exact places
    ("16em64t-4s2c2t.xml", "per-l3", None, None),
    ("gpu/mpibind-coral-lassen.xml", "per-gpu", None, None),  # per-rank device variables
    ("gpu/mpibind-coral-lassen.xml", "per-gpu", None, 1),  # one rank: its device variables
]


@pytest.mark.parametrize("xml,layout,threads,ranks", CASES)
def test_env_exports_what_a_launcherless_job_shape_exports(
    xml: str, layout: str, threads: int | None, ranks: int | None
) -> None:
    """``script_env`` (what ``topobind env`` prints, without importing the launch stack) is
    ``rank_step.job_env`` of a shape with no launcher, the variables ``env`` printed before."""
    req = request.parse(layout, threads=threads, ranks=ranks)
    plan = request.plan(load(str(TOPOLOGIES / xml)), req)
    assert script_env(plan) == job_env(JobShape(plan=plan))
    assert script_env(plan)["TOPOBIND_LAYOUT"] == layout
