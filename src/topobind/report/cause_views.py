"""The fleet report's view of causes (issue 45 item 2): what the pictures beside the figures
show of the evidence (docs/report.md, "Causes in pictures").

* :class:`SignalView`: for a signal that a slow host's cause names (throttled, busy, memory
  off-node, memory traffic, ...), the signal's value in every kept run of its fleet group
  (:func:`topobind.measure.causes.signals_of`: rates a second where the signal is a count),
  the named hosts' runs apart, for an ECDF beside the figure's. At most
  :data:`MAX_SIGNAL_VIEWS` (group, signal) pairs, those named by the most slow hosts first.
* :class:`ScatterView`: McCalpin's scatter (his study of 500 Xeon nodes found the slow runs
  had 1.5-2x the L2 fills of the fast ones): each run's figure against its L2 lines in
  (``evidence.counters.events.l2_lines_in``), or against its DRAM bytes where only the
  memory controllers counted, per unit of work where the result says its work (STREAM:
  its arrays' bytes x trials, in 64-byte lines), else per run. At most
  :data:`MAX_SCATTERS` groups; at most :data:`MAX_POINTS` points a picture (every run of a
  slow host kept, the others thinned evenly, said in the caption).
* :attr:`CauseViews.no_counters`: where no run of the report carried either counter, the one
  line that says so and why (the evidence's own reason, e.g. "no hardware PMU (a VM ...)").

Pure: the runs' evidence sections are read as the reader kept them; nothing is drawn here
(:mod:`topobind.report.cause_charts` draws).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topobind.measure import causes
from topobind.measure.results import Result

MAX_SIGNAL_VIEWS = 4  # (group, signal) pictures in one report
MAX_SCATTERS = 4  # McCalpin scatters in one report (groups with slow hosts first)
MAX_POINTS = 20_000  # runs drawn in one picture (a 5,000-host fleet of 3 runs: 15,000)
LINE_BYTES = 64


@dataclass(frozen=True)
class SignalView:
    group: int  # index into Report.groups
    signal: str  # measure.causes signal key (throttled_share, l2_lines_in, ...)
    cause: str  # the cause it names (throttled, memory traffic, ...)
    hosts: tuple[str, ...]  # the slow hosts whose cause names it
    values: tuple[float, ...]  # every kept run of the group that carries it
    marked: tuple[float, ...]  # the runs of ``hosts``


@dataclass(frozen=True)
class ScatterView:
    group: int
    counter: str  # "l2_lines_in" or "dram_bytes"
    per: str  # what x is per: "64-byte line of work" or "run"
    x: tuple[float, ...]  # the counter, per unit of work or per run
    y: tuple[float, ...]  # the run's headline figure
    slow: tuple[bool, ...]  # the run is a slow host's
    runs: int  # runs that carried the counter (x holds at most MAX_POINTS of them)
    hosts: int


@dataclass(frozen=True)
class CauseViews:
    signals: tuple[SignalView, ...] = ()
    scatters: tuple[ScatterView, ...] = ()
    no_counters: str = ""  # why no scatter: "" when one is drawn or no run carried evidence


def _signals(r: Result) -> dict[str, float]:
    ev = r.evidence_document
    return causes.signals_of({"evidence": ev})[0] if ev is not None else {}


def work_lines(params: Mapping[str, Any]) -> float | None:
    """A run's work in 64-byte lines, where its params say it: STREAM's arrays' bytes
    (``bytes_total``, else 3 x ``bytes_per_array``) times its trials (``ntimes``)."""
    total = params.get("bytes_total")
    if not isinstance(total, int | float) or isinstance(total, bool):
        per = params.get("bytes_per_array")
        total = 3 * per if isinstance(per, int | float) and not isinstance(per, bool) else None
    trials = params.get("ntimes")
    if total is None or not isinstance(trials, int) or isinstance(trials, bool):
        return None
    lines = float(total) * trials / LINE_BYTES
    return lines if lines > 0 else None


def collect(groups: Sequence[Any]) -> CauseViews:
    """The views of a report's fleet groups (``analysis.FleetGroup``, worst host first)."""
    signal_views: list[tuple[int, float, SignalView]] = []
    scatters: list[tuple[int, ScatterView]] = []
    carried = False
    for gi, g in enumerate(groups):
        per_run = [(h, r, _signals(r)) for h in g.hosts for r in h.runs]
        carried = carried or any(r.evidence_document is not None for _, r, _ in per_run)
        signal_views += _signal_views(gi, g, per_run)
        scatter = _scatter(gi, g, per_run)
        if scatter is not None:
            scatters.append((-len(g.slow_hosts), scatter))
    signal_views.sort(key=lambda t: (t[0], t[1]))
    scatters.sort(key=lambda t: t[0])
    why = ""
    if not scatters:
        why = no_counter_line((r for g in groups for h in g.hosts for r in h.runs), carried)
    return CauseViews(
        tuple(v for _, _, v in signal_views[:MAX_SIGNAL_VIEWS]),
        tuple(s for _, s in scatters[:MAX_SCATTERS]),
        why,
    )


