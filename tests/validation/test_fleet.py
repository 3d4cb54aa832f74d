"""Node acceptance without Slurm: host lists, the per-node verdict and its strength, --confirm,
conformance findings and drain commands, the validate options (test_fleet_slurm.py beside it runs
it all on the local 3-node cluster)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Cli, run_topobind
from paths import TOPOLOGIES

from topobind.errors import TopobindError
from topobind.measure import stats
from topobind.topo import hostlist
from topobind.validation import acceptance, conformance, reframe_report, reframe_runs, slurm


# --------------------------------------------------------------------------- host lists
@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["node1", "node2", "node3", "node7"], "node[1-3,7]"),
        (["node3"], "node3"),
        (["n01", "n02", "n10"], "n[01-02,10]"),
        (["node7", "node1", "node2"], "node[1-2,7]"),
        (["a1", "b2", "a2", "login"], "a[1-2],b2,login"),
        ([], ""),
    ],
)
def test_hostlist_compress_and_expand(names: list[str], text: str) -> None:
    assert hostlist.compress(names) == text
    if names:
        assert sorted(hostlist.expand(text)) == sorted(set(names))


@pytest.mark.parametrize("bad", ["node[3-1]", "node[1-", "no de", "node[1-99999999]"])
def test_hostlist_bad_input(bad: str) -> None:
    with pytest.raises(TopobindError, match="host list"):
        hostlist.expand(bad)


def test_beyond_confidence_is_the_sign_test() -> None:
    assert stats.beyond_confidence(3, 3) == pytest.approx(0.875)
    assert stats.beyond_confidence(7, 7) == pytest.approx(127 / 128)
    assert stats.beyond_confidence(6, 7) == pytest.approx(120 / 128)
    assert stats.beyond_confidence(0, 5) == 0.0
    with pytest.raises(ValueError):
        stats.beyond_confidence(4, 3)


# --------------------------------------------------------------------------- verdicts
def _tc(node: str, value: float, check: str = "StreamCheck", result: str = "pass",
        system: str = "fleet", reason: str = "") -> dict[str, Any]:  # fmt: skip
    return {
        "display_name": f"{check} %layout=compact %.part={system}:slurm %.nid={node}",
        "system": system,
        "result": result,
        "fail_phase": None if result == "pass" else "sanity",
        "fail_reason": reason,
        "job_nodelist": [node],
        "perfvalues": {f"{system}:slurm:triad": [value, 0, None, None, "MB/s", "pass"]}
        if result == "pass"
        else {},
    }


def _report(runs: list[dict[str, float]], **kw: Any) -> dict[str, Any]:
    return {"runs": [{"testcases": [_tc(n, v, **kw) for n, v in run.items()]} for run in runs]}


def _judge(runs: list[dict[str, float]], nodes: list[str] | None = None):
    obs = acceptance.observe([_report(runs)], "fleet")
    figs = acceptance.figure_verdicts(obs.samples, 0.05)
    return acceptance.node_verdicts(nodes or sorted(runs[0]), obs, figs), obs


def test_parse_name_drops_reframe_parameters() -> None:
    name = "StreamCheck %layout=every-other-core %.part=fleet:slurm %.nid=node12"
    assert reframe_report.parse_name(name) == (
        "StreamCheck", (("layout", "every-other-core"),), "node12")  # fmt: skip
    assert reframe_report.parse_name("NodeCheck") == ("NodeCheck", (), None)


def test_a_slow_node_is_named_weak_with_three_runs_and_strong_with_seven() -> None:
    three = [{"node1": 100.0, "node2": 101.0, "node3": 60.0} for _ in range(3)]
    verdicts, _ = _judge(three)
    slow = {v.node: v for v in verdicts if v.bad}
    assert list(slow) == ["node3"]
    assert slow["node3"].status == "SLOW" and slow["node3"].weak
    assert "3 runs" in slow["node3"].reasons[0] and "confidence 88%" in slow["node3"].reasons[0]
    # weak and not confirmed: not named among the bad nodes, but after them
    assert acceptance.bad_nodes_line(verdicts) == (
        "bad nodes: none; unconfirmed (weak SLOW, --confirm them): node3"
    )
    seven = [{"node1": 100.0 + i, "node2": 99.0 + i, "node3": 60.0 + i} for i in range(7)]
    verdicts, _ = _judge(seven)
    assert [v.verdict_text() for v in verdicts] == ["ok", "ok", "SLOW (strong)"]


def test_noise_alone_names_no_node() -> None:
    # node3 is slow in one run of three: its median is fine, the sign test says no
    runs = [{"node1": 100.0, "node2": 98.0, "node3": 40.0},
            {"node1": 97.0, "node2": 101.0, "node3": 99.0},
            {"node1": 99.0, "node2": 100.0, "node3": 100.0}]  # fmt: skip
    verdicts, _ = _judge(runs)
    assert acceptance.bad_nodes_line(verdicts) == "bad nodes: none"
    # slower median but only 2 of 3 runs beyond the limit: not named (confidence 50 %)
    runs[1]["node3"] = 80.0
    verdicts, _ = _judge(runs)
    assert acceptance.bad_nodes_line(verdicts) == "bad nodes: none"


def test_a_failed_check_and_a_dead_node_fail_and_the_others_are_still_judged() -> None:
    runs = [{"node1": 100.0, "node2": 100.0, "node3": 100.0, "node4": 60.0} for _ in range(3)]
    rep = _report(runs)
    rep["runs"][0]["testcases"][1] = _tc("node2", 0, result="fail", reason="sanity: boom")
    obs = acceptance.observe([rep], "fleet")
    nodes = ["node1", "node2", "node3", "node4", "node5"]  # node5: never ran (died)
    verdicts = acceptance.node_verdicts(nodes, obs, acceptance.figure_verdicts(obs.samples, 0.05))
    by = {v.node: v for v in verdicts}
    assert by["node2"].status == "FAIL" and "sanity: boom" in by["node2"].reasons[0]
    assert by["node5"].status == "FAIL" and "unreachable" in by["node5"].reasons[0]
    assert by["node4"].status == "SLOW"
    assert by["node1"].status == by["node3"].status == "ok"
    assert acceptance.bad_nodes_line(verdicts) == (
        "bad nodes: node[2,5]; unconfirmed (weak SLOW, --confirm them): node4"
    )


def test_a_figure_scattering_more_than_the_gap_names_no_node() -> None:
    # every node's runs scatter by about 40 % (a loaded machine): node3 20 % off, all 7 runs
    # below the fleet's 5 % limit, is within the scatter: not named; the same gap on a quiet
    # fleet (a few % scatter) is
    noisy = [{"node1": 100.0 * f, "node2": 100.0 * f, "node3": 80.0 * f}
             for f in (0.5, 0.6, 0.8, 1.0, 1.2, 1.4, 1.5)]  # fmt: skip
    verdicts, _ = _judge(noisy)
    assert [v.status for v in verdicts] == ["ok", "ok", "ok"]
    quiet = [{"node1": 100.0 + i, "node2": 101.0 - i, "node3": 80.0 + i} for i in range(7)]
    verdicts, _ = _judge(quiet)
    assert [v.verdict_text() for v in verdicts] == ["ok", "ok", "SLOW (strong)"]
    assert acceptance.bad_nodes_line(verdicts) == "bad nodes: node3"


def test_confirm_runs_only_the_suspect_checks() -> None:
    import re

    from topobind.validation.verdict import FigureVerdict

    def fig(node: str, check: str, variant: str, slow: bool, by: float) -> FigureVerdict:
        return FigureVerdict(node, check, variant, "m", "MB/s", 3, 1.0, 0.0, by, 0.9, slow)

    figures = [fig("node3", "StreamCheck", "compact", True, 0.5),
               fig("node3", "DgemmCheck", "1G", True, 0.2),  # SLOW, not the worst: not re-run
               fig("node3", "C2CCheck", "same-l3", False, 0.9),
               fig("node1", "LatencyCheck", "local", True, 0.3),
               fig("node2", "DgemmCheck", "1G", True, 0.5)]  # fmt: skip
    names = acceptance.suspect_names(figures, ["node3", "node1"])
    assert len(names) == 2  # each SLOW node's worst SLOW figure
    either = re.compile("|".join(names))  # as ReFrame joins -n patterns, spaces removed
    # the names before --distribute (when ReFrame filters) and after it
    shown = {
        "StreamCheck%layout=compact": True,
        "StreamCheck%layout=compact%.part=s:p%.nid=node3": True,
        "StreamCheck%layout=compact-x": False,
        "StreamCheck%layout=every-other-core": False,
        "LatencyCheck": True,
        "LatencyCheck%.part=s:p%.nid=node1": True,
        "LatencyCheckX": False,
        "C2CCheck%pair=same-l3": False,
        "DgemmCheck%pages=1G": False,
    }
    assert {n: bool(either.search(n)) for n in shown} == shown
    # the quick acceptance's one STREAM layout (when no -n chooses checks)
    opts = acceptance.quick_exclusions("quick")
    layout = re.compile(opts[opts.index("-x", 4) + 1])
    assert not layout.search("StreamCheck%layout=compact")
    assert not layout.search("StreamCheck%layout=compact%.part=s:p%.nid=n1")
    assert layout.search("StreamCheck%layout=compact-x")
    assert layout.search("StreamCheck%layout=numa")
    assert acceptance.quick_exclusions("quick", ["StreamCheck"]) == [
        "-x", "HplCheck", "-x", "BindingCheck"]  # fmt: skip
    got = acceptance.quick_setvars("quick", {"n": "512", "DgemmCheck.reps": "9"})
    assert got == {"n": "512", "DgemmCheck.reps": "9", "LatencyCheck.quick_small": "",
                   "sanity_once": "true"}  # fmt: skip


def test_a_report_of_another_site_is_refused() -> None:
    with pytest.raises(TopobindError, match="site 'betzy'.*site 'fleet'"):
        acceptance.observe([_report([{"node1": 1.0}], system="betzy")], "fleet")


def test_two_nodes_have_no_fleet_to_be_an_outlier_of() -> None:
    """Issue 37 item 7: two nodes are NOT JUDGED (not ok), said in the summary line too."""
    verdicts, _ = _judge([{"node1": 100.0, "node2": 10.0} for _ in range(3)])
    assert [v.status for v in verdicts] == ["NOT JUDGED", "NOT JUDGED"]
    assert "2 node(s) measured it" in verdicts[1].reasons[0]
    assert acceptance.bad_nodes_line(verdicts) == "bad nodes: none; NOT JUDGED: node[1-2]"
    assert not any(v.bad for v in verdicts)


def test_confirm_keeps_a_real_outlier_and_clears_a_fluke() -> None:
    first, _ = _judge([{"node1": 100.0, "node2": 100.0, "node3": 60.0, "node4": 60.0,
                        "node5": 101.0} for _ in range(3)])  # fmt: skip
    assert [v.node for v in first if v.status == "SLOW"] == ["node3", "node4"]
    partner = acceptance.good_node(first)
    assert partner in ("node1", "node2", "node5")
    again = [{partner: 100.0 + i, "node3": 55.0 + i, "node4": 99.0 + i} for i in range(7)]
    cobs = acceptance.observe([_report(again)], "fleet")
    done = {v.node: v for v in acceptance.confirm(first, cobs, partner, 0.05)}
    assert done["node3"].verdict_text() == f"SLOW (strong, confirmed against {partner})"
    assert done["node4"].status == "ok" and "not confirmed" in done["node4"].confirmed
    assert acceptance.bad_nodes_line(list(done.values())) == "bad nodes: node3"


def test_confirm_stops_early_only_for_a_node_that_cannot_come_out_slow() -> None:
    """The futility stop after --confirm's first 3 runs: a node with 2 of 3 runs at the
    partner's level cannot reach 6 of 7 beyond the limit; one with 3 of 3 beyond, or 1 short
    with 4 runs to go, can; a failed check is never stopped on; the stop names no node."""
    assert [acceptance.min_beyond(n) for n in (3, 4, 5, 7, 10)] == [3, 4, 4, 6, 7]
    look = [{"node1": 100.0 + i, "node3": 55.0 if i == 0 else 99.0 + i, "node4": 55.0 + i,
             "node5": 99.0 + i if i == 0 else 55.0} for i in range(3)]  # fmt: skip
    obs = acceptance.observe([_report(look)], "fleet")
    nodes = ["node3", "node4", "node5"]
    assert acceptance.cannot_confirm(nodes, obs, "node1", 0.05, 7) == ["node3"]
    assert acceptance.cannot_confirm(nodes, obs, "node1", 0.05, 3) == ["node3", "node5"]
    bad = acceptance.observe([_report(look), _report([{"node3": 1.0}], result="fail")], "fleet")
    assert acceptance.cannot_confirm(nodes, bad, "node1", 0.05, 7) == []
    first, _ = _judge([{"node1": 100.0, "node2": 100.0, "node3": 60.0} for _ in range(3)])
    done = {v.node: v for v in acceptance.confirm(first, obs, "node1", 0.05)}
    assert done["node3"].status == "ok" and "not confirmed" in done["node3"].confirmed
    assert acceptance.bad_nodes_line(list(done.values())) == "bad nodes: none"


def test_choose_nodes_bad_input() -> None:
    states = {"node1": "idle", "node2": "idle", "node3": "drain"}
    assert acceptance.choose_nodes(states, None, "debug") == ["node1", "node2"]
    assert acceptance.choose_nodes(states, "node[1-2]", "debug") == ["node1", "node2"]
    with pytest.raises(TopobindError, match=r"node9 not in partition debug"):
        acceptance.choose_nodes(states, "node[1,9]", "debug")
    # a node of --nodelist down or drained before the run is left out (not tested, listed);
    # a list of none but such nodes is refused: nothing to test
    assert acceptance.choose_nodes(states, "node[2-3]", "debug") == ["node2"]
    assert acceptance.down_named(states, "node[2-3]", "debug") == {"node3": "drain"}
    with pytest.raises(TopobindError, match="node3: no node to test: node3 is drain"):
        acceptance.choose_nodes(states, "node3", "debug")
    with pytest.raises(TopobindError, match=r"node9 not in partition debug"):
        acceptance.down_named(states, "node9", "debug")
    with pytest.raises(TopobindError, match="no idle node"):
        acceptance.choose_nodes({"node1": "alloc", "node2": "down*"}, None, "debug")


def test_drain_lines_quote_the_reason() -> None:
    seven = [{"node1": 100.0 + i, "node2": 99.0 + i, "node3": 60.0 + i} for i in range(7)]
    first, _ = _judge(seven)
    nodes = ["node1", "node2", "node3"]
    out = acceptance.Outcome(nodes, first, [], acceptance.Observations(), partition="debug",
                             partition_nodes=dict.fromkeys(nodes, "idle"))  # fmt: skip
    plan = acceptance.drain_lines(out)
    ((node, reason),) = plan.commands
    assert node == "node3" and plan.refused == []
    cmd = slurm.drain_command(node, reason)
    assert cmd[:4] == ["scontrol", "update", "nodename=node3", "state=drain"]
    assert cmd[4].startswith("reason=topobind: slow: StreamCheck.compact.triad 62% slower")


# --------------------------------------------------------------------------- conformance
class _Node:
    packages, numa_nodes, l3_domains, cores, smt = 2, 8, 32, 128, 2
    extra = {"hugepages_2m_per_numa": 64, "thp": "madvise", "memory_gib_per_numa": 32}
    hosts = {"gpu[01-02]": {"gpus": 4}, "gpu02": {"thp": "never"}}


def test_expected_for_applies_the_host_overrides_in_order() -> None:
    assert conformance.expected_for(_Node, "cpu01")["thp"] == "madvise"
    assert "gpus" not in conformance.expected_for(_Node, "cpu01")
    assert conformance.expected_for(_Node, "gpu01")["gpus"] == 4
    assert conformance.expected_for(_Node, "gpu02")["thp"] == "never"


def _fake_sys(root: Path, pages_per_node: list[int], thp: str, governor: str | None) -> None:
    for n, pages in enumerate(pages_per_node):
        d = root / f"sys/devices/system/node/node{n}/hugepages/hugepages-2048kB"
        d.mkdir(parents=True)
        for f in ("nr_hugepages", "free_hugepages", "surplus_hugepages"):
            (d / f).write_text(f"{pages}\n")
    g = root / "sys/kernel/mm/hugepages/hugepages-2048kB"
    g.mkdir(parents=True)
    for f in ("nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages"):
        (g / f).write_text(f"{sum(pages_per_node)}\n")
    t = root / "sys/kernel/mm/transparent_hugepage"
    t.mkdir(parents=True)
    (t / "enabled").write_text(thp + "\n")
    if governor:
        c = root / "sys/devices/system/cpu/cpu0/cpufreq"
        c.mkdir(parents=True)
        (c / "scaling_governor").write_text(governor + "\n")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/numa_balancing").write_text("1\n")


def test_live_facts_and_findings_one_line_each(tmp_path: Path) -> None:
    from topobind.topo.topology import load

    _fake_sys(tmp_path, [64, 10], "always [madvise] never", "powersave")
    topo = load("synthetic:pack:1 numa:2 l3:1 core:2 pu:1")
    facts = conformance.live_facts(topo, str(tmp_path / "sys"), str(tmp_path / "proc"))
    assert facts["hugepages_2m_per_numa"] == 10  # the smallest NUMA node's pool
    assert facts["thp"] == "madvise" and facts["governor"] == "powersave"
    assert facts["numa_balancing"] == 1 and facts["numa_nodes"] == 2
    want = {"numa_nodes": 2, "hugepages_2m_per_numa": 64, "thp": "madvise",
            "governor": "performance", "numa_balancing": 0}  # fmt: skip
    lines = [f.text("n1") for f in conformance.findings(want, facts, "site.yaml")]
    assert lines == [
        "n1: hugepages_2m_per_numa: expected at least 64 on every NUMA node, found 10 (site.yaml)",
        "n1: governor: expected performance, found powersave (site.yaml)",
        "n1: numa_balancing: expected 0, found 1 (site.yaml)",
    ]


def _sites_dir(tmp_path: Path, node: str | None) -> Path:
    d = tmp_path / "sites" / "fleet"
    d.mkdir(parents=True)
    text = (
        "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
        "partitions:\n  - {name: slurm, scheduler: slurm, launcher: srun, access: ['-p debug']}\n"
        "hugepages: {pages_1g_per_numa: 0}\n"
    )
    (d / "site.yaml").write_text(text + (node or ""))
    return d.parent


def _topobind(args: list[str], sites: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TOPOBIND_SITES_DIR=str(sites), SLURMD_NODENAME="node2")
    return run_topobind(*args, env=env, timeout=120)


@pytest.mark.slow
def test_site_check_live_without_node_section_says_what_to_add(tmp_path: Path) -> None:
    got = _topobind(["site", "check", "fleet", "--live"], _sites_dir(tmp_path, None))
    assert got.returncode == 2
    assert "no node: section to compare node2 with; add what this node has" in got.stderr
    assert "node:\n  packages: " in got.stderr and "Traceback" not in got.stderr


@pytest.mark.slow
def test_site_check_live_per_host_finding_and_drain(tmp_path: Path, topobind_cli: Cli) -> None:
    from topobind.topo.topology import load
    from topobind.validation.sites import node_counts

    c = node_counts(load("live"))
    node = (
        f"node:\n  packages: {c['packages']}\n  numa_nodes: {c['numa_nodes']}\n"
        f"  l3_domains: {c['l3_domains']}\n  cores: {c['cores']}\n  smt: {c['smt']}\n"
        f"  hosts:\n    'node[2-3]': {{cores: {c['cores'] + 2}}}\n"
    )
    sites = _sites_dir(tmp_path, node)
    got = _topobind(["site", "check", "fleet", "--live", "--drain"], sites)
    assert got.returncode == 1, got.stderr
    line = f"node2: cores: expected {c['cores'] + 2}, found {c['cores']}"
    assert f"topobind: error: {line} (" in got.stderr
    assert "scontrol update nodename=node2 state=drain 'reason=topobind: cores: expected" in (
        got.stdout
    )
    # another host is not in node[2-3]: it conforms
    env = dict(os.environ, TOPOBIND_SITES_DIR=str(sites), SLURMD_NODENAME="node1")
    ok = topobind_cli("site", "check", "fleet", "--live", env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "node1 conforms to the node: section" in ok.stdout


@pytest.mark.slow
def test_site_check_golden_xml(tmp_path: Path) -> None:
    golden = tmp_path / "golden"
    golden.mkdir()
    from topobind.topo.topology import load

    (golden / "node2.xml").write_text(load("live").xml)
    sites = _sites_dir(tmp_path, None)
    got = _topobind(["site", "check", "fleet", "--live", "--golden", str(golden)], sites)
    assert got.returncode == 0, got.stderr
    assert f"node2 conforms to {golden}" in got.stdout
    bad = _topobind(["site", "check", "fleet", "--live", "--golden", str(tmp_path)], sites)
    assert bad.returncode == 2 and "--golden" in bad.stderr and "node2.xml" in bad.stderr


# --------------------------------------------------------------------------- validate
@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["--confirm"], "--confirm: only with --each-node"),
        (["--each-node", "--apply"], "--apply runs the drain commands: add --drain"),
        (["--each-node", "--partition", "default"], "--each-node needs a Slurm partition"),
        (
            ["--each-node", "--partition", "slurm", "--repeat", "0"],
            "argument --repeat: '0': give a whole number from 1 to 1000",
        ),
    ],
)
def test_validate_each_node_bad_options(
    args: list[str], msg: str, tmp_path: Path, topobind_cli: Cli
) -> None:
    env = dict(os.environ, TOPOBIND_REFRAME_RESULTS=str(tmp_path))
    got = topobind_cli("validate", "--site", "local", *args, env=env, timeout=120)
    assert got.returncode == 2 and msg in got.stderr, got.stderr
    assert "Traceback" not in got.stderr


def test_plain_table_has_a_node_column_and_counts_references() -> None:
    tc = _tc("node2", 1234.0)
    tc["name"] = tc.pop("display_name").split(" %.")[0]
    rows = reframe_runs.rows_from([tc])
    text = reframe_runs.table(rows)
    assert text.splitlines()[0].split()[:2] == ["node", "check"]
    assert text.splitlines()[2].split()[0] == "node2"
    assert reframe_runs.reference_count(rows) == (0, 1)


def test_a_job_whose_nodelist_reframe_missed_is_named_by_its_post_run_line() -> None:
    """ReFrame's squeue poll can miss a job of 2 s: job_nodelist is ['None']; the node then
    comes from the check's tb_ran_on (the host its post-run line printed)."""
    tc = _tc("node2", 1234.0)
    tc["name"] = tc.pop("display_name").split(" %.")[0]  # plain validate: no %.nid
    tc["job_nodelist"] = ["None"]
    assert reframe_runs.rows_from([tc])[0].node == ""
    tc["tb_ran_on"] = "node3"
    assert {r.node for r in reframe_runs.rows_from([tc])} == {"node3"}
    tc["job_nodelist"] = ["node2"]  # the scheduler's own record wins
    assert {r.node for r in reframe_runs.rows_from([tc])} == {"node2"}


