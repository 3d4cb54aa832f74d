"""Node acceptance: the same checks on every node of a partition, each node judged against
the fleet (``topobind validate --each-node``).

How the runs are placed: ONE ReFrame session with ``--distribute=all`` (one copy of every
check pinned to each node, ``-J exclude=`` keeping the nodes not asked for out) and
``--reruns N-1``. ReFrame runs the whole list once per rerun, so the runs are interleaved
(node1, node2, node3, node1, ...): a burst of load on the machine lands on all nodes alike
instead of making the node that happened to run then look slow. The partition's
``max_jobs`` (1 on the local cluster, whose nodes share 2 cores) keeps one job at a time.

The verdict, per figure (check, variant, metric) and node, after McCalpin (SC18, 7 runs per
node, 5 % below the fleet median): the node's median over its runs against the fleet median
(the median of the node medians). A node is SLOW when its median is worse than the fleet
median by more than the threshold AND a sign test says so: enough of its runs lie beyond
the limit (3 of 3, 4 of 5, 6 of 7 ...: confidence >= :data:`NAME_CONFIDENCE`). The
strength: ``strong`` with at least :data:`MIN_RUNS` runs and a confidence of at least 0.95,
``weak`` otherwise (say so; ``--confirm`` re-runs the flagged nodes next to a good one).
A node whose check failed (sanity, a conformance finding, a target missed, or no result at
all: the node died) FAILs, with the reason.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from topobind.errors import TopobindError
from topobind.kernels import stats
from topobind.kernels.stats import MIN_RUNS, STRONG_CONFIDENCE
from topobind.topo import hostlist

DEFAULT_THRESHOLD = 0.05  # McCalpin: nodes more than 5 % slower than the fleet median
NAME_CONFIDENCE = 0.80  # sign-test confidence needed before a node is called slow at all
RATE_UNITS = {"MB/s": True, "GB/s": True, "GFLOP/s": True, "ns": False, "us": False, "s": False}
_PARAM = re.compile(r" %([^ =]+)=(\S+)")


# --------------------------------------------------------------------------- reading reports
@dataclass(frozen=True, slots=True)
class Sample:
    node: str
    check: str
    variant: str
    metric: str
    value: float
    unit: str
    run: int


@dataclass(frozen=True)
class Failure:
    node: str
    check: str
    variant: str
    reason: str


@dataclass
class Observations:
    samples: list[Sample] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why
    ran_on: dict[str, set[str]] = field(default_factory=dict)  # node -> checks that ran


@functools.lru_cache(maxsize=65536)  # the same names come back in every run
def parse_name(display_name: str) -> tuple[str, str, str | None]:
    """``StreamCheck %layout=compact %.part=local:slurm %.nid=node1`` ->
    (StreamCheck, compact, node1)."""
    check = display_name.split(" %")[0].strip()
    params = dict(_PARAM.findall(display_name))
    node = params.pop(".nid", None)
    variant = ",".join(v for k, v in params.items() if not k.startswith(".")) or "-"
    return check, variant, node


def node_of(tc: dict[str, Any], node: str | None = None) -> str | None:
    if node:
        return node
    nodes = [n for n in tc.get("job_nodelist") or tc.get("nodelist") or [] if n and n != "None"]
    return nodes[0] if nodes else None


def observe(reports: Iterable[dict[str, Any]], site: str, run_offset: int = 0) -> Observations:
    """Samples and failures of ReFrame run reports (every run of every report)."""
    obs = Observations()
    run = run_offset
    for report in reports:
        for one in report.get("runs", []):
            for tc in one.get("testcases", []):
                _add(obs, tc, site, run)
            run += 1
    return obs


def _add(obs: Observations, tc: dict[str, Any], site: str, run: int) -> None:
    if tc.get("system") and tc["system"] != site:
        raise TopobindError(
            f"a ReFrame report of site {tc['system']!r} was given for site {site!r}; "
            "judge each site's nodes with its own reports"
        )
    check, variant, nid = parse_name(str(tc.get("display_name") or tc.get("name", "")))
    node = node_of(tc, nid)
    result = tc.get("result")
    if result == "skip":
        obs.skipped[check] = " ".join(str(tc.get("fail_reason") or "skipped").split())
        return
    if node is None:
        return
    obs.ran_on.setdefault(node, set()).add(check)
    if result != "pass" and tc.get("fail_phase") != "performance":
        why = " ".join(str(tc.get("fail_reason") or f"ReFrame result {result}").split())
        obs.failures.append(Failure(node, check, variant, why))
        return
    for key, vals in (tc.get("perfvalues") or {}).items():
        if not vals or vals[0] is None:
            continue
        value, ref, lower, upper, unit = vals[:5]
        metric = key.split(":")[-1]
        obs.samples.append(Sample(node, check, variant, metric, float(value), str(unit), run))
        if len(vals) > 5 and vals[5] == "fail":
            lo = "-inf" if lower is None else f"{ref * (1 + lower):.4g}"
            hi = "+inf" if upper is None else f"{ref * (1 + upper):.4g}"
            why = f"{metric} {value:.4g} {unit} outside the target {lo} .. {hi}"
            obs.failures.append(Failure(node, check, variant, why))


# --------------------------------------------------------------------------- the verdict
@dataclass(frozen=True)
class FigureVerdict:
    node: str
    check: str
    variant: str
    metric: str
    unit: str
    runs: int
    median: float
    cv: float | None
    slowdown: float  # against the fleet median (stats.slowdown: 0.05 = 5 % slower)
    confidence: float  # sign test: the node's median is beyond the limit
    slow: bool

    @property
    def weak(self) -> bool:
        return self.runs < MIN_RUNS or self.confidence < STRONG_CONFIDENCE

    @property
    def figure(self) -> str:
        return f"{self.check}.{self.variant}.{self.metric}"

    def strength(self) -> str:
        cv = "-" if self.cv is None else f"{100 * self.cv:.1f}%"
        return f"{self.runs} runs, CV {cv}, confidence {100 * self.confidence:.0f}%"


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    status: str  # ok | SLOW | FAIL
    weak: bool
    reasons: tuple[str, ...]
    worst: FigureVerdict | None
    confirmed: str = ""  # '', 'confirmed', 'not confirmed: ...'

    @property
    def bad(self) -> bool:
        return self.status != "ok"

    def verdict_text(self) -> str:
        if self.status == "SLOW":
            extra = f", {self.confirmed}" if self.confirmed else ""
            return f"SLOW ({'weak' if self.weak else 'strong'}{extra})"
        if self.confirmed:
            return f"ok ({self.confirmed})"
        return self.status


def _direction(sample: Sample) -> bool | None:
    """higher_is_better of a figure, None when it is no rate or time (%, pages: not judged)."""
    return RATE_UNITS.get(sample.unit)


def _limit(fleet: float, threshold: float, hib: bool) -> float:
    """The value a slowdown of exactly ``threshold`` gives (stats.slowdown's definition)."""
    return fleet / (1 + threshold) if hib else fleet * (1 + threshold)


def figure_verdicts(
    samples: Sequence[Sample],
    threshold: float,
    reference: dict[tuple[str, str, str], float] | None = None,
) -> list[FigureVerdict]:
    """Every (node, figure): its median against the fleet median (or ``reference``)."""
    groups: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    units: dict[tuple[str, str, str], str] = {}
    for s in samples:
        if _direction(s) is None:
            continue
        key = (s.check, s.variant, s.metric)
        groups.setdefault(key, {}).setdefault(s.node, []).append(s.value)
        units[key] = s.unit
    out: list[FigureVerdict] = []
    for key, by_node in groups.items():
        hib = RATE_UNITS[units[key]]
        medians = {n: stats.median(v) for n, v in by_node.items()}
        if reference is not None and key in reference:
            fleet = reference[key]
        elif len(medians) >= 3:
            fleet = stats.median(list(medians.values()))
        else:
            continue  # two nodes have no majority: nothing to call an outlier against
        limit = _limit(fleet, threshold, hib)
        for node, vals in by_node.items():
            beyond = sum(1 for v in vals if (v < limit if hib else v > limit))
            conf = stats.beyond_confidence(beyond, len(vals))
            slowdown = stats.slowdown(medians[node], fleet, hib)
            slow = slowdown > threshold and conf >= NAME_CONFIDENCE
            out.append(
                FigureVerdict(node, *key, units[key], len(vals), medians[node], stats.cv(vals),
                              slowdown, conf, slow)
            )  # fmt: skip
    return out


def node_verdicts(
    nodes: Sequence[str], obs: Observations, figures: Sequence[FigureVerdict]
) -> list[NodeVerdict]:
    by_node: dict[str, list[FigureVerdict]] = {}
    for f in figures:
        by_node.setdefault(f.node, []).append(f)
    out = []
    for node in nodes:
        fails = [f for f in obs.failures if f.node == node]
        mine = by_node.get(node, [])
        worst = max(mine, key=lambda f: f.slowdown) if mine else None
        slow = [f for f in mine if f.slow]
        if fails:
            texts = [f"{f.check}{'' if f.variant == '-' else ' ' + f.variant}: {f.reason}"
                     for f in fails]  # fmt: skip
            reasons = tuple(
                t if texts.count(t) == 1 else f"{t} ({texts.count(t)} runs)"
                for t in dict.fromkeys(texts)
            )
            out.append(NodeVerdict(node, "FAIL", False, reasons, worst))
        elif node not in obs.ran_on:
            why = "no check ran on it (the node died, or its jobs never started)"
            out.append(NodeVerdict(node, "FAIL", False, (why,), None))
        elif slow:
            worst = max(slow, key=lambda f: f.slowdown)
            reasons = tuple(
                f"{f.figure} {100 * f.slowdown:.0f}% slower than the fleet median ({f.strength()})"
                for f in sorted(slow, key=lambda f: -f.slowdown)
            )
            out.append(NodeVerdict(node, "SLOW", all(f.weak for f in slow), reasons, worst))
        else:
            out.append(NodeVerdict(node, "ok", False, (), worst))
    return out


def good_node(verdicts: Sequence[NodeVerdict]) -> str | None:
    """The ok node closest to the fleet median (the known-good partner of --confirm)."""
    ok = [v for v in verdicts if v.status == "ok" and v.worst is not None]
    if not ok:
        return None
    return min(ok, key=lambda v: abs(v.worst.slowdown if v.worst else 0.0)).node


def confirm(
    verdicts: Sequence[NodeVerdict], obs: Observations, partner: str, threshold: float
) -> list[NodeVerdict]:
    """Re-judge the SLOW nodes on the confirmation runs ``obs`` (the flagged nodes and the
    good ``partner``, interleaved): each against the partner's median of the same runs."""
    ref_samples = [s for s in obs.samples if s.node == partner]
    reference: dict[tuple[str, str, str], float] = {}
    for key in {(s.check, s.variant, s.metric) for s in ref_samples}:
        reference[key] = stats.median([s.value for s in ref_samples if (s.check, s.variant,
                                       s.metric) == key])  # fmt: skip
    figures = figure_verdicts(obs.samples, threshold, reference)
    out = []
    for v in verdicts:
        if v.status != "SLOW":
            out.append(v)
            continue
        again = node_verdicts([v.node], obs, [f for f in figures if f.node == v.node])[0]
        if again.status == "ok":
            worst = again.worst
            why = f"{worst.figure} {100 * worst.slowdown:+.0f}% vs {partner}" if worst else ""
            out.append(NodeVerdict(v.node, "ok", False, v.reasons, worst,
                                   f"not confirmed: {why}"))  # fmt: skip
        else:
            reasons = tuple(r.replace("the fleet median", partner) for r in again.reasons)
            out.append(NodeVerdict(v.node, again.status, again.weak, reasons, again.worst,
                                   f"confirmed against {partner}"))  # fmt: skip
    return out


def bad_nodes_line(verdicts: Sequence[NodeVerdict]) -> str:
    bad = [v.node for v in verdicts if v.bad]
    return f"bad nodes: {hostlist.compress(bad) if bad else 'none'}"


def table(verdicts: Sequence[NodeVerdict]) -> str:
    head = ("node", "verdict", "worst figure", "slower by", "strength", "reason")
    rows = [head]
    for v in verdicts:
        w = v.worst
        rows.append(
            (
                v.node,
                v.verdict_text(),
                w.figure if w else "-",
                f"{100 * w.slowdown:+.1f}%" if w else "-",
                w.strength() if w else "-",
                "; ".join(v.reasons) or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    lines = []
    for n, r in enumerate(rows):
        cells = [c.ljust(widths[i]) for i, c in enumerate(r[:-1])]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
        if n == 0:
            lines.append("  ".join(["-" * w for w in widths] + ["------"]))
    return "\n".join(lines)


# --------------------------------------------------------------------------- the nodes
def partition_nodes(access: Sequence[str]) -> dict[str, str]:
    """{node: Slurm state} of the partition the site's access options name (``-p P``)."""
    part = None
    for opt in access:
        m = re.match(r"^(?:-p\s*|--partition[= ])(\S+)$", opt.strip())
        if m:
            part = m.group(1)
    argv = ["sinfo", "-h", "-N", "-o", "%N %t"] + (["-p", part] if part else [])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TopobindError(f"{' '.join(argv)} failed ({exc}); is Slurm reachable?") from None
    if done.returncode != 0:
        raise TopobindError(f"{' '.join(argv)} failed: {done.stderr.strip()[:300]}")
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if line.split():
            name, state = (line.split() + ["?"])[:2]
            out[name] = state
    return out


def choose_nodes(states: dict[str, str], nodelist: str | None, partition: str) -> list[str]:
    """The nodes to test: those of ``nodelist`` (all must be in the partition and usable),
    else every idle node of the partition."""
    usable = ("idle", "mix", "alloc", "comp")
    if nodelist:
        wanted = hostlist.expand(nodelist)
        unknown = [n for n in wanted if n not in states]
        if unknown:
            raise TopobindError(
                f"--nodelist {nodelist}: {hostlist.compress(unknown)} not in partition "
                f"{partition} (its nodes: {hostlist.compress(states) or 'none'})"
            )
        down = [n for n in wanted if states[n].rstrip("*~#!%$@^-") not in usable]
        if down:
            raise TopobindError(
                f"--nodelist {nodelist}: "
                + ", ".join(f"{n} is {states[n]}" for n in down)
                + " (resume it with scontrol update nodename=NODE state=resume, or leave it out)"
            )
        return wanted
    idle = [n for n, s in states.items() if s.rstrip("*~#!%$@^-") == "idle"]
    if not idle:
        seen = ", ".join(f"{n} {s}" for n, s in states.items()) or "no nodes"
        raise TopobindError(
            f"partition {partition} has no idle node to test ({seen}); wait for them, or "
            "name busy ones with --nodelist"
        )
    return idle


def reframe_options(all_nodes: Iterable[str], chosen: Sequence[str], repeat: int) -> list[str]:
    """ReFrame options running every check once per chosen node, ``repeat`` times over
    (NodeCheck left out: :func:`conformance_step` checks each node once)."""
    extra = ["--distribute=all", "-x", "NodeCheck"]
    others = sorted(set(all_nodes) - set(chosen))
    if others:
        extra += ["-J", f"exclude={hostlist.compress(others)}"]
    if repeat > 1:
        extra += ["--reruns", str(repeat - 1)]
    return extra


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


def _cpus(nodes: Sequence[str]) -> int:
    """The fewest CPUs of these nodes (the conformance task sees the whole node)."""
    argv = ["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%c"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    counts = [int(x) for x in done.stdout.split() if x.isdigit()]
    return min(counts) if counts else 1


def conformance_step(site: Any, access: Sequence[str], nodes: Sequence[str]) -> tuple[
        dict[str, list[str]], list[str]]:  # fmt: skip
    """'topobind site check SITE --live' on every node at once (one srun, one task per
    node): ({node: findings}, notes). A site without node: gives a note saying what to add."""
    import os
    import shlex
    import sys
    from pathlib import Path

    exe = Path(sys.executable).parent / "topobind"
    tb = [str(exe)] if exe.exists() else [sys.executable, "-m", "topobind.cli.main"]
    argv = ["srun", *[a for opt in access for a in shlex.split(opt)], "-w", ",".join(nodes),
            "-N", str(len(nodes)), "--ntasks-per-node=1", "--exclusive", "--cpu-bind=none",
            f"--cpus-per-task={_cpus(nodes)}", "--label",
            *tb, "site", "check", site.name, "--live"]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=os.environ)
    except subprocess.TimeoutExpired:
        return {}, [f"conformance: {shlex.join(argv)} did not finish within 600 s"]
    found: dict[str, list[str]] = {}
    notes: list[str] = []
    for line in (done.stdout + done.stderr).splitlines():
        task, _, text = line.partition(": ")  # srun --label: 'TASK: text'
        if not task.strip().isdigit():
            continue
        text = text.removeprefix("topobind: error: ")
        node, _, finding = text.partition(": ")  # each finding starts with its node's name
        if node in nodes and ": expected " in finding:
            found.setdefault(node, []).append(finding.rsplit(" (", 1)[0])
        elif "no node: section" in text and not notes:
            what = text.split(" e.g.")[0]
            notes.append(f"conformance not checked: {what}: e.g. node: {{packages: 2, "
                         "numa_nodes: 8, l3_domains: 32, cores: 128, smt: 2}")  # fmt: skip
    if done.returncode != 0 and not found and not notes:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        notes.append(f"conformance: srun exited with {done.returncode}: {tail}")
    return found, notes


def _session(site: Any, req: Request, states: dict[str, str], nodes: Sequence[str],
             repeat: int, results: Any, verbose: bool, label: str) -> Any:  # fmt: skip
    from topobind.checks import validation

    session = validation.run_reframe(
        site, req.partition, req.tags, req.names, req.setvars, "serial", results, verbose,
        extra=reframe_options(states, nodes, repeat), label=label,
    )  # fmt: skip
    if session.report is None:
        tail = session.log_path.read_text(errors="replace").strip().splitlines()[-3:]
        raise TopobindError(
            f"ReFrame wrote no report (exit {session.returncode}); its log "
            f"{session.log_path} ends with: " + " | ".join(tail)
        )
    return session


def accept(site: Any, req: Request, results: Any, verbose: bool) -> Outcome:
    """Run the checks on every chosen node, judge them, and with ``confirm`` re-run the SLOW
    ones next to a good node before naming them."""
    if req.repeat < 1 or req.repeat > 1000:
        raise TopobindError(f"--repeat {req.repeat}: give 1 to 1000 runs per node (7 or more "
                            "for a strong verdict)")  # fmt: skip
    part = site.partition(req.partition)
    if part.scheduler != "slurm":
        raise TopobindError(
            f"--each-node needs a Slurm partition; {site.name}:{req.partition} is "
            f"{part.scheduler} (one machine: plain topobind validate)"
        )
    states = partition_nodes(part.access)
    nodes = choose_nodes(states, req.nodelist, req.partition)
    findings, notes = conformance_step(site, part.access, nodes)
    session = _session(site, req, states, nodes, req.repeat, results, verbose, "each-node")
    obs = observe([session.report], site.name)
    for node, lines in findings.items():
        obs.failures += [Failure(node, "conformance", "-", line) for line in lines]
    figures = figure_verdicts(obs.samples, req.threshold)
    verdicts = node_verdicts(nodes, obs, figures)
    out = Outcome(nodes, verdicts, figures, obs, [str(session.report_path)], notes=notes)
    out.first = verdicts
    if len(nodes) < 3:
        out.notes.append(f"{len(nodes)} node(s): outliers need at least 3 to compare")
    slow = [v.node for v in verdicts if v.status == "SLOW"]
    if req.confirm and slow:
        partner = good_node(verdicts)
        if partner is None:
            out.notes.append("--confirm: no good node to compare with; the SLOW stay unconfirmed")
            return out
        runs = max(req.repeat, MIN_RUNS)
        again = _session(site, req, states, [*slow, partner], runs, results, verbose, "confirm")
        cobs = observe([again.report], site.name)
        out.verdicts = confirm(verdicts, cobs, partner, req.threshold)
        out.partner = partner
        out.reports.append(str(again.report_path))
    return out


def judge_reports(paths: Sequence[str], site: str, req: Request) -> Outcome:
    """The verdict over ReFrame report files already written (no run): every node they name,
    or those of ``req.nodelist`` (a node named there without a result FAILs)."""
    import json
    from pathlib import Path

    reports = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise TopobindError(f"--reports {p}: no such file (give ReFrame --report-file JSON)")
        try:
            reports.append(json.loads(path.read_text()))
        except (ValueError, UnicodeDecodeError) as exc:
            raise TopobindError(f"--reports {p}: not a ReFrame JSON report ({exc})") from None
        if not isinstance(reports[-1], dict) or "runs" not in reports[-1]:
            raise TopobindError(f"--reports {p}: not a ReFrame JSON report (no 'runs')")
    obs = observe(reports, site)
    nodes = hostlist.expand(req.nodelist) if req.nodelist else sorted(obs.ran_on, key=_natural)
    figures = figure_verdicts(obs.samples, req.threshold)
    verdicts = node_verdicts(nodes, obs, figures)
    return Outcome(nodes, verdicts, figures, obs, list(paths), first=verdicts)


def _natural(name: str) -> tuple[str, int]:
    m = re.match(r"^(.*?)(\d*)$", name)
    assert m is not None
    return m.group(1), int(m.group(2) or -1)


def drain_lines(verdicts: Sequence[NodeVerdict]) -> list[tuple[str, list[str]]]:
    """(node, scontrol command) for every bad node, its first reason as the drain reason."""
    from topobind.checks import conformance

    out = []
    for v in verdicts:
        if v.bad:
            reason = f"{v.status.lower()}: {v.reasons[0] if v.reasons else ''}"
            out.append((v.node, conformance.drain_command(v.node, reason)))
    return out
