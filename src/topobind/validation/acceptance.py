"""Node acceptance: the same checks on every node of a partition, each node judged against
the fleet (``topobind validate --each-node``).

How the runs are placed: ONE Slurm job a node a pass (:mod:`topobind.validation.node_jobs`, the
plan: tier, waves within the site's limits, each node's time bound; :mod:`topobind.validation.
bundles`, the jobs). Inside a node's job one ReFrame session runs the tier's checks with
``--reruns N-1``, which runs the whole list once per rerun, so each node's runs of the checks
are interleaved (A B C A B C ...) and the nodes run side by side, all at once within the
site's limits on queued jobs: a burst of load lands on all nodes alike (one node after
another, the node that ran during a burst looked slow). A node whose job dies or never
starts is UNREACHABLE or NOT STARTED, never SLOW.

The pieces: the report's one reader (:mod:`topobind.validation.reframe_report`), the verdict
(:mod:`topobind.validation.verdict`, pure), the Slurm queries (:mod:`topobind.validation.slurm`).
This module chooses the nodes, runs the passes and puts them together. Entry points:
:func:`accept` (run and judge), :func:`judge_reports` (judge report files), :func:`drain`
(drain what was judged bad, on a confirmed verdict).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from topobind.errors import TopobindError
from topobind.topo import hostlist
from topobind.validation import reframe_report, site_problems, slurm
from topobind.validation.bundles import conformance_lines
from topobind.validation.verdict import (
    DEFAULT_THRESHOLD,
    MAX_REPEAT,
    MIN_RUNS,
    NAME_CONFIDENCE,
    NOT_JUDGED,
    NOT_TESTED,
    RATE_UNITS,
    DrainPlan,
    Failure,
    FigureVerdict,
    NodeVerdict,
    Observations,
    Sample,
    bad_nodes_line,
    cannot_confirm,
    confirm,
    drain_plan,
    figure_verdicts,
    good_node,
    min_beyond,
    node_verdicts,
    observe,
    table,
    unjudged_summary,
    with_causes,
)

__all__ = [
    "DEFAULT_THRESHOLD", "MIN_RUNS", "NAME_CONFIDENCE", "NOT_JUDGED", "NOT_TESTED", "RATE_UNITS",
    "DrainPlan", "Failure", "FigureVerdict", "NodeVerdict", "Observations", "Outcome", "Request",
    "Sample", "accept",
    "bad_nodes_line", "choose_nodes", "confirm", "conformance_lines", "down_named", "drain",
    "drain_lines",
    "figure_verdicts", "good_node", "judge_reports", "node_verdicts", "observe", "reports_text",
    "table", "unjudged_summary",
]  # fmt: skip


# --------------------------------------------------------------------------- the nodes
def _by_state(states: dict[str, str], sep: str) -> str:
    """'node[1-3,7] is idle, node4 is down*': the nodes of each state in hostlist notation,
    bounded whatever the node count (the states in the order first seen)."""
    nodes: dict[str, list[str]] = {}
    for node, state in states.items():
        nodes.setdefault(state, []).append(node)
    return ", ".join(f"{hostlist.shown(ns)}{sep}{s}" for s, ns in nodes.items())


def choose_nodes(states: dict[str, str], nodelist: str | None, partition: str) -> list[str]:
    """The nodes to test: the usable ones of ``nodelist`` (all must be in the partition; one
    down or drained is left out: :func:`down_named` lists it, not tested), else every idle
    node of the partition."""
    if nodelist is not None:
        down = down_named(states, nodelist, partition)
        wanted = [n for n in hostlist.expand(nodelist) if n not in down]
        if not wanted:
            raise TopobindError(
                f"--nodelist {nodelist}: no node to test: "
                + _by_state(down, " is ")
                + " (resume one with scontrol update nodename=NODE state=resume, or name others)"
            )
        return wanted
    idle = [n for n, s in states.items() if s.rstrip("*~#!%$@^-") == "idle"]
    if not idle:
        seen = _by_state(states, " ") or "no nodes"
        raise TopobindError(
            f"partition {partition} has no idle node to test ({seen}); wait for them, or "
            "name busy ones with --nodelist"
        )
    return idle


def down_named(states: dict[str, str], nodelist: str, partition: str) -> dict[str, str]:
    """The nodes of ``nodelist`` down or drained before the run (node -> Slurm's state):
    not tested, listed. A node outside the partition, or a list naming none, is refused."""
    wanted = hostlist.expand(nodelist) if nodelist.strip() else []
    if not wanted:
        raise TopobindError(f"--nodelist {nodelist!r} names no node; give nodes, e.g. "
                            "node[1-3], or leave --nodelist out for the idle ones")  # fmt: skip
    unknown = [n for n in wanted if n not in states]
    if unknown:
        raise TopobindError(
            f"--nodelist {nodelist}: {hostlist.shown(unknown)} not in partition "
            f"{partition} (its nodes: {hostlist.shown(states) or 'none'})"
        )
    usable = ("idle", "mix", "alloc", "comp")
    return {n: states[n] for n in wanted if states[n].rstrip("*~#!%$@^-") not in usable}


#: checks the quick per-node acceptance leaves out, and why (their cost model is over the quick
#: tier's bound): one HPL run through Debian's hpcc runs every HPC Challenge test and took
#: minutes a node on the local cluster (a STREAM job: 4 s); BindingCheck's 6 cases were 18 of
#: a pass's 36 jobs and judge nothing across nodes
QUICK_EXCLUDED = {
    "HplCheck": "one hpcc run costs minutes a node; run it with --tags full",
    "BindingCheck": "sanity only, no figure to compare across nodes, and half of the quick "
    "set's jobs; run --tags binding once after a Slurm or kernel update",
}


#: the quick per-node acceptance runs one STREAM layout per node (the layouts measure the same
#: memory system; the others: --tags full, or name them with -n): 12 of a pass's 24 jobs were
#: STREAM's four quick layouts on the local cluster
QUICK_STREAM = "compact"

#: the quick per-node acceptance's own bounds (the nodes are compared with each other, run
#: alike, not with references; the site's settings and -S override them): DGEMM of order 1024,
#: 5 repetitions (2 n^3 x 5 = 10.7 GFLOP; the quick tier's 2048 x 20 took 15-27 s a job on
#: the local cluster), the latency at the rule's working set only (its 2M size is not
#: judged: 1-3 s a job), and the sanity-only checks once, not once per --repeat run
QUICK_EACH_NODE_VARS = {"DgemmCheck.n": "1024", "DgemmCheck.reps": "5",
                        "LatencyCheck.quick_small": "", "sanity_once": "true"}  # fmt: skip


def quick_exclusions(tags: str, names: Sequence[str] | None = None) -> list[str]:
    """ReFrame options leaving :data:`QUICK_EXCLUDED` out of a ``--tags quick`` acceptance,
    and STREAM's layouts other than :data:`QUICK_STREAM` unless ``names`` chooses checks."""
    if tags != "quick":
        return []
    out = [a for name in QUICK_EXCLUDED for a in ("-x", name)]
    if not names:  # ReFrame matches -x against the display name without its spaces, before
        # --distribute adds %.part=...%.nid=...: 'StreamCheck%layout=compact'
        out += ["-x", f"^StreamCheck%layout=(?!{QUICK_STREAM}($|%))"]
    return out


def quick_setvars(tags: str, setvars: dict[str, str]) -> dict[str, str]:
    """``setvars`` with :data:`QUICK_EACH_NODE_VARS` added under ``--tags quick`` where
    neither the check's variable nor the bare one is set already."""
    if tags != "quick":
        return dict(setvars)
    out = dict(setvars)
    for key, value in QUICK_EACH_NODE_VARS.items():
        if key not in setvars and key.rpartition(".")[2] not in setvars:
            out[key] = value
    return out


def quick_notes(tags: str, names: Sequence[str] | None, setvars: dict[str, str]) -> list[str]:
    """What the quick acceptance left out or bounded, one note each."""
    if tags != "quick":
        return []
    notes = [f"{c} left out of the quick acceptance: {w}" for c, w in QUICK_EXCLUDED.items()]
    if not names:
        notes.append(f"StreamCheck: layout {QUICK_STREAM} only in the quick acceptance (the "
                     "others: --tags full, or -n 'StreamCheck%layout=LAYOUT')")  # fmt: skip
    got = quick_setvars(tags, setvars)
    dgemm = not names or any("Dgemm" in n for n in names)  # -n chose the checks: DGEMM in them
    if dgemm and got.get("DgemmCheck.n") == QUICK_EACH_NODE_VARS["DgemmCheck.n"]:
        reps = got.get("DgemmCheck.reps", "20")
        notes.append(f"DgemmCheck: order {got['DgemmCheck.n']}, {reps} repetitions in the "
                     "quick acceptance (-S DgemmCheck.n=N to change)")  # fmt: skip
    return notes


def suspect_names(figures: Sequence[FigureVerdict], nodes: Collection[str]) -> list[str]:
    """ReFrame -n patterns of the check (and variant) behind each of ``nodes``' worst SLOW
    figure: what --confirm runs again (7 runs of each on the SLOW nodes and the partner; every
    SLOW check was 42 jobs for one node on the local cluster, its worst one is 14). ReFrame
    matches -n against the display name without its spaces, before --distribute adds
    ``%.part=...%.nid=...``: a variant is a parameter's value (``StreamCheck%layout=compact``)
    or, for a check without parameters, nothing (``LatencyCheck``)."""
    worst: dict[str, FigureVerdict] = {}
    for f in figures:
        if f.slow and f.node in nodes and (f.node not in worst or
                                           f.slowdown > worst[f.node].slowdown):  # fmt: skip
            worst[f.node] = f
    out: dict[str, None] = {}
    for f in worst.values():
        v = re.escape(f.variant)
        out[f"^{re.escape(f.check)}(%[^%=]+={v}($|%)|$|%\\.part=)"] = None
    return list(out)


# --------------------------------------------------------------------------- one command
@dataclass(frozen=True)
class Request:
    partition: str
    tags: str
    names: list[str] | None
    setvars: dict[str, str]
    nodelist: str | None = None
    repeat: int = 3
    confirm: bool = False
    threshold: float = DEFAULT_THRESHOLD
    quiet: bool = False  # no progress lines (cron)


@dataclass
class Outcome:
    nodes: list[str]
    verdicts: list[NodeVerdict]
    figures: list[FigureVerdict]
    obs: Observations
    reports: list[str] = field(default_factory=list)
    partner: str | None = None
    notes: list[str] = field(default_factory=list)
    first: list[NodeVerdict] = field(default_factory=list)  # before --confirm
    partition: str = ""
    partition_nodes: dict[str, str] | None = None  # {node: state}; None: unknown
    nodelist: list[str] | None = None  # --nodelist, expanded
    confirm_runs: int = 0  # runs of each node --confirm made (fewer than MIN_RUNS: stopped)
    jobs: int = 0  # Slurm jobs this run submitted (one a node a pass: node_jobs)
    plan: Any = None  # node_jobs.Plan of a run (None: --reports)


def _tier(req: Request) -> tuple[str, dict[str, str], tuple[str, ...]]:
    """ReFrame's -t, -S and exclusions of the request's tier (smoke: the quick tier's checks
    with :data:`topobind.validation.node_jobs.SMOKE_VARS`)."""
    from topobind.validation import node_jobs

    tags = "quick" if req.tags == "smoke" else req.tags
    # the smoke sizes before the quick tier's per-node ones (DGEMM of order 128, not 1024);
    # the user's -S win over both
    setvars = node_jobs.smoke_setvars(req.setvars) if req.tags == "smoke" else req.setvars
    return tags, quick_setvars(tags, setvars), tuple(quick_exclusions(tags, req.names))


def accept(site: Any, req: Request, results: Any, verbose: bool) -> Outcome:
    """Run the checks on every chosen node, judge them, and with ``confirm`` re-run the SLOW
    ones next to a good node before naming them."""
    if req.repeat < 1 or req.repeat > MAX_REPEAT:
        raise TopobindError(f"--repeat {req.repeat}: give 1 to {MAX_REPEAT} runs per node (7 or "
                            "more for a strong verdict)")  # fmt: skip
    part = site.partition(req.partition)
    if part.scheduler != "slurm":
        raise TopobindError(
            f"--each-node needs a Slurm partition; {site.name}:{req.partition} is "
            f"{part.scheduler} (one machine: plain topobind validate)"
        )
    from topobind.validation import node_jobs

    states = slurm.partition_nodes(part.access)
    nodes = choose_nodes(states, req.nodelist, req.partition)
    plan = node_jobs.plan(site, req, states, nodes, results, _tier(req))
    one = node_jobs.one_pass(plan, req, nodes, req.repeat, results, "each-node")
    record_conformance(one, site.name)
    obs = observe(one.parsed, site.name)
    _skip_reasons(obs, one)
    node_jobs.add_failures(obs, one)
    site_problems.split(obs, nodes, {j.node for j in one.faults})
    # the smoke tier measures no performance: its figures are not compared
    figures = [] if req.tags == "smoke" else figure_verdicts(obs.samples, req.threshold)
    verdicts = node_jobs.faulted(node_verdicts(nodes, obs, figures), one)
    verdicts = with_causes(verdicts, obs, req.threshold)
    verdicts += _not_tested(states, req)
    out = Outcome(nodes, verdicts, figures, obs, one.report_paths, notes=plan.notes + one.notes,
                  first=verdicts, partition=req.partition, partition_nodes=states,
                  nodelist=None if req.nodelist is None else list(nodes),
                  jobs=one.run.submitted, plan=plan)  # fmt: skip
    out.notes += quick_notes(req.tags, req.names, req.setvars)
    slow = [v.node for v in verdicts if v.status == "SLOW"]
    if req.confirm and slow:
        partner = good_node(verdicts)
        if partner is None:
            out.notes.append("--confirm: no good node to compare with; the SLOW stay unconfirmed")
            return out
        _confirm(site, req, states, slow, partner, figures, results, verbose, out)
    return out


def _not_tested(states: dict[str, str], req: Request) -> list[NodeVerdict]:
    """A verdict 'not tested' for each node of --nodelist down or drained before the run."""
    if req.nodelist is None:
        return []
    down = down_named(states, req.nodelist, req.partition)
    return [NodeVerdict(n, NOT_TESTED, False, (f"not tested: {s} before the run",), None)
            for n, s in down.items()]  # fmt: skip


def _confirm_pass(out: Outcome, req: Request, nodes: list[str], runs: int, results: Any,
                  names: list[str]) -> Any:  # fmt: skip
    """One confirmation pass: one job a node on the SLOW nodes and the partner."""
    from dataclasses import replace

    from topobind.validation import node_jobs

    one = node_jobs.one_pass(out.plan, replace(req, names=names), nodes, runs, results,
                             "confirm")  # fmt: skip
    record_conformance(one, out.plan.spec.site)
    out.jobs += one.run.submitted
    return one


#: --confirm looks at its first runs before the rest (a futility stop, verdict.cannot_confirm)
CONFIRM_LOOK = 3


def _confirm(site: Any, req: Request, states: dict[str, str], slow: list[str], partner: str,
             figures: list[FigureVerdict], results: Any, verbose: bool,
             out: Outcome) -> None:  # fmt: skip
    """Re-run the checks behind the SLOW figures on the SLOW nodes and ``partner``, at least
    MIN_RUNS runs, interleaved; after the first CONFIRM_LOOK runs, stop when no SLOW node can
    come out SLOW any more (they stay unnamed: a stop never names or drains a node)."""
    runs = max(req.repeat, MIN_RUNS)
    names = suspect_names(figures, slow)
    look = min(CONFIRM_LOOK, runs)
    sessions = [_confirm_pass(out, req, [*slow, partner], look, results, names)]
    cobs = observe([p for s in sessions for p in s.parsed], site.name)
    futile = cannot_confirm(slow, cobs, partner, req.threshold, runs)
    if runs > look and len(futile) < len(slow):
        sessions.append(_confirm_pass(out, req, [*slow, partner], runs - look, results, names))
        cobs = observe([p for s in sessions for p in s.parsed], site.name)
    elif runs > look:
        out.notes.append(
            f"--confirm stopped after {look} of {runs} runs: {', '.join(futile)} cannot come "
            f"out SLOW against {partner} any more (fewer than {min_beyond(runs)} of {runs} "
            "runs could lie beyond the limit)"
        )
    out.verdicts = confirm(out.verdicts, cobs, partner, req.threshold)
    out.partner = partner
    out.confirm_runs = runs if len(sessions) > 1 else look
    out.reports += [p for s in sessions for p in s.report_paths]


def judge_reports(paths: Sequence[str], site: Any, req: Request,
                  states: dict[str, str] | None = None) -> Outcome:  # fmt: skip
    """The verdict over ReFrame report files already written (no run): every node they name,
    or those of ``req.nodelist`` (a node named there without a result FAILs). ``site``: a
    Site or its name; ``states``: the partition's nodes when known (what may be drained)."""
    name = site if isinstance(site, str) else site.name
    for p in paths:
        if not isinstance(p, str) or not p:
            raise TopobindError(f"--reports {p!r}: give ReFrame --report-file JSON files")
    obs = observe(reframe_report.read_reports(paths), name)
    notes = _conformance_of_reports(paths, name, obs)
    if req.nodelist is not None:
        nodes = hostlist.expand(req.nodelist) if req.nodelist.strip() else []
        if not nodes:
            raise TopobindError(f"--nodelist {req.nodelist!r} names no node")
    else:
        nodes = sorted(obs.ran_on, key=_natural)
    site_problems.split(obs, nodes)
    # the smoke tier measures no performance: its reports' figures are not compared either
    figures = [] if _smoke_reports(paths) else figure_verdicts(obs.samples, req.threshold)
    # a report is no live run: a node it does not hold was not tested, never unreachable
    verdicts = with_causes(node_verdicts(nodes, obs, figures, live=False), obs, req.threshold)
    return Outcome(nodes, verdicts, figures, obs, list(paths), first=verdicts, notes=notes,
                   partition=req.partition, partition_nodes=states,
                   nodelist=None if req.nodelist is None else nodes)  # fmt: skip


def _smoke_reports(paths: Sequence[str]) -> bool:
    """Every report is of a --tags smoke session (its -S: topobind.validation.node_jobs)."""
    from pathlib import Path

    from topobind.validation import node_jobs, progress

    tiers = [(progress.report_selection(Path(p), node_jobs.SMOKE_VARS) or ("",))[0]
             for p in paths]  # fmt: skip
    return bool(tiers) and all(t == "smoke" for t in tiers)


# --------------------------------------------------------------------------- conformance record
#: the record of the conformance step kept beside a run's ReFrame report (which does not hold
#: it): REPORT.conformance.json, so that --reports judges the nodes on it too
CONFORMANCE_FORMAT = "topobind.conformance/1"
MAX_CONFORMANCE_BYTES = 16 * 2**20


def conformance_path(report: str | Any) -> Any:
    from pathlib import Path

    path = Path(report)
    return path.with_name(path.stem + ".conformance.json")


def write_conformance(report: Any, site: str, checked: Sequence[str],
                      findings: dict[str, list[str]], notes: Sequence[str]) -> str:  # fmt: skip
    """Write the conformance step's verdicts beside ``report`` (atomically)."""
    import json

    from topobind.fsutil import atomic_write_text

    doc = {"format": CONFORMANCE_FORMAT, "site": site, "checked": list(checked),
           "findings": {n: list(f) for n, f in findings.items()}, "notes": list(notes)}  # fmt: skip
    return atomic_write_text(conformance_path(report), json.dumps(doc, indent=1) + "\n")


def read_conformance(path: Any, site: str) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """(nodes checked, {node: findings}, notes) of a conformance record; ReportError naming
    the file and the field."""
    import json

    from topobind.inputs import InputFile

    kind = InputFile("conformance record", MAX_CONFORMANCE_BYTES,
                     "remove it, or run --each-node again", reframe_report.ReportError)  # fmt: skip
    try:
        doc = json.loads(kind.read_text(path))
    except (ValueError, RecursionError):
        raise reframe_report.ReportError(f"{path}: not JSON; remove it, or run --each-node "
                                         "again") from None  # fmt: skip

    def texts(value: object, field: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise reframe_report.ReportError(f"{path}: {field}: must be a list of strings")
        return value

    if not isinstance(doc, dict) or doc.get("format") != CONFORMANCE_FORMAT:
        raise reframe_report.ReportError(f"{path}: format: not {CONFORMANCE_FORMAT}")
    if doc.get("site") != site:
        raise reframe_report.ReportError(f"{path}: site: {str(doc.get('site'))[:40]!r}, not "
                                         f"{site!r}")  # fmt: skip
    checked = texts(doc.get("checked"), "checked")
    raw = doc.get("findings")
    if not isinstance(raw, dict):
        raise reframe_report.ReportError(f"{path}: findings: must be an object")
    findings = {str(n): texts(f, f"findings[{n!r}]") for n, f in raw.items()}
    return checked, findings, texts(doc.get("notes", []), "notes")


def record_conformance(one: Any, site: str) -> None:
    """Write each node's conformance record beside its report (one job a node: the job's
    ``topobind site check --live``), so that --reports judges the node on it too."""
    for job in one.run.jobs:
        if not job.fault and job.report.exists():
            checked = [] if job.notes else [job.node]  # a note: the step did not judge it
            write_conformance(job.report, site, checked, {job.node: job.findings} if
                              job.findings else {}, job.notes)  # fmt: skip


def _conformance_of_reports(paths: Sequence[str], site: str, obs: Observations) -> list[str]:
    """Add the conformance failures recorded beside the reports to ``obs``; notes saying
    which reports have no record (their nodes are judged on the ReFrame figures only)."""
    notes: list[str] = []
    missing: list[str] = []
    for p in paths:
        record = conformance_path(p)
        if not record.exists():
            missing.append(p)
            continue
        checked, findings, more = read_conformance(record, site)
        # one record a node (one job a node): a note every node's record repeats with its own
        # name and counts is said once
        seen = {re.sub(r"\d+", "N", n) for n in notes}
        notes += [n for n in more if re.sub(r"\d+", "N", n) not in seen]
        for node in checked:
            for line in findings.get(node, []):
                obs.failures.append(Failure(node, "conformance", "-", line))
    if missing and len(missing) == len(paths):  # --confirm's reports have none of their own
        notes.append(f"conformance not judged: no record beside {', '.join(missing)} (its "
                     "run was made before topobind kept one, or the file was left behind); "
                     "judged on the ReFrame figures only")  # fmt: skip
    return notes


def _skip_reasons(obs: Observations, one: Any) -> None:
    """A skipped check's reason from ReFrame's status line (in the node's job output: the
    pass ``one``) where its report gives none."""
    for tc in (tc for report in one.parsed for tc in report.cases):
        why = one.skip_reasons.get(tc.hashcode[:8]) if tc.result == "skip" else None
        if why and obs.skipped.get(tc.check) in (None, "skipped"):
            obs.skipped[tc.check] = why


def outcome_lines(out: Outcome, site: str, threshold: float, what: str) -> list[str]:
    """What ``validate --each-node`` prints of an outcome before the reports line: the
    heading, the verdict table, what --confirm re-ran, and :func:`lines_after_table`."""
    lines = [f"\nsite {site}, partition {out.partition}: {len(out.nodes)} nodes x {what}; "
             f"outlier: median more than {100 * threshold:g}% worse than the fleet median"
             + (f"; confirmed against {out.partner}" if out.partner else ""),
             table(out.verdicts) + "\n"]  # fmt: skip
    if out.partner:
        flagged = [f"{v.node} {v.verdict_text()}" for v in out.first if v.status == "SLOW"]
        runs = out.confirm_runs
        early = f"; stopped early, of {MIN_RUNS}: see the note" if runs < MIN_RUNS else ""
        lines.append(f"first pass flagged: {', '.join(flagged)}; re-run with {out.partner} "
                     f"({runs} runs each, interleaved{early})")  # fmt: skip
    return lines + lines_after_table(out)


def lines_after_table(out: Outcome) -> list[str]:
    """What the command prints after the verdict table: skipped checks (with ReFrame's
    reason), the site problems (with their fix), notes, weak SLOW nodes, and why nodes were
    NOT JUDGED or not tested."""
    lines = [f"skip {check}: {why}" for check, why in sorted(out.obs.skipped.items())]
    lines += site_problems.lines(out.obs.site_problems)
    lines += [f"note: {note}" for note in out.notes]
    weak = [v.node for v in out.verdicts if v.status == "SLOW" and v.weak and not v.confirmed]
    if weak:
        lines.append(f"weak: {hostlist.shown(weak)}: too few or too noisy runs to be sure; re-run "
                     "them with --confirm (or --repeat 7)")  # fmt: skip
    return lines + unjudged_summary(out.verdicts)


def partition_states(site: Any, partition: str) -> dict[str, str] | None:
    """{node: state} of a Slurm partition of the site; None when it is no Slurm partition or
    sinfo fails (then nothing may be drained)."""
    part = site.partition(partition)
    if part.scheduler != "slurm":
        return None
    try:
        return slurm.partition_nodes(part.access)
    except TopobindError:
        return None


def _natural(name: str) -> tuple[str, int]:
    m = re.match(r"^(.*?)(\d*)$", name)
    assert m is not None
    return m.group(1), int(m.group(2) or -1)


def reports_text(paths: Sequence[str]) -> str:
    """The report files, all named up to 4; more (one a node): how many, and where."""
    import os

    if len(paths) <= 4:
        return ", ".join(paths)
    dirs = sorted({os.path.dirname(p) for p in paths})
    return f"{len(paths)} files in {', '.join(dirs)} (first {os.path.basename(paths[0])})"


def exit_status(out: Outcome, drain_status: int = 0) -> int:
    """1 with a bad node (or a drain that failed), else
    :data:`site_problems.SITE_PROBLEM_STATUS` with a site problem, else 4 with a node NOT
    JUDGED or not tested, else 0 (docs/reference/exit-status.md)."""
    from topobind.validation.verdict import NOT_JUDGED_STATUS

    if any(v.bad for v in out.verdicts) or drain_status:
        return 1
    if out.obs.site_problems:
        return site_problems.SITE_PROBLEM_STATUS
    return NOT_JUDGED_STATUS if any(v.unjudged for v in out.verdicts) else 0


def metrics_text(out: Outcome, site: str, partition: str) -> str:
    """The Prometheus text of an outcome: nodes (with their causes), figures, site problems."""
    from topobind.validation import metrics

    nodes, figures = metrics.from_each_node(out.verdicts, out.figures, out.obs.failures)
    shared = [(p.check, p.variant, len(p.nodes)) for p in out.obs.site_problems]
    return metrics.render(nodes, figures, site=site, partition=partition, site_problems=shared)


def drain_lines(out: Outcome) -> DrainPlan:
    """The drain plan of an outcome: (node, reason) of each node that may be drained (a
    confirmed bad verdict on a literal node of the partition, in --nodelist when given) and
    one line for each bad node that is not."""
    plan = drain_plan(out.verdicts, out.partition, out.partition_nodes, out.nodelist)
    return plan


def drain(plan: DrainPlan) -> list[slurm.Drained]:
    """Drain the nodes of ``plan``; what Slurm shows for each afterwards."""
    return [slurm.drain(node, reason) for node, reason in plan.commands]
