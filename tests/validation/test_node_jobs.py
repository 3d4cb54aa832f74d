"""One Slurm job a node for ``validate --each-node`` (issue 39): the node's job script, the
plan (tier, waves within the site's limits, the node's bound), the faults of a node (its job
never started, ran past its bound, or ended NODE_FAIL) and their verdicts, and --confirm as
one job a node too. The Slurm side is faked here by replacing :func:`bundles.run_jobs` (or
squeue and scancel for the follow loop); tests/validation/test_node_jobs_slurm.py runs the real
local cluster."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from topobind.errors import TopobindError
from topobind.validation import acceptance, bundles, limits, node_jobs, sites, slurm
from topobind.validation.verdict import NodeVerdict

SLURM_SITE = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: batch, scheduler: slurm, launcher: srun, access: ['-p b'], "
    "max_jobs: 4, exclusive: true}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)


def _runs(values: dict[str, float], runs: int) -> dict[str, object]:
    """A report of one node's job: its checks' runs, the node from job_nodelist."""

    def tc(node: str, v: float) -> dict[str, object]:
        name = "StreamCheck %layout=compact"
        return {"display_name": name, "name": name, "system": "fleet", "partition": "batch",
                "result": "pass", "fail_phase": None, "job_nodelist": [node],
                "perfvalues": {"fleet:batch:triad": [v, 0, None, None, "MB/s", "pass"]},
                }  # fmt: skip

    return {"runs": [{"testcases": [tc(n, v) for n, v in values.items()]} for _ in range(runs)]}


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "sites" / "fleet").mkdir(parents=True)
    (tmp_path / "sites" / "fleet" / "site.yaml").write_text(SLURM_SITE)
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(tmp_path / "sites"))
    monkeypatch.setattr(limits, "read_limits", lambda setting, where: limits.Limits())
    return sites.load_site("fleet")


class FakeJobs:
    """bundles.run_jobs without Slurm: each node's job 'runs' by writing the report its
    values give (``values(label, node, runs)``; None: the job died, no report)."""

    def __init__(self, values: Any) -> None:
        self.values = values
        self.scripts: list[dict[str, str]] = []
        self.waves: list[int] = []

    def __call__(self, jobs: list[bundles.NodeJob], scripts: dict[str, str], wave: int,
                 start_s: float, run_s: float, show: Any = None) -> bundles.Run:  # fmt: skip
        self.scripts.append(scripts)
        self.waves.append(wave)
        for job in jobs:
            argv = shlex.split(scripts[job.node].splitlines()[-1])
            runs = int(argv[argv.index("--reruns") + 1]) + 1 if "--reruns" in argv else 1
            value = self.values(job.report.name, job.node, runs)
            job.job_id, job.state = str(100 + len(self.scripts)), "COMPLETED"
            if value is None:
                job.state = "NODE_FAIL"
                job.fault, job.reason = bundles.UNREACHABLE, "its job ended NODE_FAIL"
                continue
            job.report.write_text(json.dumps(_runs({job.node: value}, runs)))
            job.conformance.write_text("topobind-conformance-status: 0\n")
        return bundles.Run(jobs, submitted=len(jobs), waves=-(-len(jobs) // wave))


def _states(monkeypatch: pytest.MonkeyPatch, nodes: dict[str, str]) -> None:
    monkeypatch.setattr(slurm, "partition_nodes", lambda access: nodes)


def test_one_job_a_node_runs_the_checks_interleaved_in_it(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each node's job: its node only, exclusive, the conformance step, then ONE ReFrame session
    (serial, --reruns 2: the checks' runs interleave) of the site's partition made local; a
    report a node; 'N Slurm jobs for M nodes' counts one a node."""
    _states(monkeypatch, dict.fromkeys(["node1", "node2", "node3", "node4"], "idle"))
    monkeypatch.delenv("RFM_POLL_RATE_DECAY", raising=False)
    fake = FakeJobs(lambda label, node, runs: 100.0)
    monkeypatch.setattr(bundles, "run_jobs", fake)
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={},
                             quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    assert out.jobs == 4 and len(out.reports) == 4
    assert [v.status for v in out.verdicts] == ["ok"] * 4
    script = fake.scripts[0]["node2"]
    assert "#SBATCH --nodelist=node2\n" in script and "#SBATCH --exclusive\n" in script
    assert "#SBATCH -p b\n" in script and "export TOPOBIND_REFRAME_IN_JOB=1\n" in script
    assert "export RFM_POLL_RATE_DECAY=0.02\n" in script
    assert " site check fleet --live > " in script
    argv = shlex.split(script.splitlines()[-1])
    assert argv[0] == "exec" and argv[argv.index("--reruns") + 1] == "2"
    assert argv[argv.index("--exec-policy") + 1] == "serial"
    assert argv[argv.index("--system") + 1] == "fleet:batch"
    assert argv[argv.index("--report-file") + 1].endswith("-node2.json")
    assert "NodeCheck" in argv and "--distribute=all" not in argv
    assert fake.waves == [4]  # the four nodes side by side
    monkeypatch.setenv("RFM_POLL_RATE_DECAY", "0.5")  # the user's value wins
    acceptance.accept(fleet, req, tmp_path / "res", False)
    assert "export RFM_POLL_RATE_DECAY=0.5\n" in fake.scripts[-1]["node1"]


