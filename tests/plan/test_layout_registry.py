"""The layout registry is the one vocabulary: the CLI, its help, the run epilog, the plan
schema and docs/layouts.md all name exactly the layouts of ``topobind.plan.layouts.REGISTRY``."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import run_topobind
from paths import REPO, TOPOLOGIES
from plans import plan_of
from topo_sources import BETZY

from topobind.errors import PlanError
from topobind.plan.layouts import (
    LAYOUTS,
    MAX_LAYOUT_PARAMETER,
    REGISTRY,
    layout_pattern,
    one_rank_per_domain,
    parse_layout,
)
from topobind.plan.model import plan_schema
from topobind.topo.topology import load


def _help(*argv: str) -> str:
    out = run_topobind(*argv, "--help")
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_schema_pattern_is_the_registry() -> None:
    assert plan_schema()["properties"]["layout"]["pattern"] == layout_pattern()


def test_docs_layouts_list_is_the_registry() -> None:
    headings = re.findall(r"^## (\S+)$", (REPO / "docs" / "layouts.md").read_text(), re.M)
    listed = [h for h in headings if h[0].islower()]
    assert sorted(listed) == sorted(lay.usage for lay in REGISTRY)


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv", [("plan",), ("run",), ("env",), ("verify",), ("draw",), ("bench", "stream")]
)
def test_every_planning_command_lists_every_layout(argv: tuple[str, ...]) -> None:
    text = "".join(_help(*argv).split())  # argparse wraps lines, even inside a name
    for lay in REGISTRY:
        assert "".join(f"{lay.usage}: {lay.help}".split()) in text, (argv, lay.name)


@pytest.mark.slow
def test_run_epilog_names_the_layouts_with_their_own_rank_count() -> None:
    text = " ".join(_help("run").split())
    m = re.search(r"one rank per domain \(([^)]*)\)", text)
    assert m is not None
    assert m.group(1).split(", ") == [lay.usage for lay in REGISTRY if lay.one_rank_per_domain]


@pytest.mark.parametrize("layout", [lay.name for lay in REGISTRY])
def test_every_spelling_plans_and_matches_the_schema(layout: str) -> None:
    spec = next(lay for lay in REGISTRY if lay.name == layout)
    text = f"{layout}:4" if spec.parameter else layout
    tioga = TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml"
    node = load(str(tioga)) if spec.needs_gpus else load(BETZY)
    plan = plan_of(node, text)
    assert plan.layout == text
    assert re.fullmatch(layout_pattern(), text)
    assert one_rank_per_domain(text) is spec.one_rank_per_domain
    if spec.one_rank_per_domain:  # the count comes from the topology, not a default of 1
        assert plan.nranks > 1


@pytest.mark.parametrize(
    "text,says",
    [
        (
            "cmpact",
            "unknown layout 'cmpact' (did you mean 'compact'?); choose one of: "
            + ", ".join(LAYOUTS),
        ),
        ("l3-groups", "needs a size"),
        ("l3-groups:", "must be a whole number"),
        ("l3-groups:0", "must be a whole number"),
        ("l3-groups:-4", "must be a whole number"),
        ("l3-groups:²", "must be a whole number"),
        ("l3-groups:٣", "must be a whole number"),  # Arabic-Indic 3: int() takes it, we do not
        ("l3-groups:4.0", "must be a whole number"),
        ("l3-groups:nan", "must be a whole number"),
        (f"l3-groups:{MAX_LAYOUT_PARAMETER + 1}", "must be a whole number"),
        ("l3-groups:" + "9" * 5000, "must be a whole number"),
        ("per-l3:4", "takes no ':4'"),
        ("", "unknown layout ''"),
    ],
)
def test_bad_spellings_are_refused_with_one_line(text: str, says: str) -> None:
    with pytest.raises(PlanError) as exc:
        parse_layout(text)
    assert says in str(exc.value) and "\n" not in str(exc.value)
    assert len(str(exc.value)) < 300


def test_registry_names_are_unique_and_schema_safe() -> None:
    names = [lay.name for lay in REGISTRY]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", n) for n in names)
    assert json.dumps(layout_pattern())  # a plain string the schema file can hold


def test_a_new_layout_with_its_own_option_joins_by_one_registry_entry(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """How per-gpu (or any layout) joins: one Layout with its options; the CLI grows the
    option, the help and the parser know the name, the planner gets the option's value."""
    from topobind.cli import main as cli
    from topobind.cli.commands.common import plan_from
    from topobind.plan import layouts
    from topobind.plan.layouts import Layout, LayoutOption, PlanRequest, Slot, by_slots, compact

    seen: list[PlanRequest] = []

    def every_nth(topo, req: PlanRequest) -> list[list[Slot]]:  # type: ignore[no-untyped-def]
        seen.append(req)
        return compact(topo, req)

    extra = Layout(
        "every-nth",
        by_slots(every_nth),
        "a test layout",
        options=(LayoutOption("--nth", "nth", "take every Nth core", most=8),),
    )
    monkeypatch.setattr(layouts, "REGISTRY", (*layouts.REGISTRY, extra))
    parser = cli.build_parser(("topobind.cli.commands.topo",))
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "every-nth: a test layout" in shown and "--nth N (every-nth) take every" in shown
    args = parser.parse_args(["plan", "-t", BETZY, "-l", "every-nth", "--nth", "3", "-r", "2"])
    plan = plan_from(args)
    assert plan.layout == "every-nth" and plan.nranks == 2
    assert seen[0].options == {"nth": 3}
    assert re.fullmatch(layout_pattern(), "every-nth")
