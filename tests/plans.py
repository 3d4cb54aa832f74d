"""The tests' shorthand over the one planning entry, :func:`topobind.plan.request.plan`.

``plan_of(topo, "spread", ranks=2)`` is ``request.plan`` of that request: the layout's plan,
then each rank's memory. The memory defaults to what the kernel does by itself (``mem
none``, ``pages thp``: nothing for a step to apply), so a test of a layout, an emitter or a
launcher sees the layout's plan alone; give ``mem=`` / ``pages=`` for a memory plan, as the
commands' ``--mem`` / ``--pages`` do.
"""

from __future__ import annotations

from collections.abc import Mapping

from topobind.plan import request
from topobind.plan.model import Plan
from topobind.topo.topology import Topology


def plan_of(
    topo: Topology,
    layout: str,
    ranks: int | None = None,
    threads: int | None = None,
    smt: bool = False,
    cpukind: str = "performance",
    options: Mapping[str, object] | None = None,
    mem: str = "none",
    pages: str = "thp",
) -> Plan:
    """``request.plan`` of ``layout`` (``NAME[:N]``) on ``topo`` with these fields."""
    req = request.parse(
        layout, ranks=ranks, threads=threads, smt=smt, cpukind=cpukind,
        options=dict(options or {}), mem=mem, pages=pages,
    )  # fmt: skip
    return request.plan(topo, req)