# --------------------------------------------------------------------------- report
def test_report_slow_host_table_shows_the_verdicts_strength(tmp_path: Path) -> None:
    from fleetgen import FleetSpec, generate_fleet, parse_slow

    from topobind.report import analysis, reader, tables

    for runs, strength in ((3, "weak"), (8, "strong")):
        d = tmp_path / f"f{runs}"
        spec = FleetSpec(hosts=9, runs=runs, kernels=("stream",),
                         slow=parse_slow("gen-node0002:1.30"))  # fmt: skip
        generate_fleet(d, spec)
        read = reader.read_results([d])
        report = analysis.analyse(read.runs, analysis.Options(), read.inputs, read.files)
        table = tables.slow_hosts_table(report)
        assert table.headers[-5:] == ("runs", "CV", "confidence", "strength", "cause")
        (row,) = [r for r in table.rows if r.cells[0] == "gen-node0002"]
        assert row.cells[8] == str(runs) and row.cells[-2] == strength
        assert row.cells[-1] == "unknown (no evidence: the results carry no evidence section)"


# --------------------------------------------------------------------------- history
def _history_db(path: Path, days: int, loss_per_week: float) -> Path:
    """A ReFrame results database (its real schema) with a session every 3 days: node3
    loses ``loss_per_week`` per week, node1 and node2 stay within 1 %."""
    import json as _json
    import random
    import sqlite3

    rng = random.Random(7)
    db = path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
                "session_end_unix REAL, json_blob TEXT, report_file TEXT)")  # fmt: skip
    start = 1_790_000_000.0
    for i, day in enumerate(range(0, days + 1, 3)):
        week = day / 7
        runs = [{"node1": 100 * rng.gauss(1, 0.005), "node2": 101 * rng.gauss(1, 0.005),
                 "node3": 100 * (1 - loss_per_week * week) * rng.gauss(1, 0.005)}
                for _ in range(3)]  # fmt: skip
        t = start + day * 86400
        con.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                    (f"s{i}", t, t + 60, _json.dumps(_report(runs)), ""))  # fmt: skip
    con.commit()
    con.close()
    return db