def _signal_views(gi: int, g: Any, per_run: list[Any]) -> list[tuple[int, float, SignalView]]:
    named: dict[str, list[str]] = {}
    for h in g.slow_hosts:
        for key in getattr(h, "cause_signals", ()):
            named.setdefault(key, []).append(h.host)
    out = []
    for key, hosts in named.items():
        chosen = set(hosts)
        values = tuple(s[key] for _, _, s in per_run if key in s)
        marked = tuple(s[key] for h, _, s in per_run if key in s and h.host in chosen)
        view = SignalView(gi, key, causes.BY_KEY[key].cause, tuple(hosts), values, marked)
        out.append((-len(hosts), float(gi), view))
    return out


def _scatter(gi: int, g: Any, per_run: list[Any]) -> ScatterView | None:
    for counter in ("l2_lines_in", "dram_bytes"):
        points = [(h, r, s[counter]) for h, r, s in per_run if counter in s]
        if not points:
            continue
        work = [work_lines(r.params) for _, r, _ in points]
        per_work = all(w is not None for w in work)
        xs = [c / w if per_work and w else c for (_, _, c), w in zip(points, work, strict=True)]
        keep = _thinned([h.slow for h, _, _ in points])
        return ScatterView(
            gi,
            counter,
            "64-byte line of work" if per_work else "run",
            tuple(xs[i] for i in keep),
            tuple(points[i][1].headline_value for i in keep),
            tuple(points[i][0].slow for i in keep),
            len(points),
            len({h.host for h, _, _ in points}),
        )
    return None


def _thinned(slow: Sequence[bool]) -> list[int]:
    """Indexes of the points drawn: all when at most MAX_POINTS, else every slow one and the
    others evenly thinned to fit."""
    if len(slow) <= MAX_POINTS:
        return list(range(len(slow)))
    slow_i = [i for i, s in enumerate(slow) if s][: MAX_POINTS // 2]
    rest = [i for i, s in enumerate(slow) if not s]
    step = len(rest) / (MAX_POINTS - len(slow_i))
    return sorted(slow_i + [rest[int(k * step)] for k in range(MAX_POINTS - len(slow_i))])


def no_counter_line(runs: Any, carried: bool = True) -> str:
    """'no run carried l2_lines_in or dram_bytes: hardware counters unavailable (WHY)', WHY
    the first reason a run's evidence gives (its counters' why, or the event's own)."""
    if not carried:
        return ("no run carried l2_lines_in or dram_bytes: the results carry no evidence "
                "section (kernels built before it, or TOPOBIND_EVIDENCE=0)")  # fmt: skip
    why = ""
    for r in runs:
        ev = r.evidence
        if ev is None:
            continue
        why = ev.why or ev.reason("l2_lines_in") or ""
        if why:
            break
    return ("no run carried l2_lines_in or dram_bytes: hardware counters unavailable ("
            + (why[:160] or "no reason given; a VM?") + ")")  # fmt: skip