def test_the_in_job_reframe_configuration_makes_slurm_partitions_local(
    fleet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from topobind.validation.sites.reframe_config import reframe_site_configuration

    def scheduler() -> str:
        (system,) = [s for s in reframe_site_configuration()["systems"] if s["name"] == "fleet"]
        return str(system["partitions"][0]["scheduler"])

    monkeypatch.delenv("TOPOBIND_REFRAME_IN_JOB", raising=False)
    assert scheduler() == "slurm"
    monkeypatch.setenv("TOPOBIND_REFRAME_IN_JOB", "1")
    assert scheduler() == "local"


def test_a_node_that_died_is_unreachable_named_and_drained_only_as_judged(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = dict.fromkeys(["node1", "node2", "node3", "node4"], "idle") | {"node5": "down*"}
    _states(monkeypatch, nodes)
    monkeypatch.setattr(bundles, "run_jobs", FakeJobs(
        lambda label, node, runs: None if node == "node3" else 100.0))  # fmt: skip
    req = acceptance.Request(partition="batch", tags="smoke", names=None, setvars={},
                             quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    by = {v.node: v for v in out.verdicts}
    assert by["node3"].status == "UNREACHABLE" and by["node3"].reasons == (
        "its job ended NODE_FAIL",)  # fmt: skip
    assert {by[n].status for n in ("node1", "node2", "node4")} == {"ok"}
    assert acceptance.bad_nodes_line(out.verdicts) == "bad nodes: node3"
    assert any(n.startswith("not tested (down or drained before the run): node5 (down*)")
               for n in out.notes)  # fmt: skip
    plan = acceptance.drain_lines(out)
    assert plan.commands == [("node3", "unreachable: its job ended NODE_FAIL")]
    late = NodeVerdict("node4", "NOT STARTED", False, ("its job 7 did not start",), None)
    assert acceptance.bad_nodes_line([late]) == (
        "bad nodes: none; not tested (their jobs never started): node4"
    )
    out.verdicts = [late]
    assert acceptance.drain_lines(out).refused == [
        "node4 not drained: its job never started: nothing was judged"]  # fmt: skip


def test_a_nodelist_node_down_before_the_run_is_not_tested_and_listed(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--nodelist naming a node down or drained before the run: the others run (one job a
    node), it is 'not tested' with its state, listed, never bad; a node outside the
    partition stays a refusal before anything is submitted."""
    _states(monkeypatch, {"node1": "idle", "node2": "down*", "node3": "idle",
                          "node4": "drained"})  # fmt: skip
    fake = FakeJobs(lambda label, node, runs: 100.0)
    monkeypatch.setattr(bundles, "run_jobs", fake)
    req = acceptance.Request(partition="batch", tags="smoke", names=None, setvars={},
                             quiet=True, nodelist="node[1-3]")  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    assert sorted(fake.scripts[0]) == ["node1", "node3"] and out.jobs == 2
    by = {v.node: v for v in out.verdicts}
    assert [by[n].status for n in ("node1", "node3")] == ["ok", "ok"]
    assert by["node2"].status == "not tested" and not by["node2"].bad
    assert by["node2"].reasons == ("not tested: down* before the run",)
    assert "node4" not in by  # not asked for
    assert acceptance.bad_nodes_line(out.verdicts) == "bad nodes: none; not tested: node2"
    assert any(n.startswith("not tested (down or drained before the run): node2 (down*)")
               for n in out.notes)  # fmt: skip
    assert acceptance.drain_lines(out).commands == []
    fake.scripts.clear()
    for bad, says in (("node[2,4]", "no node to test: node2 is down*, node4 is drained"),
                      ("node[1,9]", "node9 not in partition batch")):  # fmt: skip
        with pytest.raises(TopobindError, match=re.escape(says)):
            acceptance.accept(fleet, replace(req, nodelist=bad), tmp_path / "res", False)
    assert fake.scripts == []  # nothing submitted


def test_a_short_node_budget_bounds_the_wait_for_a_node_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for a node's job to start is the node's bound when that is under START_S
    (a site's node_budget of 20 s: 20 s), else START_S."""
    (tmp_path / "sites" / "fleet").mkdir(parents=True)
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(tmp_path / "sites"))
    monkeypatch.setattr(limits, "read_limits", lambda setting, where: limits.Limits())
    req = acceptance.Request(partition="batch", tags="smoke", names=None, setvars={},
                             quiet=True)  # fmt: skip
    tier = ("quick", {}, ())
    for budget, start in (("20s", 20.0), ("10m", bundles.START_S)):
        (tmp_path / "sites" / "fleet" / "site.yaml").write_text(
            SLURM_SITE + f"settings:\n  node_budget: {budget}\n"
        )
        site = sites.load_site("fleet")
        got = node_jobs.plan(site, req, {"node1": "idle"}, ["node1"], tmp_path / "r", tier)
        assert got.spec.start_s == start
        assert any(f"{start:.0f} s to start" in n for n in got.notes)


def test_smoke_tier_is_the_quick_checks_at_their_smallest_size_judging_no_figure(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _states(monkeypatch, dict.fromkeys(["node1", "node2", "node3"], "idle"))
    fake = FakeJobs(lambda label, node, runs: 10.0 if node == "node2" else 100.0)
    monkeypatch.setattr(bundles, "run_jobs", fake)
    req = acceptance.Request(partition="batch", tags="smoke", names=None,
                             setvars={"DgemmCheck.n": "256"}, quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    assert [v.status for v in out.verdicts] == ["ok"] * 3  # node2's 10x slower: not judged
    assert out.figures == []
    argv = shlex.split(fake.scripts[0]["node1"].splitlines()[-1])
    assert argv[argv.index("-t") + 1] == "quick"
    sets = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-S")
    assert sets["StreamCheck.elements"] == "131072" and sets["DgemmCheck.n"] == "256"
    # the smoke size, not the quick tier's per-node one (5 repetitions of order 1024)
    assert sets["DgemmCheck.reps"] == "2"
    # the latency chase's 3 trials of at least 0.01 s, not 0.1 s (0.3 s of a node's CPU a run)
    assert sets["LatencyCheck.min_time"] == "0.01" and sets["LatencyCheck.sizes"] == "1M"
    assert any(n.startswith("smoke tier:") and "not performance" in n for n in out.notes)


def test_waves_within_the_tightest_limit_and_a_full_queue_refused(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _states(monkeypatch, {f"node{i}": "idle" for i in range(1, 8)})
    fake = FakeJobs(lambda label, node, runs: 100.0)
    monkeypatch.setattr(bundles, "run_jobs", fake)
    lim = limits.Limits({"max_submit in site.yaml": 5, "QOS MaxSubmitJobs": 9}, queued=2)
    monkeypatch.setattr(limits, "read_limits", lambda setting, where: lim)
    req = acceptance.Request(partition="batch", tags="smoke", names=None, setvars={},
                             quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    assert fake.waves == [3] and out.jobs == 7  # 5 - 2 queued already
    assert any(
        "7 jobs (one a node) while at most 5 jobs queued (max_submit in site.yaml; 2 "
        "queued by this user already): waves of at most 3" in n
        for n in out.notes
    )
    lim.queued = 5
    with pytest.raises(TopobindError, match="no job can be queued: at most 5 jobs queued"):
        acceptance.accept(fleet, req, tmp_path / "res", False)


@pytest.mark.parametrize("bad", [0, -1, "abc", "1.5", "", True, "٣"])
def test_max_submit_setting_is_a_whole_number_of_jobs(bad: object) -> None:
    with pytest.raises(TopobindError) as exc:
        limits.max_submit_setting(bad, "site.yaml")
    assert "\n" not in str(exc.value) and "max_submit" in str(exc.value)
    assert limits.max_submit_setting("500", "x") == 500


def test_slurm_limits_are_read_from_scontrol_and_sacctmgr_text() -> None:
    conf = limits.parse_config("MaxJobCount             = 10000\nMinJobAge = 300 sec\n")
    assert conf["MaxJobCount"] == "10000"
    got = limits.parse_sacctmgr("1000|500\n|\n4294967295|200\n", "QOS")
    assert got == {"QOS MaxSubmitJobs": 1000, "QOS MaxJobs": 200}
    lim = limits.Limits({"slurmctld MaxJobCount": 10000, "QOS MaxSubmitJobs": 1000}, queued=10)
    assert lim.free == 990 and limits.describe(lim).startswith("at most 1000 jobs queued (QOS")


def test_follow_bounds_each_node_not_started_past_its_bound_and_node_fail(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """squeue's answers over a fake clock: node1 never starts (NOT STARTED after 300 s, its
    job cancelled), node2 runs past its bound (UNREACHABLE, cancelled), node3 ends NODE_FAIL
    (UNREACHABLE), node4 completes."""
    clock = [0.0]
    answers = {"1": ("PENDING", "Resources"), "2": ("RUNNING", "None"),
               "3": ("RUNNING", "None"), "4": ("RUNNING", "None")}  # fmt: skip
    cancelled: list[str] = []

    def states(ids: list[str]) -> dict[str, tuple[str, str]]:
        if clock[0] > 100:
            answers["3"] = ("NODE_FAIL", "None")
            answers["4"] = ("COMPLETED", "None")
        return {i: answers[i] for i in ids}

    def sleep(_s: float) -> None:
        clock[0] += 50

    monkeypatch.setattr(bundles, "states", states)
    monkeypatch.setattr(bundles, "cancel", lambda ids: cancelled.extend(ids) or "cancelled")
    monkeypatch.setattr(bundles.time, "sleep", sleep)
    jobs = [bundles.NodeJob(f"node{i}", tmp_path / f"{i}.json", tmp_path / f"{i}.out",
                            tmp_path / f"{i}.c", job_id=str(i)) for i in range(1, 5)]  # fmt: skip
    lines: list[str] = []
    bundles._follow(jobs, 300.0, 200.0, lines.append, "wave 1/1", lambda: clock[0])
    assert [(j.node, j.fault) for j in jobs] == [
        ("node1", "NOT STARTED"), ("node2", "UNREACHABLE"), ("node3", "UNREACHABLE"),
        ("node4", "")]  # fmt: skip
    assert "did not start within 300 s (PENDING: Resources)" in jobs[0].reason
    assert "ran past the node's bound of 200 s" in jobs[1].reason
    assert sorted(cancelled) == ["1", "2"]  # only the bounded ones, by id
    assert lines[0] == "wave 1/1: 0 of 4 node(s) done, 3 running, 1 pending"
    assert len(lines) == len(set(lines))  # a line when something changed


@pytest.mark.parametrize("again, sessions", [(100.0, 1), (60.0, 2)])
def test_confirm_is_one_job_a_node_and_stops_after_its_look_when_futile(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, again: float, sessions: int
) -> None:
    """node3 flagged in the first pass; the confirmation runs node3 and the partner only, one
    job a node a pass; when its first 3 runs are at the partner's level it stops there (node3
    ok, unnamed); when still slow the rest follow in a second pass."""
    _states(monkeypatch, dict.fromkeys(["node1", "node2", "node3"], "idle"))

    def values(label: str, node: str, runs: int) -> float:
        first = {"node1": 100.0, "node2": 101.0, "node3": 60.0}
        return first[node] if "each-node" in label else (again if node == "node3" else 100.0)

    fake = FakeJobs(values)
    monkeypatch.setattr(bundles, "run_jobs", fake)
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={},
                             confirm=True, quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    confirms = fake.scripts[1:]
    assert len(confirms) == sessions and len(out.reports) == 3 + 2 * sessions
    assert all(sorted(s) == [out.partner, "node3"] for s in confirms)
    assert out.jobs == 3 + 2 * sessions
    assert out.confirm_runs == (3 if sessions == 1 else 7)
    node3 = next(v for v in out.verdicts if v.node == "node3")
    stopped = [n for n in out.notes if n.startswith("--confirm stopped after 3 of 7 runs")]
    if sessions == 1:
        assert node3.status == "ok" and node3.confirmed.startswith("not confirmed")
        assert stopped and "node3 cannot come out SLOW" in stopped[0]
    else:
        assert node3.status == "SLOW" and node3.confirmed.startswith("confirmed against")
        assert not stopped


def test_a_report_of_a_bundle_keeps_its_figures_names_and_units(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verdict reads a node's report as it read a --distribute report: the same figure
    (check, variant, metric, unit), the node from job_nodelist."""
    _states(monkeypatch, dict.fromkeys(["node1", "node2", "node3"], "idle"))
    monkeypatch.setattr(bundles, "run_jobs", FakeJobs(lambda label, node, runs: 100.0))
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={},
                             quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    figures = {(s.node, s.check, s.variant, s.metric, s.unit) for s in out.obs.samples}
    assert figures == {(n, "StreamCheck", "compact", "triad", "MB/s")
                       for n in ("node1", "node2", "node3")}  # fmt: skip
    assert node_jobs.SMOKE_VARS["sanity_once"] == "true"


def test_ctrl_c_while_squeue_or_scancel_runs_stops_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C that lands while squeue (or scancel) runs is the run's stop, not a squeue that
    did not answer: it was swallowed, and the run went on to its end (found on the real
    cluster: tests/validation/test_node_jobs_slurm.py)."""
    from topobind.errors import Interrupted

    def interrupted(argv: list[str], what: str) -> Any:
        raise Interrupted(2, "SIGINT", "while the nodes' jobs ran")

    monkeypatch.setattr(bundles, "_slurm", interrupted)
    with pytest.raises(Interrupted):
        bundles.states(["12"])
    with pytest.raises(Interrupted):
        bundles.cancel(["12"])

    def silent(argv: list[str], what: str) -> Any:
        raise TopobindError("squeue did not answer within 60 s")

    monkeypatch.setattr(bundles, "_slurm", silent)
    assert bundles.states(["12"]) is None  # a squeue that failed: the bounds still hold


def test_ctrl_c_in_a_wave_cancels_this_runs_jobs_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SIGINT while wave 2 is followed: the jobs this run submitted and that had not ended are
    cancelled by id (wave 1's ended job is not touched, nor anything else), and the run stops
    with the signal's exit status."""
    import signal

    from topobind.errors import Interrupted

    ids = iter(["11", "12", "13"])
    monkeypatch.setattr(bundles, "submit", lambda script, node: next(ids))
    cancelled: list[list[str]] = []
    monkeypatch.setattr(bundles, "cancel", lambda got: cancelled.append(list(got)) or "done")

    def follow(wave: list[bundles.NodeJob], *args: object) -> None:
        if wave[0].node == "node1":
            wave[0].ended = 1.0  # wave 1 ends
            return
        signal.raise_signal(signal.SIGINT)  # Ctrl-C in wave 2

    monkeypatch.setattr(bundles, "_follow", follow)
    jobs = [bundles.NodeJob(f"node{i}", tmp_path / f"{i}.json", tmp_path / f"{i}.out",
                            tmp_path / f"{i}.c") for i in (1, 2, 3)]  # fmt: skip
    scripts = {j.node: "#!/bin/bash\n" for j in jobs}
    with pytest.raises(Interrupted) as exc:
        bundles.run_jobs(jobs, scripts, 1, 300.0, 60.0, lambda text: None)
    assert exc.value.exit_status == 130
    assert cancelled == [["12"]]  # node2's job; node3's was never submitted
    assert "while the nodes' jobs ran" in str(exc.value)


def test_each_nodes_conformance_is_kept_beside_its_report_and_judged_again(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One job a node: the conformance of the job's ``site check --live`` is written beside
    the node's report (REPORT.conformance.json), so --reports still FAILs node2 on it; a node
    whose job died is UNREACHABLE live, but only not tested when its reports are judged."""
    _states(monkeypatch, dict.fromkeys(["node1", "node2", "node3", "node4"], "idle"))
    fake = FakeJobs(lambda label, node, runs: None if node == "node4" else 100.0)

    def with_finding(jobs: list[bundles.NodeJob], *args: Any, **kw: Any) -> bundles.Run:
        run = fake(jobs, *args, **kw)
        for job in jobs:
            if job.node == "node2":
                job.conformance.write_text(
                    "topobind: error: node2: hugepages_2m_per_numa: expected at least 100000 "
                    "on every NUMA node, found 0 (fix the node)\ntopobind-conformance-status: 2\n"
                )
        return run

    monkeypatch.setattr(bundles, "run_jobs", with_finding)
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={},
                             quiet=True)  # fmt: skip
    out = acceptance.accept(fleet, req, tmp_path / "res", False)
    finding = ("conformance: hugepages_2m_per_numa: expected at least 100000 on every NUMA "
               "node, found 0")  # fmt: skip
    live = {v.node: v for v in out.verdicts}
    assert live["node2"].status == "FAIL" and live["node2"].reasons == (finding,)
    assert live["node4"].status == "UNREACHABLE"
    assert len(out.reports) == 3
    for path in out.reports:
        record = acceptance.conformance_path(path)
        node = path.rsplit("-", 1)[1].removesuffix(".json")
        checked, found, notes = acceptance.read_conformance(record, "fleet")
        assert (checked, notes) == ([node], [])
        assert found == ({"node2": [finding.removeprefix("conformance: ")]}
                         if node == "node2" else {})  # fmt: skip
    again = acceptance.judge_reports(
        out.reports, fleet, acceptance.Request("batch", "quick", None, {}, nodelist="node[1-4]")
    )
    by = {v.node: v for v in again.verdicts}
    assert by["node2"].status == "FAIL" and by["node2"].reasons == (finding,)
    assert by["node4"].status == "not tested" and by["node4"].reasons == (
        "not tested: the reports hold no result of it",)  # fmt: skip
    assert not any("conformance not judged" in n for n in again.notes)


def test_a_note_of_every_nodes_conformance_record_is_said_once(tmp_path: Path) -> None:
    """--reports of one report a node: the 'no node: section' note each node's record holds
    (with its own name) is one note, not one a node."""
    paths = []
    for n in (1, 2, 3):
        report = tmp_path / f"each-node-fleet-batch-1-node{n}.json"
        report.write_text(json.dumps(_runs({f"node{n}": 100.0}, 3)))
        note = f"conformance not checked: no node: section to compare node{n} with"
        acceptance.write_conformance(report, "fleet", [], {}, [note])
        paths.append(str(report))
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={})
    out = acceptance.judge_reports(paths, "fleet", req)
    assert [n for n in out.notes if "conformance" in n] == [
        "conformance not checked: no node: section to compare node1 with"
    ]


def test_reports_of_a_smoke_run_compare_no_figure_when_judged_again(tmp_path: Path) -> None:
    """--tags smoke judges configuration, not performance: its reports judged again with
    --reports compare no figure either (two nodes' figures were NOT JUDGED), a quick one does."""
    smoke = [a for k, v in node_jobs.SMOKE_VARS.items() for a in ("-S", f"{k}={v}")]
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={})
    for argv, want in ((["reframe", "-t", "quick", *smoke, "-r"], "ok"),
                       (["reframe", "-t", "quick", "-r"], "NOT JUDGED")):  # fmt: skip
        paths = []
        for n, value in ((1, 100.0), (2, 50.0)):
            report = tmp_path / f"{want}-node{n}.json".replace(" ", "_")
            doc = {"session_info": {"cmdline": shlex.join(argv)}, **_runs({f"node{n}": value}, 1)}
            report.write_text(json.dumps(doc))
            paths.append(str(report))
        out = acceptance.judge_reports(paths, "fleet", req)
        assert [v.status for v in out.verdicts] == [want, want]


@pytest.mark.parametrize("bad", [0, 1_000_000_000, "0", "99999999999999999999999"])
def test_max_submit_range_message_and_check_agree(bad: object) -> None:
    """Issue 47: 1000000000 said 'a whole number from 0 to 999999999', then 0 was refused
    'from 1'. The site schema and the limits read one range, and say that one."""
    from topobind.validation.sites.catalogue import OWN_SETTINGS
    from topobind.validation.sites.schema import setting_value_problem

    spec = OWN_SETTINGS["max_submit"]
    assert setting_value_problem(spec, bad) == "give a whole number from 1 to 999999999"
    with pytest.raises(TopobindError, match="give a whole number from 1 to 999999999"):
        limits.max_submit_setting(bad, "site.yaml")
    for good in (1, 999_999_999):
        assert setting_value_problem(spec, good) == ""
        assert limits.max_submit_setting(good, "site.yaml") == good