def test_history_flags_a_node_losing_three_percent_a_week(tmp_path: Path) -> None:
    from topobind.validation import history

    db = _history_db(tmp_path, 30, 0.03)
    rows = history.trends(history.sessions(db, "fleet", 30), "fleet", 0.05)
    by = {t.node: t for t in rows}
    assert by["node3"].drift and by["node3"].sessions == 11
    assert by["node3"].per_week == pytest.approx(-0.03, abs=0.006)
    assert not by["node1"].drift and not by["node2"].drift
    assert abs(by["node1"].per_week or 0) < 0.005
    text = history.table(rows)
    assert re.search(r"^node3 .* DRIFT$", text, re.M) and "%/week" in text


@pytest.mark.slow
def test_validate_history_command(tmp_path: Path) -> None:
    _history_db(tmp_path, 30, 0.03)
    sites = _sites_dir(tmp_path, None)
    got = _topobind(["validate", "--site", "fleet", "--history", "--results", str(tmp_path)],
                    sites)  # fmt: skip
    assert got.returncode == 1, got.stderr
    assert got.stdout.strip().splitlines()[-1] == "drifting nodes: node3"
    empty = tmp_path / "none"
    empty.mkdir()
    got = _topobind(["validate", "--site", "fleet", "--history", "--results", str(empty)], sites)
    assert got.returncode == 2 and "no ReFrame results database yet" in got.stderr


