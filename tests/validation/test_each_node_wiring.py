"""validate --each-node's wiring (issue 30 items 1-3): the verdicts as metrics (a slow node
with its ratio and strength, a non-conforming one), the expected run time from the last
--each-node report (nodes side by side up to max_jobs) and the per-node budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_topobind

from topobind.errors import TopobindError
from topobind.validation import metrics, progress
from topobind.validation.verdict import (
    Failure,
    Observations,
    Sample,
    figure_verdicts,
    node_verdicts,
)


def test_each_node_verdicts_become_metrics() -> None:
    obs = Observations()
    for run in range(3):
        for node, value in (("n1", 1000.0), ("n2", 1010.0), ("n3", 250.0), ("n4", 990.0)):
            obs.samples.append(Sample(node, "StreamCheck", "compact", "triad", value, "MB/s", run))
    obs.failures.append(Failure("n4", "conformance", "-", "cores: expected 4, found 2"))
    obs.ran_on = {n: {"StreamCheck"} for n in ("n1", "n2", "n3", "n4")}
    figures = figure_verdicts(obs.samples, 0.05)
    verdicts = node_verdicts(["n1", "n2", "n3", "n4"], obs, figures)
    nodes, figs = metrics.from_each_node(verdicts, figures, obs.failures)
    state = {n.node: (n.verdict, n.strong) for n in nodes}
    assert state["n1"] == ("ok", True)
    assert state["n3"][0] == "slow" and state["n3"][1] is False  # 3 runs: a weak verdict
    assert state["n4"][0] == "nonconforming"
    slow = next(f for f in figs if f.node == "n3")
    assert slow.value == 250.0 and slow.reference == pytest.approx(995.0)  # the fleet median
    text = metrics.render(nodes, figs, site="s", partition="p")
    assert 'topobind_node_verdict{site="s",partition="p",node="n3",verdict="slow"} 1.0' in text
    ratio = [ln for ln in text.splitlines() if ln.startswith("topobind_check_ratio") and "n3" in ln]
    assert len(ratio) == 1 and float(ratio[0].split()[-1]) == pytest.approx(250 / 995)


def test_a_node_whose_job_never_started_is_not_tested_in_the_metrics() -> None:
    """One job a node: NOT STARTED judged nothing (not tested, no strong verdict); a node whose
    job died (UNREACHABLE) is a fail."""
    from topobind.validation.verdict import NodeVerdict

    verdicts = [
        NodeVerdict("n1", "NOT STARTED", False, ("its job 7 did not start",), None),
        NodeVerdict("n2", "UNREACHABLE", False, ("its job ended NODE_FAIL",), None),
    ]
    nodes, _ = metrics.from_each_node(verdicts, [], [])
    assert {n.node: (n.verdict, n.strong) for n in nodes} == {
        "n1": ("not_tested", False), "n2": ("fail", True)}  # fmt: skip


def _case(node: str, check: str, variant: str, result: str, phase: str, *figs: Any) -> Any:
    from topobind.validation.reframe_report import TestCase

    return TestCase(check, variant, node, (node,) if node else (), "s", "p", result, phase, "",
                    tuple(figs), "h", 0, "", check)  # fmt: skip


def test_plain_validate_verdicts_become_metrics() -> None:
    from topobind.validation.reframe_report import Figure

    triad = Figure("triad", 2500.0, 10000.0, -0.1, 0.1, "MB/s", "fail")
    lat = Figure("latency_ns", 90.0, 100.0, -0.2, 0.2, "ns", "pass")
    cases = [
        _case("", "StreamCheck", "compact", "fail", "performance", triad),  # this machine
        _case("", "LatencyCheck", "local", "pass", "", lat),
        _case("n2", "BindingCheck", "compact", "fail", "sanity"),
        _case("n3", "C2CCheck", "cross-l3", "skip", ""),
    ]
    nodes, figs = metrics.from_validate(cases, "here")
    state = {n.node: (n.verdict, n.strong) for n in nodes}
    # one run against a reference: a missed target is a weak 'slow', a sanity failure 'fail'
    assert state == {"here": ("slow", False), "n2": ("fail", True)}
    got = {f.metric: (f.node, f.value, f.reference, f.runs, f.strong) for f in figs}
    assert got == {"triad": ("here", 2500.0, 10000.0, 1, False),
                   "latency_ns": ("here", 90.0, 100.0, 1, False)}  # fmt: skip
    text = metrics.render(nodes, figs, site="s", partition="p")
    ratio = [ln for ln in text.splitlines() if ln.startswith("topobind_check_ratio")]
    assert any('metric="triad"' in ln and ln.endswith(" 0.25") for ln in ratio), text


def _report(path: Path, nodes: int, checks: int, runs: int, elapsed: float) -> None:
    cases = [
        {"name": f"C{c}", "display_name": f"C{c} %.part=s:p %.nid=n{n}", "system": "s",
         "partition": "p", "result": "pass", "perfvalues": {}}
        for c in range(checks) for n in range(1, nodes + 1)
    ]  # fmt: skip
    doc = {"session_info": {"time_elapsed": elapsed},
           "runs": [{"runs_index": r, "testcases": cases} for r in range(runs)]}  # fmt: skip
    path.write_text(json.dumps(doc))


def test_expected_time_from_the_last_report_and_max_jobs(tmp_path: Path) -> None:
    report = tmp_path / "each-node-s-p-1.json"
    _report(report, nodes=3, checks=2, runs=3, elapsed=90.0)  # 18 check runs: 5 s each
    one = progress.expected_time([str(report)], nodes=3, repeat=3, max_jobs=1)
    assert one.per_node == pytest.approx(30.0) and one.seconds == pytest.approx(90.0)
    assert "3 node(s) x 2 checks x 3 runs at 5.0 s a check, 1 node(s) at a time" in one.text
    side = progress.expected_time([str(report)], nodes=3, repeat=3, max_jobs=16)
    assert side.seconds == pytest.approx(30.0)  # the nodes side by side
    none = progress.expected_time([], nodes=3, repeat=3, max_jobs=1)
    assert none.seconds is None and "unknown" in none.text
    (tmp_path / "bad.json").write_text("{")
    assert progress.expected_time([str(tmp_path / "bad.json")], 3, 3, 1).seconds is None


def test_budget_durations() -> None:
    assert progress.parse_duration("10m", "x") == 600
    assert progress.parse_duration(90, "x") == 90
    with pytest.raises(TopobindError, match="site.yaml: settings.node_budget: 'soon'"):
        progress.parse_duration("soon", "site.yaml: settings.node_budget")


def test_metrics_needs_a_prom_file_before_any_run(tmp_path: Path) -> None:
    # plain validate takes --metrics too, and checks the name before running anything
    plain = run_topobind("validate", "--site", "local", "--metrics", str(tmp_path / "m.txt"))
    assert plain.returncode == 2 and "name it m.prom" in plain.stderr, plain.stderr
    assert "topobind: " in plain.stderr and "reframe" not in plain.stderr.lower()
    site = run_topobind("site", "check", "local", "--metrics", str(tmp_path / "m.txt"))
    assert site.returncode == 2 and "add --live" in site.stderr


def test_quick_acceptance_leaves_out_what_costs_minutes_or_judges_nothing() -> None:
    from topobind.validation import acceptance

    assert acceptance.quick_exclusions("quick")[:4] == ["-x", "HplCheck", "-x", "BindingCheck"]
    assert acceptance.quick_exclusions("full") == []


def test_expected_time_counts_the_checks_of_a_run_of_the_same_checks(tmp_path: Path) -> None:
    """Issue 37 item 24: the expected time counted the checks of the previous run whatever
    this one runs (a -n StreamCheck run timed a --tags quick one by its one check)."""
    import shlex
    from types import SimpleNamespace

    reports = tmp_path / "reports"
    reports.mkdir()

    def write(name: str, checks: int, argv: list[str]) -> None:
        _report(reports / name, nodes=3, checks=checks, runs=1, elapsed=15.0 * checks)
        doc = json.loads((reports / name).read_text())
        doc["session_info"] = {"cmdline": shlex.join(argv), **doc["session_info"]}
        (reports / name).write_text(json.dumps(doc))

    write("each-node-s-p-1.json", 6, ["reframe", "-t", "quick", "-r"])
    write("each-node-s-p-2.json", 1, ["reframe", "-t", "quick", "-n", "StreamCheck", "-r"])
    site = SimpleNamespace(name="s", partition=lambda p: SimpleNamespace(max_jobs=1))
    quick = progress.expected_run(site, "p", 3, 3, tmp_path, ("quick", ()))
    assert "3 node(s) x 6 checks x 3 runs" in quick.text and "each-node-s-p-1.json" in quick.text
    one = progress.expected_run(site, "p", 3, 3, tmp_path, ("quick", ("StreamCheck",)))
    assert "x 1 checks x" in one.text
    other = progress.expected_run(site, "p", 3, 3, tmp_path, ("full", ()))
    assert other.seconds is None and "no earlier --each-node run of these checks (-t full)" in (
        other.text)  # fmt: skip
    # the smoke tier runs ReFrame -t quick at its smallest sizes: timed by a smoke run only
    from topobind.validation.node_jobs import SMOKE_VARS

    smoke_s = [a for k, v in SMOKE_VARS.items() for a in ("-S", f"{k}={v}")]
    smoke = progress.expected_run(site, "p", 3, 3, tmp_path, ("smoke", ()), SMOKE_VARS)
    assert smoke.seconds is None and "(-t smoke)" in smoke.text
    write("each-node-s-p-3.json", 4, ["reframe", "-t", "quick", *smoke_s, "-r"])
    smoke = progress.expected_run(site, "p", 3, 3, tmp_path, ("smoke", ()), SMOKE_VARS)
    assert "x 4 checks x" in smoke.text and "each-node-s-p-3.json" in smoke.text
    quick = progress.expected_run(site, "p", 3, 3, tmp_path, ("quick", ()), SMOKE_VARS)
    assert "each-node-s-p-1.json" in quick.text  # not the smoke run's


def test_the_same_warning_of_every_check_is_said_once() -> None:
    """Issue 37 item 24: the STREAM cap's warning came 18 times a pass (once per check run)."""
    from topobind.validation.reframe_runs import _first_time

    warned: dict[str, int] = {}
    lines = [f"WARNING: StreamCheck %layout=compact %.part=local:slurm %.nid=node{n}: the cap "
             "of 4.0 GB moved per run (3 trials)" for n in (1, 2, 3)]  # fmt: skip
    lines.append("WARNING: LatencyCheck %.part=local:slurm %.nid=node1: other")
    assert [_first_time(ln, warned, False) for ln in lines] == [True, False, False, True]
    assert _first_time(lines[1], warned, True)  # --verbose shows everything
    assert _first_time("[ OK ] (1/2) StreamCheck", warned, False)


