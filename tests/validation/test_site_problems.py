"""A failure common to the fleet is the site's, never a node's (issue 45 item 4): the
normalisation of reasons, the rule (at least 3 nodes and more than half of the judged ones),
and ``validate --each-node --reports ... --drain`` on reports where every node failed alike:
no drain, one site-problem line with its fix, exit status 5. The same on the real local
cluster: tests/validation/test_site_problems_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from slurm_helpers import stand_in_slurm

from topobind.cli.main import main
from topobind.validation import site_problems, verdict
from topobind.validation.site_problems import SITE_PROBLEM_STATUS

NODES = ["node1", "node2", "node3", "node4"]


def _missing(node: str) -> str:
    return (f"cannot run /home/{node}/rfm/stage/{node}/StreamCheck_1a2b/kernels/bin/stream: "
            "No such file or directory")  # fmt: skip


def test_normalise_makes_the_nodes_reasons_one() -> None:
    a = site_problems.normalise(_missing("node1"), NODES)
    b = site_problems.normalise(_missing("node12"), ["node12"])
    assert a == b == "cannot run .../stream: No such file or directory"
    got = site_problems.normalise("node3: 12.5 GB/s below 40 on cpu 7", NODES)
    assert got == "NODE: N GB/s below N on cpu N"


def test_a_node_name_inside_another_word_is_left_alone() -> None:
    assert site_problems.normalise("node1x failed", ["node1"]) == "node1x failed"


@pytest.mark.parametrize(("failed", "judged", "site"), [
    (3, 3, True), (3, 4, True), (3, 5, True), (3, 6, False), (2, 2, False), (2, 3, False),
    (17, 32, True), (16, 32, False), (32, 32, True),
])  # fmt: skip
def test_the_rule_is_three_nodes_and_more_than_half(failed: int, judged: int, site: bool) -> None:
    assert site_problems.is_site_wide(failed, judged) is site


def _obs(failing: list[str], reason: Any = _missing) -> verdict.Observations:
    obs = verdict.Observations()
    for n in NODES:
        obs.ran_on[n] = {"StreamCheck"}
    obs.failures = [verdict.Failure(n, "StreamCheck", "compact", reason(n)) for n in failing]
    return obs


def test_the_shared_failure_leaves_the_nodes_and_none_is_bad() -> None:
    obs = _obs(NODES)
    (problem,) = site_problems.split(obs, NODES)
    assert obs.failures == [] and set(obs.site_failed) == set(NODES)
    assert problem.nodes == tuple(NODES) and problem.judged == 4
    (line,) = site_problems.lines([problem])
    assert line == ("site problem on 4 of 4 judged nodes (node[1-4]): the checks' programs "
                    "are not built (or not where the checks look): run make setup, or point "
                    "TOPOBIND_KERNELS_DIR at an installation's bin/: /home/node1/rfm/stage/"
                    "node1/StreamCheck_1a2b/kernels/bin/stream (StreamCheck compact)")  # fmt: skip
    verdicts = verdict.node_verdicts(NODES, obs, [])
    assert {v.status for v in verdicts} == {verdict.NOT_JUDGED}
    assert not any(v.bad for v in verdicts)
    plan = verdict.drain_plan(verdicts, "slurm", set(NODES))
    assert plan.commands == []
    assert plan.refused == ["node[1-4] not drained: not judged: their failures are the site "
                            "problem above"]  # fmt: skip


def test_two_of_four_nodes_failing_alike_are_two_bad_nodes() -> None:
    obs = _obs(["node1", "node3"])
    assert site_problems.split(obs, NODES) == []
    verdicts = verdict.node_verdicts(NODES, obs, [])
    assert [v.node for v in verdicts if v.status == "FAIL"] == ["node1", "node3"]


def test_a_node_of_its_own_failure_still_fails_beside_the_site_problem() -> None:
    obs = _obs(NODES)
    obs.failures.append(verdict.Failure("node2", "conformance", "-", "2 NUMA nodes, site: 4"))
    site_problems.split(obs, NODES)
    by = {v.node: v for v in verdict.node_verdicts(NODES, obs, [])}
    assert by["node2"].status == "FAIL" and by["node2"].reasons == ("conformance: 2 NUMA "
                                                                    "nodes, site: 4",)  # fmt: skip
    assert by["node1"].status == verdict.NOT_JUDGED


def test_faulted_nodes_count_neither_way() -> None:
    """3 of 4 failed alike, the 4th never started: 3 of the 3 judged -> the site's."""
    obs = _obs(NODES[:3])
    obs.failures.append(verdict.Failure("node4", "NOT STARTED", "-", "not started in 60 s"))
    (problem,) = site_problems.split(obs, NODES, faulted={"node4"})
    assert problem.judged == 3
    assert [f.check for f in obs.failures] == ["NOT STARTED"]