@pytest.mark.slow
def test_gpu_and_nic_locality_from_a_golden_xml() -> None:
    xml = TOPOLOGIES / "power8gpudistances.xml"
    if not xml.is_file():
        pytest.skip(f"{xml} not here")
    golden, where = conformance.golden_expected(xml, "n1")
    assert golden["gpus"] == 4 and golden["gpu_numa"] == [0, 0, 1, 1] and where == str(xml)
    facts = dict(golden, gpu_numa=[0, 0, 0, 1])  # one GPU moved to the other socket's slot
    (f,) = conformance.findings(golden, facts, where)
    assert f.text("n1") == f"n1: gpu_numa: expected [0, 0, 1, 1], found [0, 0, 0, 1] ({xml})"
    assert conformance.findings({"nic_numa": [1, 0]}, {"nic_numa": [0, 1]}, "x") == []


def test_each_node_settings_bound_only_the_per_node_acceptance(tmp_path: Path) -> None:
    """site_configs/local: STREAM's quick cap is 16G for a CI run (12 trials at the rule's size
    on a 32 MiB LLC), 4G under validate --each-node (each_node.X); the prefixed key never
    reaches ReFrame, and the user's -S wins over both."""
    from paths import REPO

    from topobind.validation import sites

    (tmp_path / "local").mkdir()
    text = (REPO / "site_configs" / "local" / "site.yaml").read_text()
    (tmp_path / "local" / "site.yaml").write_text(text.replace("references: references.yaml", ""))
    site = sites.load_site_file(tmp_path / "local" / "site.yaml")
    key = "StreamCheck.max_bytes_per_run"
    ci = reframe_runs.setvars_for(site, [], calibrating=False)
    each = reframe_runs.setvars_for(site, [], calibrating=False, each_node=True)
    assert ci[key] == "16G" and each[key] == "4G"
    assert not [k for k in [*ci, *each] if k.startswith("each_node.")]
    assert each["LatencyCheck.max_working_set"] == ci["LatencyCheck.max_working_set"] == "512M"
    mine = reframe_runs.setvars_for(site, [f"{key}=1G"], calibrating=False, each_node=True)
    assert mine[key] == "1G"
    assert reframe_runs.setvars_for(site, [], calibrating=True)[key] == "16G"