def test_a_skipped_check_says_reframes_reason(tmp_path: Path) -> None:
    """Issue 37 item 24: 'skip C2CCheck: skipped' without its reason (the report has none; the
    status line has it: in the node's job output, one job a node)."""
    from types import SimpleNamespace

    from topobind.validation import acceptance, bundles, reframe_report

    (tc,) = reframe_report.cases_of([{
        "display_name": "C2CCheck %pair=cross-l3 %.part=s:p %.nid=n1", "system": "s",
        "partition": "p", "result": "skip", "hashcode": "68d43045aa",
        "perfvalues": {}}])  # fmt: skip
    report = reframe_report.Report("r", (tc,), None, 1)
    obs = acceptance.observe([report], "s")
    assert obs.skipped == {"C2CCheck": "skipped"}
    output = tmp_path / "n1.out"
    output.write_text("[ RUN      ] C2CCheck %pair=cross-l3 /68d43045 @s:p+builtin\n"
                      "\x1b[33m[     SKIP ]\x1b[0m (1/1) C2CCheck %pair=cross-l3 /68d43045 "
                      "@s:p+builtin [cross-l3 needs two L3 domains]\n")  # fmt: skip
    one = SimpleNamespace(parsed=[report], skip_reasons=bundles.skip_reasons(output))
    assert one.skip_reasons == {"68d43045": "cross-l3 needs two L3 domains"}
    acceptance._skip_reasons(obs, one)
    assert obs.skipped == {"C2CCheck": "cross-l3 needs two L3 domains"}


def test_plain_validate_without_references_is_not_judged_in_the_metrics() -> None:
    """The same rule elsewhere (issue 37): a node whose figures had no reference to miss was
    'ok' in the metrics; a sanity-only check that passed does judge its node."""
    from topobind.validation.reframe_report import Figure

    bare = Figure("triad", 2500.0, 0.0, None, None, "MB/s", "pass")
    cases = [_case("n1", "StreamCheck", "compact", "pass", "", bare),
             _case("n2", "StreamCheck", "compact", "pass", "", bare),
             _case("n2", "BindingCheck", "compact", "pass", "")]  # fmt: skip
    nodes, _ = metrics.from_validate(cases, "here")
    assert {n.node: (n.verdict, n.strong) for n in nodes} == {
        "n1": ("not_judged", False), "n2": ("ok", True)}  # fmt: skip
