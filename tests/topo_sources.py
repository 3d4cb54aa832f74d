"""Topology sources for tests: every XML in topologies/ and every synthetic line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from paths import TOPOLOGIES


def xml_files() -> list[Path]:
    return sorted(TOPOLOGIES.glob("*.xml"))


def synthetic() -> dict[str, str]:
    """name -> 'synthetic:DESCRIPTION' from synthetic.tsv."""
    out: dict[str, str] = {}
    for line in (TOPOLOGIES / "synthetic.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, desc, *_ = line.split("\t")
        out[name] = "synthetic:" + desc
    return out


def all_sources() -> list[tuple[str, str]]:
    """(test id, topology source) for every shared topology."""
    return [(p.stem, str(p)) for p in xml_files()] + list(synthetic().items())


BETZY = synthetic().get(
    "betzy-epyc7742", "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)"
)


def layout_cases(l3_group: int) -> tuple[list[tuple[str, str, str, bool]], list[str]]:
    """(name, source, layout, smt) for every layout on every shared topology, and test ids."""
    layouts = [
        "compact",
        "spread",
        "every-other-core",
        "per-l3",
        "per-numa",
        "per-socket",
        f"l3-groups:{l3_group}",
    ]
    cases = [(n, s, lay, smt) for n, s in all_sources() for lay in layouts for smt in (False, True)]
    return cases, [f"{c[0]}-{c[2]}-{'smt' if c[3] else 'core'}" for c in cases]


#: the topologies whose layout cases stay in the fast tier (``pytest -m "not slow"``): the
#: flagship node, offline PUs on 4 SMT sockets, KNL's SNC4 NUMA, nested groups; every other
#: topology's cases are marked slow (the whole matrix runs in ``make test``)
FAST_TOPOLOGIES = (
    "betzy-epyc7742",
    "16em64t-4s2c2t-offlines",
    "64intel64-fakeKNL-SNC4-hybrid",
    "16-2gr2gr2n2c+misc",
)


def layout_params(l3_group: int) -> list[Any]:
    """``layout_cases`` as pytest parameters, those outside FAST_TOPOLOGIES marked slow."""
    cases, ids = layout_cases(l3_group)
    return [
        pytest.param(*c, id=i, marks=() if c[0] in FAST_TOPOLOGIES else pytest.mark.slow)
        for c, i in zip(cases, ids, strict=True)
    ]


def plan_or_skip(src: str, layout: str, smt: bool, **kw: int):  # type: ignore[no-untyped-def]
    """The plan, or skip the test when the layout does not apply to this topology."""
    from plans import plan_of

    from topobind.errors import PlanError
    from topobind.topo.topology import load

    try:
        return plan_of(load(src), layout, smt=smt, **kw)
    except PlanError as exc:
        pytest.skip(f"layout does not apply: {exc}")