def test_quick_notes_name_only_the_checks_that_run() -> None:
    """-n 'StreamCheck...' runs no DGEMM: no note about DGEMM's bounds (one printed it)."""
    dgemm = "DgemmCheck: order 1024, 5 repetitions"
    assert any(n.startswith(dgemm) for n in acceptance.quick_notes("quick", None, {}))
    assert any(n.startswith(dgemm) for n in acceptance.quick_notes("quick", ["DgemmCheck"], {}))
    got = acceptance.quick_notes("quick", ["StreamCheck%layout=every-other-core"], {})
    assert not any(n.startswith("DgemmCheck") for n in got) and len(got) == 2


def test_node_lists_in_acceptances_messages_are_hostlists_bounded_at_5000_nodes() -> None:
    """Issue 47: node lists joined with ', ' grew with the fleet (a line per node name)."""
    from topobind.validation.acceptance import choose_nodes

    states = {f"node{n}": "down*" if n % 2 else "allocated" for n in range(5000, 0, -1)}
    with pytest.raises(TopobindError) as exc:
        choose_nodes(states, None, "debug")
    text = str(exc.value)
    assert "node[1,3,5,7," in text and "(2,500 nodes) down*" in text and len(text) < 600, text
    states = {f"node{n}": "allocated" for n in range(1, 65)}
    with pytest.raises(TopobindError, match=r"\(node\[1-64\] allocated\)"):
        choose_nodes(states, None, "debug")
