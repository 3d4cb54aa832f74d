"""Topology sources for tests: every XML in ../shared/topologies and every synthetic line."""

from __future__ import annotations

from pathlib import Path

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


def plan_or_skip(src: str, layout: str, smt: bool, **kw: int):  # type: ignore[no-untyped-def]
    """The plan, or skip the test when the layout does not apply to this topology."""
    import pytest

    from topobind.errors import PlanError
    from topobind.plan.layouts import make_plan
    from topobind.topo.topology import load

    try:
        return make_plan(load(src), layout, smt=smt, **kw)
    except PlanError as exc:
        pytest.skip(f"layout does not apply: {exc}")
