"""Drain only what was judged (issue 31 item 1, issue 30 item 4): node names from a report
(``%.nid=``, ``job_nodelist``, ``tb_ran_on``), ``--nodelist`` and ``$SLURMD_NODENAME`` reach
``scontrol`` only as one literal node of the partition, judged bad on a confirmed verdict.
A logging fake ``scontrol`` (and ``sinfo``) on PATH proves nothing else is drained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fuzzing import bounded, fuzz
from hypothesis import given
from hypothesis import strategies as st
from slurm_helpers import stand_in_slurm

from topobind.cli.main import main
from topobind.validation import acceptance, verdict

PARTITION = ["node1", "node2", "node3", "node4"]


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sinfo lists PARTITION (all idle); scontrol logs every call to the returned file and
    shows a drained node as drained."""
    return stand_in_slurm(
        tmp_path, monkeypatch, PARTITION,
        'if [ "$2" = show ]; then echo "NodeName=$4 State=IDLE+DRAIN Reason=topobind: x"; fi\n',
    )  # fmt: skip


def _tc(node_field: str, name: str, value: float) -> dict[str, Any]:
    display = "StreamCheck %layout=compact %.part=fleet:slurm"
    tc: dict[str, Any] = {
        "display_name": display, "system": "fleet", "partition": "slurm", "result": "pass",
        "perfvalues": {"fleet:slurm:triad": [value, 0, None, None, "MB/s", "pass"]},
    }  # fmt: skip
    if node_field == "nid":
        tc["display_name"] = f"{display} %.nid={name}"
    elif node_field == "job_nodelist":
        tc["job_nodelist"] = [name]
    else:
        tc["tb_ran_on"] = name
    return tc


def _report(tmp_path: Path, nodes: dict[str, float], runs: int, field: str = "nid") -> Path:
    doc = {"runs": [{"testcases": [_tc(field, n, v + r) for n, v in nodes.items()]}
                    for r in range(runs)]}  # fmt: skip
    path = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    path.write_text(json.dumps(doc))
    return path


def _validate(report: Path, *extra: str) -> int:
    return main(["validate", "--site", "fleet", "--partition", "slurm", "--each-node",
                 "--reports", str(report), "--drain", *extra])  # fmt: skip


def _drained(log: Path) -> list[str]:
    if not log.exists():
        return []
    lines = [ln.split() for ln in log.read_text().splitlines()]
    return [ln[1].removeprefix("nodename=") for ln in lines if ln[:1] == ["update"]]


