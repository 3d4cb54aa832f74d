"""The node verdict of ``topobind validate --each-node`` (and ``--reports``): pure, no Slurm.

The figures come from ReFrame's run reports through their one reader
(:mod:`topobind.validation.reframe_report`): one :class:`Sample` per figure, test case and run,
one :class:`Failure` per failed test case, the node each ran on.

The verdict, per figure (check, variant, metric) and node, after McCalpin (SC18, 7 runs per
node, 5 % below the fleet median): the node's median over its runs against the fleet median
(the median of the node medians). A node is SLOW when its median is worse than the fleet
median by more than the threshold AND a sign test says so: enough of its runs lie beyond
the limit (3 of 3, 4 of 5, 6 of 7 ...: confidence >= :data:`NAME_CONFIDENCE`). The
strength: ``strong`` with at least :data:`MIN_RUNS` runs and a confidence of at least 0.95,
``weak`` otherwise (say so; ``--confirm`` re-runs the flagged nodes next to a good one).
A node whose check failed (sanity, a conformance finding, a target missed, or, in a live
run, no result at all from the node its jobs were submitted to) FAILs, with the reason.

Too little evidence is said plainly, never called ok: a figure measured on fewer than
:data:`MIN_NODES` nodes (no majority to call an outlier against) or in fewer than
:data:`MIN_JUDGE_RUNS` runs (no sign test can name a node SLOW: 2 of 2 runs beyond the limit
is a confidence of 0.75) is NOT JUDGED, and so is a node with such a figure and nothing bad;
a node that the evidence does not hold at all (a --nodelist node absent from the reports) is
``not tested``. Neither is bad, neither is drained; both are named after ``bad nodes:``.
In a live run of one job a node (:mod:`topobind.validation.bundles`) a node whose job never
started is NOT STARTED (not tested: never bad, never drained) and one whose job died, ran
past its bound or left no report is UNREACHABLE (bad, and drained like a FAIL).

Which bad nodes may be drained (:func:`drain_plan`): a node named literally, in the
partition (and in ``--nodelist`` when given), judged here, and bad on a confirmed verdict (a
FAIL, a strong SLOW, or a SLOW confirmed by ``--confirm``); every other one gets a line
saying why it is not drained.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topobind.errors import TopobindError
from topobind.measure import stats
from topobind.measure.stats import MIN_RUNS, STRONG_CONFIDENCE
from topobind.topo import hostlist
from topobind.validation.reframe_report import (
    NODE_NAME,
    RATE_UNITS,
    Report,
    ReportError,
    report_from_document,
)

DEFAULT_THRESHOLD = 0.05  # McCalpin: nodes more than 5 % slower than the fleet median
NAME_CONFIDENCE = stats.NAME_CONFIDENCE  # sign-test confidence before a node is called slow
MAX_THRESHOLD = 10.0  # a node 10x slower than the fleet: anything larger is a typo
MAX_REPEAT = 1000  # the most runs (--repeat) or retries a validate or calibrate takes
#: the exit status of an --each-node verdict with no bad node and a node NOT JUDGED (too few
#: nodes or runs) or not tested (not in the reports): not a pass (0), not a bad node (1)
NOT_JUDGED_STATUS = 4
MIN_NODES = 3  # a fleet median with a majority: two nodes cannot say which one is off
MIN_JUDGE_RUNS = 3  # the fewest runs a sign test can name a node SLOW with (3 of 3: 0.875)

#: the node states that are neither ok nor bad (NodeVerdict.status)
NOT_JUDGED = "NOT JUDGED"
NOT_TESTED = "not tested"
#: a live run's node whose job never started (topobind.validation.bundles: nothing was judged,
#: never drained) and one whose job died or gave no report (bad: a confirmed FAIL)
NOT_STARTED = "NOT STARTED"
UNREACHABLE = "UNREACHABLE"
#: why a node whose failures were the site's is NOT JUDGED (validation.site_problems)
SITE_NOT_JUDGED = "failed on most nodes alike, a site problem (see 'site problem' below)"


def check_threshold(value: float, option: str = "--threshold") -> float:
    """A threshold as a fraction: 0 < F < 10 (0.05 for 5 %); TopobindError otherwise."""
    if not 0 < value < MAX_THRESHOLD:  # NaN fails this too
        raise TopobindError(f"{option} {value:g}: give a fraction above 0 and below "
                            f"{MAX_THRESHOLD:g}, e.g. 0.05 for 5 %")  # fmt: skip
    return value


def threshold_for(given: float | None, settings: Mapping[str, Any], where: str,
                  each_node: bool = False) -> float:  # fmt: skip
    """The outlier threshold: ``given`` (--threshold), else the site's
    settings.outlier_threshold (``where``: the site file; under ``each_node`` its
    each_node.outlier_threshold first, as every each_node. setting replaces its plain one),
    else :data:`DEFAULT_THRESHOLD`."""
    if given is not None:
        return check_threshold(given)
    key = "outlier_threshold"
    if each_node and f"each_node.{key}" in settings:
        key = f"each_node.{key}"
    return threshold_setting(settings.get(key, DEFAULT_THRESHOLD), f"{where}: settings.{key}")


def threshold_setting(raw: object, what: str) -> float:
    """A site's outlier_threshold (a YAML number, or text of ASCII digits): 0 < F < 10."""
    from topobind.inputs import real_number

    if isinstance(raw, bool):
        raw = str(raw)
    if isinstance(raw, int | float):
        value = float(raw)
    else:
        value = real_number(str(raw), what, 0.0, MAX_THRESHOLD, example="0.05 for 5 %")
    return check_threshold(value, what)