def test_an_unknown_shared_reason_gets_the_generic_fix() -> None:
    obs = _obs(NODES, lambda n: f"sanity: expected 8 ranks, saw 4 on {n}")
    (problem,) = site_problems.split(obs, NODES)
    assert problem.fix == site_problems.GENERIC_FIX
    assert site_problems.lines([problem]) == [problem.line()]
    assert problem.line().startswith("site problem: StreamCheck compact failed on 4 of 4 "
                                     "judged nodes (node[1-4]): sanity: expected 8 ranks, saw "
                                     "4 on node1; the same failure")  # fmt: skip


def test_every_check_missing_its_program_is_one_line_naming_each() -> None:
    obs = verdict.Observations()
    for n in NODES[:3]:
        obs.ran_on[n] = {"StreamCheck", "C2CCheck"}
        obs.failures += [
            verdict.Failure(n, "StreamCheck", "compact", f"sanity error: command exited with "
                            f"status 127 on {n}: topobind: error: cannot run /opt/tb/bin/"
                            "stream: No such file or directory"),
            verdict.Failure(n, "C2CCheck", "same-l3", f"sanity error: command exited with "
                            f"status 127 on {n}: bash: line 1: /opt/tb/bin/c2c: No such file "
                            "or directory"),
        ]  # fmt: skip
    problems = site_problems.split(obs, NODES[:3])
    (line,) = site_problems.lines(problems)
    assert line.startswith("site problem on 3 of 3 judged nodes (node[1-3]): the checks' "
                           "programs are not built")  # fmt: skip
    assert line.endswith(": /opt/tb/bin/stream (StreamCheck compact), /opt/tb/bin/c2c "
                         "(C2CCheck same-l3)")  # fmt: skip


# --------------------------------------------------------------------------- the command
@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sinfo lists NODES idle; scontrol logs every call."""
    return stand_in_slurm(tmp_path, monkeypatch, NODES)


def _failed_tc(node: str) -> dict[str, Any]:
    return {"display_name": f"StreamCheck %layout=compact %.part=fleet:slurm %.nid={node}",
            "system": "fleet", "partition": "slurm", "result": "fail", "fail_phase": "sanity",
            "fail_reason": _missing(node)}  # fmt: skip


def test_every_node_failing_alike_drains_nothing_and_exits_5(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"runs": [{"testcases": [_failed_tc(n) for n in NODES]}]}))
    prom = tmp_path / "m.prom"
    status = main(["validate", "--site", "fleet", "--partition", "slurm", "--each-node",
                   "--reports", str(report), "--drain", "--apply", "--metrics",
                   str(prom)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == SITE_PROBLEM_STATUS == 5
    assert not fake_slurm.exists() or "update" not in fake_slurm.read_text()
    assert "scontrol update" not in out
    site_lines = [ln for ln in out.splitlines() if ln.startswith("site problem")]
    assert len(site_lines) == 1, out
    assert "kernels/bin/stream (StreamCheck compact)" in site_lines[0], out
    assert "make setup" in site_lines[0]
    last = out.strip().splitlines()[-1]
    assert last == (
        "bad nodes: none; site problem (drains nothing): StreamCheck compact; NOT JUDGED: node[1-4]"
    )
    text = prom.read_text()
    assert 'verdict="fail"} 1' not in text
    labels = 'site="fleet",partition="slurm",check="StreamCheck",variant="compact"'
    assert f"topobind_site_problem{{{labels}}} 4" in text


def test_a_site_problems_line_is_bounded_whatever_the_nodes() -> None:
    """Issue 47 item 7's rule for every printed node list: 5,000 scattered nodes (every other
    one of 10,000) name a site problem in one line of a few hundred characters."""
    from topobind.validation.site_problems import GENERIC_FIX, SiteProblem, lines

    nodes = tuple(f"n{i}" for i in range(0, 10_000, 2))
    p = SiteProblem("StreamCheck", "compact", "boom", nodes, 10_000, GENERIC_FIX)
    assert len(p.line()) < 600 and "(5,000 nodes)" in p.line()
    assert len(lines([p])[0]) < 600