def test_a_strong_slow_node_is_drained_and_scontrol_shows_it(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seven = {"node1": 100.0, "node2": 101.0, "node3": 60.0}
    assert _validate(_report(tmp_path, seven, 7), "--apply") == 1
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == ["node3"]
    assert "drained node3: State=IDLE+DRAIN Reason=topobind: x" in out
    assert out.strip().splitlines()[-1] == "bad nodes: node3"


def test_a_weak_verdict_is_not_drained_and_says_how_to_confirm(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    three = {"node1": 100.0, "node2": 101.0, "node3": 60.0}
    assert _validate(_report(tmp_path, three, 3), "--apply") == 1
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == []
    assert "node3 not drained: SLOW (weak): too few or too noisy runs" in out
    assert "--confirm (or --repeat 7)" in out and "scontrol update" not in out


@pytest.mark.parametrize("field", ["nid", "job_nodelist", "tb_ran_on"])
@pytest.mark.parametrize("name", ["node[1-3]", "ALL", "node1,node2", "node 1", "../x", ""])
def test_a_node_name_that_is_no_node_is_refused_in_one_line(
    field: str, name: str, tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = {"node1": 100.0, "node2": 101.0, "node3": 99.0, name: 10.0}
    status = _validate(_report(tmp_path, nodes, 7, field), "--apply")
    got = capsys.readouterr()
    err = got.err
    assert _drained(fake_slurm) == []
    if name == "":  # no node (job_nodelist, tb_ran_on) or an empty %.nid (refused)
        return
    if name == "ALL":  # looks like a name: judged, never drained
        assert status == 1 and "ALL not drained: not one literal node name" in got.out
        return
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "not one node name" in err or "not a ReFrame test name" in err


def test_a_node_outside_the_partition_or_the_nodelist_is_not_drained(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = {"node1": 100.0, "node2": 101.0, "node3": 99.0, "node4": 60.0, "node9": 60.0}
    report = _report(tmp_path, nodes, 7)
    assert _validate(report, "--apply") == 1
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == ["node4"]
    assert "node9 not drained: not a node of partition slurm" in out
    fake_slurm.unlink()
    assert _validate(report, "--apply", "--nodelist", "node[1-3,9]") == 1
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == []  # node4 was not judged, node9 is not in the partition
    assert "node9 not drained: not a node of partition slurm" in out


def test_an_empty_nodelist_is_refused_not_the_whole_partition(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path, {"node1": 100.0, "node2": 101.0, "node3": 60.0}, 7)
    assert _validate(report, "--apply", "--nodelist", "") == 2
    assert "--nodelist '' names no node" in capsys.readouterr().err
    assert _drained(fake_slurm) == []
    with pytest.raises(Exception, match="names no node"):
        acceptance.choose_nodes({"node1": "idle"}, "", "slurm")


def test_a_nodelist_node_absent_from_the_reports_is_not_tested_never_drained(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 1: node4 (in --nodelist, not in the report) was drained as 'no check ran
    on it'; a report holds no evidence against a node it does not name."""
    report = _report(tmp_path, {"node1": 100.0, "node2": 101.0, "node3": 99.0}, 7)
    assert _validate(report, "--apply", "--nodelist", "node[1-4]") == 4
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == []
    assert "node4 not drained: not tested: the reports hold no result of it" in out
    row = next(ln for ln in out.splitlines() if ln.startswith("node4 "))
    assert "not tested" in row and "FAIL" not in row
    assert out.strip().splitlines()[-1] == "bad nodes: none; not tested: node4"


def test_an_empty_report_drains_nothing(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 1: {"runs": []} with --nodelist drained every node of the list."""
    report = tmp_path / "empty.json"
    report.write_text('{"runs": []}')
    assert _validate(report, "--apply", "--nodelist", "node[1-4]") == 4
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == []
    assert out.strip().splitlines()[-1] == "bad nodes: none; not tested: node[1-4]"


def test_a_live_run_calls_a_silent_node_unreachable() -> None:
    """Only a run that submitted to the node may FAIL it for giving nothing back."""
    obs = verdict.Observations()
    (live,) = verdict.node_verdicts(["node5"], obs, [], live=True)
    (report,) = verdict.node_verdicts(["node5"], obs, [], live=False)
    assert live.status == "FAIL" and live.reasons[0].startswith("unreachable: its jobs were")
    assert report.status == "not tested" and not report.bad


def test_two_nodes_are_not_judged_in_table_summary_metrics_and_status(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 7: node2 at 55 % of node1 printed 'bad nodes: none', ok, strong."""
    report = _report(tmp_path, {"node1": 100.0, "node2": 55.0}, 7)
    prom = tmp_path / "m.prom"
    assert _validate(report, "--apply", "--metrics", str(prom)) == 4
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("node2 "))
    assert "NOT JUDGED" in row and "2 node(s) measured it" in row
    assert "NOT JUDGED: 2 node(s) measured it; an outlier needs at least 3 to compare" in out
    assert out.strip().splitlines()[-1] == "bad nodes: none; NOT JUDGED: node[1-2]"
    text = prom.read_text()
    label = 'site="fleet",partition="slurm",node="node2"'
    assert f'topobind_node_verdict{{{label},verdict="not_judged"}} 1' in text, text
    assert f'topobind_node_verdict{{{label},verdict="ok"}} 0' in text
    assert f"topobind_node_verdict_strong{{{label}}} 0" in text
    assert _drained(fake_slurm) == []


def test_two_runs_are_not_judged_whatever_the_slowdown(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 7: the tutorial's --repeat 2 showed a node at +1212 % as ok."""
    report = _report(tmp_path, {"node1": 100.0, "node2": 101.0, "node3": 7.6}, 2)
    assert _validate(report, "--apply") == 4
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("node3 "))
    assert "NOT JUDGED" in row and "+1" in row, row
    assert "2 run(s); a SLOW verdict needs at least 3" in out
    assert out.strip().splitlines()[-1] == "bad nodes: none; NOT JUDGED: node[1-3]"


def test_rejudging_keeps_the_conformance_failure_recorded_with_the_run(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 8: a node that failed conformance in the run was 'ok' when its report
    was judged again (the ReFrame report does not hold conformance)."""
    report = _report(tmp_path, {"node1": 100.0, "node2": 101.0, "node3": 99.0}, 7)
    acceptance.write_conformance(report, "fleet", ["node1", "node2", "node3"],
                                 {"node2": ["cores: expected 64, found 62"]}, [])  # fmt: skip
    assert _validate(report, "--apply") == 1
    out = capsys.readouterr().out
    assert _drained(fake_slurm) == ["node2"]
    row = next(ln for ln in out.splitlines() if ln.startswith("node2 "))
    assert "FAIL" in row and "conformance: cores: expected 64, found 62" in row
    assert out.strip().splitlines()[-1] == "bad nodes: node2"


def test_a_report_without_its_conformance_record_says_so(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path, {"node1": 100.0, "node2": 101.0, "node3": 99.0}, 7)
    assert _validate(report) == 0
    out = capsys.readouterr().out
    assert "note: conformance not judged: no record beside" in out
    assert "judged on the ReFrame figures only" in out


@pytest.mark.parametrize(
    "text",
    ['{"format": "topobind.conformance/1", "site": "other", "checked": [], "findings": {}}',
     '{"format": "topobind.conformance/1", "site": "fleet", "checked": [1], "findings": {}}',
     '{"format": "x"}', "[]", "not json"],
)  # fmt: skip
def test_a_bad_conformance_record_is_one_line(
    text: str, tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path, {"node1": 100.0, "node2": 101.0, "node3": 99.0}, 7)
    acceptance.conformance_path(report).write_text(text)
    assert _validate(report, "--apply") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ".conformance.json" in err, err
    assert _drained(fake_slurm) == []


# --------------------------------------------------------------------------- the net
NAMES = st.sampled_from(
    ["node1", "node2", "node3", "node4", "node9", "ALL", "all", "node[1-3]", "node1,node2",
     "node1 node2", "n*", "../node1", "node1\nnode2", "-node1", "node1=x", ""]
)  # fmt: skip


@fuzz(40)
@given(
    cases=st.lists(
        st.tuples(
            st.sampled_from(["nid", "job_nodelist", "tb_ran_on"]),
            NAMES,
            st.sampled_from([10.0, 60.0, 100.0, 101.0]),
        ),
        min_size=1,
        max_size=8,
    ),  # fmt: skip
    runs=st.sampled_from([3, 7]),
    nodelist=st.none() | st.sampled_from(["node[1-3]", "node[1-4,9]", "ALL", "node3", ""]),
)
def test_nothing_unjudged_reaches_scontrol(
    cases: list[tuple[str, str, float]], runs: int, nodelist: str | None, tmp_path: Path,
    fake_slurm: Path,
) -> None:  # fmt: skip
    fake_slurm.unlink(missing_ok=True)
    doc = {"runs": [{"testcases": [_tc(f, n, v + r) for f, n, v in cases]} for r in range(runs)]}
    report = tmp_path / "hostile.json"
    report.write_text(json.dumps(doc))
    args = ["--apply"] + ([] if nodelist is None else ["--nodelist", nodelist])
    with bounded():
        status = _validate(report, *args)
    drained = _drained(fake_slurm)
    if status == 2:
        assert drained == []
        return
    wanted = None if nodelist is None else set(_expand(nodelist))
    req = acceptance.Request("slurm", "quick", None, {}, nodelist=nodelist)
    out = acceptance.judge_reports([str(report)], "fleet", req)
    judged = {v.node: v for v in out.verdicts}
    for node in drained:
        assert node in PARTITION and (wanted is None or node in wanted)
        assert verdict.confirmed_bad(judged[node])
        assert node in out.obs.ran_on  # judged on evidence, never for its absence
    assert len(drained) == len(set(drained))


def _expand(text: str) -> list[str]:
    from topobind.topo import hostlist

    return hostlist.expand(text)


def test_site_check_refuses_a_node_name_leading_out_of_the_golden_dir(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    golden = tmp_path / "golden"
    golden.mkdir()
    (tmp_path / "x.xml").write_text("<topology/>")  # what ../x would reach
    for name in ("../x", "node[1-3]", "node1,node2"):
        monkeypatch.setenv("SLURMD_NODENAME", name)
        status = main(["site", "check", "fleet", "--live", "--golden", str(golden), "--drain",
                       "--apply"])  # fmt: skip
        err = capsys.readouterr().err
        assert status == 2 and "not one node name" in err and len(err.splitlines()) == 1, err
    assert _drained(fake_slurm) == []


def test_a_node_whose_checks_were_all_skipped_is_not_tested_not_unreachable() -> None:
    """A node the run reached but where every check was skipped (C2CCheck cross-l3 on a node
    of one L3 domain) was FAILed as if it had died."""
    tc = {"display_name": "C2CCheck %pair=cross-l3 %.part=fleet:slurm %.nid=node1",
          "system": "fleet", "partition": "slurm", "result": "skip", "perfvalues": {}}  # fmt: skip
    obs = verdict.observe([{"runs": [{"testcases": [tc]}]}], "fleet")
    (v,) = verdict.node_verdicts(["node1"], obs, [], live=True)
    assert v.status == "not tested" and "every check was skipped on it (C2CCheck" in v.reasons[0]
    assert not v.bad


@pytest.mark.parametrize("name", ["rack-1.node_2", "n_1", "a.b.c", "node-07"])
def test_node_names_with_dots_dashes_and_underscores_are_judged_and_drained(name: str) -> None:
    """A legitimate oddity that must keep working (issue 37): such a node is judged, named,
    and drained like any other; a node of the list the report lacks is not tested."""
    runs = [{"node1": 100.0 + r, "node2": 101.0 + r, name: 50.0 + r} for r in range(7)]
    doc = {"runs": [{"testcases": [_tc("nid", n, v) for n, v in run.items()]} for run in runs]}
    obs = verdict.observe([doc], "fleet")
    figures = verdict.figure_verdicts(obs.samples, 0.05)
    verdicts = verdict.node_verdicts(["node1", "node2", name, "x-9.y_z"], obs, figures, live=False)
    by = {v.node: v for v in verdicts}
    assert by[name].status == "SLOW" and not by[name].weak
    assert by["x-9.y_z"].status == "not tested"
    plan = verdict.drain_plan(verdicts, "slurm", {"node1", "node2", name, "x-9.y_z"})
    assert [n for n, _ in plan.commands] == [name]
    assert plan.refused == ["x-9.y_z not drained: not tested: the reports hold no result of it"]