# --------------------------------------------------------------------------- observations
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
    skipped_on: dict[str, set[str]] = field(default_factory=dict)  # node -> checks skipped
    #: failures every (or most) judged node shares: the site's (validation.site_problems),
    #: taken out of ``failures``; node -> the checks it failed with the site
    site_failed: dict[str, set[str]] = field(default_factory=dict)
    site_problems: list[Any] = field(default_factory=list)  # site_problems.SiteProblem
    #: the evidence of every run (measure.causes.signals_of): (check, variant) -> node -> one
    #: signals mapping a run ({} : none), and why a node's run had none
    evidence: dict[tuple[str, str], dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    no_evidence: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: the matrices of every run (the checks' tb_matrices, measure.where): (check, variant) ->
    #: node -> one {name: Matrix} a run that carried any
    matrices: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = field(default_factory=dict)


def observe(reports: Iterable[Report | dict[str, Any]], site: str) -> Observations:
    """Samples and failures of ReFrame run reports (every run of every report); a decoded
    document is read by :func:`reframe_report.report_from_document` first."""
    obs = Observations()
    offset = 0
    for report in reports:
        if not isinstance(report, Report):
            report = report_from_document(report, "<report>", offset)
        offset = max([offset, *(tc.run + 1 for tc in report.cases)])
        for tc in report.cases:
            _add(obs, tc, site, report.source)
    return obs


def _add(obs: Observations, tc: Any, site: str, source: str) -> None:
    if tc.system and tc.system != site:
        raise TopobindError(
            f"{source}: a ReFrame report of site {tc.system!r} was given for site {site!r}; "
            "judge each site's nodes with its own reports"
        )
    if tc.result == "skip":
        obs.skipped[tc.check] = tc.fail_reason or "skipped"
        for node in tc.nodes:
            obs.skipped_on.setdefault(node, set()).add(tc.check)
        return
    if not tc.nodes:
        return
    if len(tc.nodes) > 1:
        raise ReportError(f"{source}: {tc.check} run {tc.run} ran on {len(tc.nodes)} nodes "
                          f"({tc.node}): a node's verdict needs one node per test case "
                          "(ReFrame --distribute)")  # fmt: skip
    node = tc.nodes[0]
    obs.ran_on.setdefault(node, set()).add(tc.check)
    _add_evidence(obs, tc, node)
    _add_matrices(obs, tc, node)
    if tc.failed_before_performance:
        why = tc.fail_reason or f"ReFrame result {tc.result}"
        obs.failures.append(Failure(node, tc.check, tc.variant, why))
        return
    for f in tc.figures:
        obs.samples.append(Sample(node, tc.check, tc.variant, f.metric, f.value, f.unit, tc.run))
        if f.result == "fail":
            lo, hi = f.limits()
            lo_text = "-inf" if lo is None else f"{lo:.4g}"
            hi_text = "+inf" if hi is None else f"{hi:.4g}"
            why = f"{f.metric} {f.value:.4g} {f.unit} outside the target {lo_text} .. {hi_text}"
            obs.failures.append(Failure(node, tc.check, tc.variant, why))


def _add_evidence(obs: Observations, tc: Any, node: str) -> None:
    from topobind.measure.causes import signals_of

    if tc.evidence is None:
        signals, why = {}, "the report holds none of this run (no tb_evidence)"
    else:
        signals, why = signals_of({"evidence": tc.evidence})
    obs.evidence.setdefault((tc.check, tc.variant), {}).setdefault(node, []).append(signals)
    if why:
        obs.no_evidence[(node, tc.check, tc.variant)] = why


def _add_matrices(obs: Observations, tc: Any, node: str) -> None:
    from topobind.measure.results import ResultError, read_matrices

    raw = tc.where.get("matrices") if isinstance(tc.where, dict) else None
    try:
        got = read_matrices(raw) if isinstance(raw, dict) else {}
    except (ResultError, ValueError, TypeError, OverflowError):
        got = {}  # a report's matrices are untrusted: a malformed one says nothing
    if got:
        obs.matrices.setdefault((tc.check, tc.variant), {}).setdefault(node, []).append(got)


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
    beyond: int = 0  # runs beyond the limit (the sign test's count)
    not_judged: str = ""  # why the figure is NOT JUDGED ('' : judged)

    @property
    def weak(self) -> bool:
        return self.runs < MIN_RUNS or self.confidence < STRONG_CONFIDENCE

    @property
    def figure(self) -> str:
        return f"{self.check}.{self.variant}.{self.metric}"

    def strength(self) -> str:
        cv = "-" if self.cv is None else f"{100 * self.cv:.1f}%"
        if self.not_judged:
            return f"{self.runs} runs, CV {cv}, not judged"
        return f"{self.runs} runs, CV {cv}, confidence {100 * self.confidence:.0f}%"


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    status: str  # ok | SLOW | FAIL | UNREACHABLE | NOT_JUDGED | NOT_TESTED | NOT_STARTED
    weak: bool
    reasons: tuple[str, ...]
    worst: FigureVerdict | None
    confirmed: str = ""  # '', 'confirmed', 'not confirmed: ...'
    #: why (measure.causes): 'throttled (...)', 'unexplained: ...', 'unknown (no evidence:
    #: ...)'; a job's Slurm-side reason for NOT STARTED and UNREACHABLE; '' for the others
    cause: str = ""
    cause_labels: tuple[str, ...] = ()  # the metrics' cause labels, ranked

    @property
    def bad(self) -> bool:
        return self.status in ("SLOW", "FAIL", UNREACHABLE)

    @property
    def unjudged(self) -> bool:
        """NOT JUDGED, not tested, or NOT STARTED (its job never ran): no verdict either way."""
        return self.status in (NOT_JUDGED, NOT_TESTED, NOT_STARTED)

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
        few_nodes = ""
        fleet = reference.get(key) if reference is not None else None
        if fleet is None and len(by_node) < MIN_NODES:  # two nodes have no majority
            few_nodes = (f"not judged: {len(by_node)} node(s) measured it; an outlier "
                         f"needs at least {MIN_NODES} to compare")  # fmt: skip
        # the one noise rule (stats.outliers), once a figure, not once a node (each is a pass
        # over every node: 5,000 nodes made it 25 million CVs a figure)
        judged = stats.outliers(by_node, threshold, RATE_UNITS[units[key]], fleet)
        for node, vals in by_node.items():
            o = judged[node]
            why = few_nodes or (
                f"not judged: {len(vals)} run(s); a SLOW verdict needs at least "
                f"{MIN_JUDGE_RUNS} (--repeat {MIN_JUDGE_RUNS}, 7 for a strong one)"
                if len(vals) < MIN_JUDGE_RUNS else "")  # fmt: skip
            out.append(
                FigureVerdict(node, *key, units[key], len(vals), o.median, stats.cv(vals),
                              o.slowdown, o.confidence, o.outside and not why, o.beyond, why)
            )  # fmt: skip
    return out


#: the figure's noise floor: the one rule lives in measure/stats.py (causes use it too)
noise_floor = stats.noise_floor


def node_verdicts(
    nodes: Sequence[str], obs: Observations, figures: Sequence[FigureVerdict], live: bool = True
) -> list[NodeVerdict]:
    """One verdict per node of ``nodes``. ``live``: the checks were submitted to every one of
    ``nodes`` in this run, so a node that gave nothing back FAILs as unreachable; otherwise
    (judging reports) a node the reports do not hold is NOT_TESTED, never bad."""
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
        elif node not in obs.ran_on and node in obs.skipped_on:  # reached, nothing measured
            checks = ", ".join(sorted(obs.skipped_on[node]))
            why = f"not tested: every check was skipped on it ({checks}: see 'skip' below)"
            out.append(NodeVerdict(node, NOT_TESTED, False, (why,), None))
        elif node not in obs.ran_on and live:
            why = ("unreachable: its jobs were submitted to it and no result came back (the "
                   "node died, or its jobs never started)")  # fmt: skip
            out.append(NodeVerdict(node, "FAIL", False, (why,), None))
        elif node not in obs.ran_on:
            why = "not tested: the reports hold no result of it"
            out.append(NodeVerdict(node, NOT_TESTED, False, (why,), None))
        elif slow:
            worst = max(slow, key=lambda f: f.slowdown)
            reasons = tuple(
                f"{f.figure} {100 * f.slowdown:.0f}% slower than the fleet median ({f.strength()})"
                for f in sorted(slow, key=lambda f: -f.slowdown)
            )
            out.append(NodeVerdict(node, "SLOW", all(f.weak for f in slow), reasons, worst))
        elif node in obs.site_failed:  # not judged on the checks every node failed alike
            checks = ", ".join(sorted(obs.site_failed[node]))
            why = f"{checks}: not judged: {SITE_NOT_JUDGED}"
            out.append(NodeVerdict(node, NOT_JUDGED, True,
                                   (why, *_not_judged_reasons(mine)), worst))  # fmt: skip
        elif any(f.not_judged for f in mine):
            out.append(NodeVerdict(node, NOT_JUDGED, True, _not_judged_reasons(mine), worst))
        else:
            out.append(NodeVerdict(node, "ok", False, (), worst))
    return out


def _not_judged_reasons(figures: Sequence[FigureVerdict]) -> tuple[str, ...]:
    """'CHECK.VARIANT (metric, metric): not judged: WHY', once per check, variant and why."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for f in figures:
        if f.not_judged:
            groups.setdefault((f.check, f.variant, f.not_judged), []).append(f.metric)
    return tuple(f"{c}.{v} ({', '.join(ms)}): {why}" for (c, v, why), ms in groups.items())


def good_node(verdicts: Sequence[NodeVerdict]) -> str | None:
    """The ok node closest to the fleet median (the known-good partner of --confirm)."""
    ok = [v for v in verdicts if v.status == "ok" and v.worst is not None]
    if not ok:
        return None
    return min(ok, key=lambda v: abs(v.worst.slowdown if v.worst else 0.0)).node


def _partner_reference(obs: Observations, partner: str) -> dict[tuple[str, str, str], float]:
    """The partner's median of each figure over the confirmation runs."""
    ref_samples = [s for s in obs.samples if s.node == partner]
    reference: dict[tuple[str, str, str], float] = {}
    for key in {(s.check, s.variant, s.metric) for s in ref_samples}:
        reference[key] = stats.median([s.value for s in ref_samples if (s.check, s.variant,
                                       s.metric) == key])  # fmt: skip
    return reference


def min_beyond(runs: int) -> int:
    """The fewest of ``runs`` runs beyond the limit that can name a node SLOW (sign-test
    confidence at least :data:`NAME_CONFIDENCE`): 3 of 3, 4 of 4, 6 of 7."""
    return next(k for k in range(runs + 1)
                if k and stats.beyond_confidence(k, runs) >= NAME_CONFIDENCE)  # fmt: skip


def cannot_confirm(nodes: Sequence[str], obs: Observations, partner: str, threshold: float,
                   runs: int) -> list[str]:  # fmt: skip
    """The ``nodes`` that the confirmation cannot name SLOW whatever its remaining runs give:
    after the runs in ``obs`` (fewer than ``runs``), every figure of the node has so many runs
    short of the limit (against ``partner``'s median so far) that even all the remaining runs
    beyond it would not reach :func:`min_beyond` of ``runs`` (a futility stop: it never names
    or drains a node, it only stops re-running one that will come out ok). A node with a
    failed check or no figure is never among them."""
    figures = figure_verdicts(obs.samples, threshold, _partner_reference(obs, partner))
    need = min_beyond(runs)
    out = []
    for node in nodes:
        mine = [f for f in figures if f.node == node]
        if not mine or any(f.node == node for f in obs.failures):
            continue
        if all(f.beyond + (runs - f.runs) < need for f in mine):
            out.append(node)
    return out


def confirm(
    verdicts: Sequence[NodeVerdict], obs: Observations, partner: str, threshold: float
) -> list[NodeVerdict]:
    """Re-judge the SLOW nodes on the confirmation runs ``obs`` (the flagged nodes and the
    good ``partner``, interleaved): each against the partner's median of the same runs."""
    figures = figure_verdicts(obs.samples, threshold, _partner_reference(obs, partner))
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
            continue  # a cause is the first pass's (the fleet's evidence), kept below
        else:
            reasons = tuple(r.replace("the fleet median", partner) for r in again.reasons)
            out.append(NodeVerdict(v.node, again.status, again.weak, reasons, again.worst,
                                   f"confirmed against {partner}", v.cause,
                                   v.cause_labels))  # fmt: skip
    return out


def bad_nodes_line(verdicts: Sequence[NodeVerdict], site: Sequence[Any] = ()) -> str:
    """'bad nodes: ...' naming the nodes bad on a confirmed verdict (:func:`confirmed_bad`);
    a weak SLOW that no --confirm confirmed is not named there but after it, as unconfirmed;
    the ``site`` problems (validation.site_problems) after it, by check."""
    bad = [v.node for v in verdicts if v.bad and confirmed_bad(v)]
    line = f"bad nodes: {hostlist.shown(bad) if bad else 'none'}"
    if site:
        line += "; site problem (drains nothing): " + ", ".join(dict.fromkeys(p.what for p in site))
    weak = [v.node for v in verdicts if v.status == "SLOW" and not confirmed_bad(v)]
    if weak:
        line += f"; unconfirmed (weak SLOW, --confirm them): {hostlist.shown(weak)}"
    for state in (NOT_JUDGED, NOT_TESTED):
        these = [v.node for v in verdicts if v.status == state]
        if these:
            line += f"; {state}: {hostlist.shown(these)}"
    late = [v.node for v in verdicts if v.status == NOT_STARTED]  # its job never started
    if late:
        line += f"; not tested (their jobs never started): {hostlist.shown(late)}"
    return line


def unjudged_summary(verdicts: Sequence[NodeVerdict]) -> list[str]:
    """One line per distinct reason a node was NOT JUDGED or not tested (the reason the
    exit status is not 0 without a bad node)."""
    lines: dict[str, list[str]] = {}
    for v in verdicts:
        if v.unjudged:
            for r in v.reasons:  # 'FIGURE: not judged: WHY' or 'not tested: WHY'
                text = f"{NOT_JUDGED}: {r.split(': not judged: ', 1)[-1]}" if (
                    v.status == NOT_JUDGED) else f"{NOT_STARTED}: {r}" if (
                    v.status == NOT_STARTED) else r  # fmt: skip
                if v.node not in lines.setdefault(text, []):
                    lines[text].append(v.node)
    return [f"{k} ({hostlist.shown(n)})" for k, n in lines.items()]


def with_causes(verdicts: Sequence[NodeVerdict], obs: Observations,
                threshold: float) -> list[NodeVerdict]:  # fmt: skip
    """Each SLOW and FAIL verdict with its cause (measure.causes.explain on the evidence of
    its worst figure's check, or its first failed check, against the fleet's); NOT STARTED
    and UNREACHABLE keep their Slurm-side reason as their cause."""
    from dataclasses import replace

    from topobind.measure import causes

    out = []
    for v in verdicts:
        if v.status in (NOT_STARTED, UNREACHABLE):
            out.append(replace(v, cause=v.reasons[0] if v.reasons else "", cause_labels=(
                "slurm",)))  # fmt: skip
            continue
        key = _cause_key(v, obs)
        if key is None:
            out.append(v)
            continue
        why = obs.no_evidence.get((v.node, *key), "")
        got = causes.explain(v.node, obs.evidence.get(key, {}), threshold, why)
        labels = tuple(c.name for c in got.causes) or (got.label,)
        where = where_of(v.node, obs)
        out.append(replace(v, cause=f"{got.text}; {where}" if where else got.text,
                           cause_labels=labels))  # fmt: skip
    return out


def where_of(node: str, obs: Observations) -> str:
    """'where: NUMA node 5: read bandwidth 21 GB/s, its peers 41: ...' from the node's
    matrices in any check's runs (measure.where: against the other nodes' same matrices, else
    within the node), '' when none is apart or the node's runs carried none."""
    from topobind.measure import where

    found = []
    for by_node in obs.matrices.values():
        mine = _runs_median(by_node.get(node, []))
        fleet: dict[str, list[Any]] = {}
        for other, runs in by_node.items():
            if other != node:
                for name, m in _runs_median(runs).items():
                    fleet.setdefault(name, []).append(m)
        text = where.where_text(mine, fleet)
        if text:
            found.append(text.removeprefix("where: "))
    return "where: " + "; ".join(found) if found else ""


def _runs_median(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One matrix a name of a node's runs: the element-wise median of its runs (one run: its)."""
    from topobind.measure.where import fleet_reference

    out = {}
    for name in {n for r in runs for n in r}:
        ms = [r[name] for r in runs if name in r]
        out[name] = (fleet_reference(ms) if len(ms) > 1 else None) or ms[0]
    return out


def _cause_key(v: NodeVerdict, obs: Observations) -> tuple[str, str] | None:
    """(check, variant) whose evidence explains ``v``: its worst SLOW figure's, or its first
    failed check's; None for a verdict that needs no cause."""
    if v.status == "SLOW" and v.worst is not None:
        return v.worst.check, v.worst.variant
    if v.status == "FAIL":  # a conformance finding is its own cause: no check's evidence
        first = next((f for f in obs.failures if f.node == v.node
                      and f.check != "conformance"), None)  # fmt: skip
        if first is not None and (first.check, first.variant) in obs.evidence:
            return first.check, first.variant
    return None


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
        elif verdicts[n - 1].cause and verdicts[n - 1].status in ("SLOW", "FAIL"):
            lines.append(f"{'':{widths[0]}}  cause: {verdicts[n - 1].cause}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- draining
@dataclass(frozen=True)
class DrainPlan:
    commands: list[tuple[str, str]]  # (node, drain reason) of every node that may be drained
    refused: list[str]  # one line per bad node not drained, saying why


def drain_reason(v: NodeVerdict) -> str:
    """What scontrol records: 'slow: FIGURE +324%: CAUSE' for a SLOW node with a cause
    (slurm.drain_command keeps it to one line of 200 characters, passed as one argument),
    else the verdict and its first reason (a FAIL's cause after it)."""
    if v.status == "SLOW" and v.worst is not None and v.cause:
        return f"slow: {v.worst.figure} {100 * v.worst.slowdown:+.0f}%: {v.cause}"
    text = f"{v.status.lower()}: {v.reasons[0] if v.reasons else ''}"
    if v.status == "FAIL" and v.cause and not v.cause.startswith("unknown"):
        text += f"; cause: {v.cause}"
    return text


def confirmed_bad(v: NodeVerdict) -> bool:
    """Bad on a verdict that may drain: FAIL, a strong SLOW, a SLOW --confirm confirmed."""
    if v.status in ("FAIL", UNREACHABLE):  # UNREACHABLE: its node died in the run
        return True
    return v.status == "SLOW" and (not v.weak or v.confirmed.startswith("confirmed"))


def drain_plan(
    verdicts: Sequence[NodeVerdict],
    partition: str,
    partition_nodes: Collection[str] | None,
    nodelist: Collection[str] | None = None,
) -> DrainPlan:
    """Which bad nodes may be drained (module docstring); ``partition_nodes`` None: the
    partition's nodes are unknown (Slurm unreachable), so none may."""
    commands: list[tuple[str, str]] = []
    refused: list[str] = []
    site = [v.node for v in verdicts if v.status == NOT_JUDGED and v.reasons
            and v.reasons[0].endswith(SITE_NOT_JUDGED) and NODE_NAME.match(v.node)]  # fmt: skip
    if site:  # one line for them all: a site problem on 500 nodes is not 500 lines
        refused.append(f"{hostlist.shown(site)} not drained: not judged: their failures "
                       "are the site problem above")  # fmt: skip
    skip = set(site)
    for v in verdicts:
        if v.node in skip:
            continue
        if v.unjudged:
            name = v.node if NODE_NAME.match(v.node) else repr(v.node)
            why = ("its job never started: nothing was judged" if v.status == NOT_STARTED
                   else v.reasons[0])  # fmt: skip
            refused.append(f"{name} not drained: {why}")
            continue
        if not v.bad:
            continue
        why = _not_drained(v, partition, partition_nodes, nodelist)
        if why:
            refused.append(f"{v.node!r} not drained: {why}" if not NODE_NAME.match(v.node)
                           else f"{v.node} not drained: {why}")  # fmt: skip
        else:
            commands.append((v.node, drain_reason(v)))
    return DrainPlan(commands, refused)


def _not_drained(
    v: NodeVerdict,
    partition: str,
    partition_nodes: Collection[str] | None,
    nodelist: Collection[str] | None,
) -> str:
    if not NODE_NAME.match(v.node) or v.node.upper() == "ALL":
        return "not one literal node name (a host list, ALL or a comma list drains others)"
    if partition_nodes is None:
        return f"the nodes of partition {partition} are unknown (not Slurm, or sinfo failed)"
    if v.node not in partition_nodes:
        return f"not a node of partition {partition}"
    if nodelist is not None and v.node not in nodelist:
        return "not in --nodelist"
    if not confirmed_bad(v):
        return (f"{v.verdict_text()}: too few or too noisy runs to be sure; confirm it with "
                "--confirm (or --repeat 7) before draining")  # fmt: skip
    return ""
