"""Honest estimates of ``validate --each-node`` (issue 48 item 3): a node's time is learnt only
from complete, successful runs of the same checks and tier (a failed run said "about 0:07"
for a run that took 87 s, a Ctrl-C'd one "about 0:01"), and the waves of max_submit are
counted (with max_submit 6 the estimate said "16 node(s) at a time")."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from topobind.validation import node_jobs, progress


def report(path: Path, elapsed: float, results: list[str], argv: list[str] | None = None,
           aborted: int | None = None) -> None:  # fmt: skip
    """An --each-node report: one node, one check run per entry of ``results``."""
    cases = [{"name": f"C{i}", "display_name": f"C{i} %.part=s:p %.nid=n1", "system": "s",
              "partition": "p", "result": r, "perfvalues": {}}
             for i, r in enumerate(results)]  # fmt: skip
    cmdline = shlex.join(argv or ["reframe", "-t", "quick", "-r"])
    info: dict[str, object] = {"time_elapsed": elapsed, "cmdline": cmdline}
    if aborted is not None:
        info["num_aborted"] = aborted
    path.write_text(json.dumps({"session_info": info,
                                "runs": [{"runs_index": 0, "testcases": cases}]}))  # fmt: skip


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    (tmp_path / "reports").mkdir()
    return tmp_path / "reports"


SITE = SimpleNamespace(name="s")


def test_a_failed_run_does_not_time_the_next(reports: Path) -> None:
    report(reports / "each-node-s-p-1.json", 60.0, ["pass"] * 6)  # 10 s a check
    report(reports / "each-node-s-p-2.json", 7.0, ["pass", "fail", "fail", "fail", "fail", "fail"])
    exp = progress.expected_run(SITE, "p", 1, 1, reports.parent, ("quick", ()))
    assert exp.per_node == pytest.approx(60.0), exp.text
    assert "timed by" in exp.text and "each-node-s-p-1.json" in exp.text
    assert "each-node-s-p-2.json had 5 failed check run(s)" in exp.text


def test_an_interrupted_run_does_not_time_the_next(reports: Path) -> None:
    report(reports / "each-node-s-p-1.json", 113.0, ["pass"] * 6)
    report(reports / "each-node-s-p-2.json", 1.0, ["pass", "abort"], aborted=4)
    exp = progress.expected_run(SITE, "p", 1, 1, reports.parent, ("quick", ()))
    assert exp.per_node == pytest.approx(113.0)
    assert "each-node-s-p-2.json was interrupted" in exp.text
    # aborted counted by ReFrame though every case it wrote passed
    report(reports / "each-node-s-p-3.json", 1.0, ["pass"], aborted=5)
    exp = progress.expected_run(SITE, "p", 1, 1, reports.parent, ("quick", ()))
    assert exp.per_node == pytest.approx(113.0)


def test_only_failed_or_interrupted_runs_leave_the_time_unknown(reports: Path) -> None:
    report(reports / "each-node-s-p-1.json", 7.0, ["fail"] * 6)
    exp = progress.expected_run(SITE, "p", 1, 1, reports.parent, ("quick", ()))
    assert exp.seconds is None and exp.per_node is None
    assert "no complete, successful earlier run" in exp.text and "this one will be" in exp.text


def test_the_estimate_counts_waves_of_max_submit(reports: Path) -> None:
    report(reports / "each-node-s-p-1.json", 60.0, ["pass"] * 6)  # 60 s a node
    exp = progress.expected_run(SITE, "p", 16, 1, reports.parent, ("quick", ()), wave=6)
    assert "6 node(s) at a time" in exp.text, exp.text
    assert exp.seconds == pytest.approx(3 * 60.0)  # waves of 6, 6, 4: three node times
    every = progress.expected_run(SITE, "p", 16, 1, reports.parent, ("quick", ()))
    assert every.seconds == pytest.approx(60.0) and "16 node(s) at a time" in every.text


def test_the_wave_is_the_free_room_under_the_limits() -> None:
    assert node_jobs.wave_of(SimpleNamespace(free=6), 16) == 6
    assert node_jobs.wave_of(SimpleNamespace(free=None), 16) == 16
    assert node_jobs.wave_of(SimpleNamespace(free=40), 16) == 16


def test_a_nodes_bound_is_never_below_its_tiers_floor() -> None:
    """The quick tier after an interrupted run got a 60 s bound for 1 min 53 s of work."""
    site = SimpleNamespace(settings={}, path="site.yaml")
    bound, why = node_jobs.node_bound(site, 7.0, "quick")
    assert bound == node_jobs.TIER_FLOOR_S["quick"] >= 2 * 113, (bound, why)
    assert "quick tier's least" in why
    assert node_jobs.node_bound(site, 200.0, "quick")[0] == 600.0  # 3x a complete run's
    assert node_jobs.node_bound(site, 7.0, "full")[0] >= 214  # DGEMM 1G alone: 3:34
    budget = SimpleNamespace(settings={"node_budget": "2m"}, path="site.yaml")
    assert node_jobs.node_bound(budget, 7.0, "quick") == (120.0, "node_budget 2m")
    assert node_jobs.node_bound(site, None, "quick")[1] == "no cost model yet"
