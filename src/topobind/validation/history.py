"""Each node's figures over time, from ReFrame's results database (``results.db`` in the
results directory, the one ``validate --compare`` asks ReFrame about): the sessions' own
JSON reports, read by the same reader as ``validate --each-node``
(:mod:`topobind.validation.reframe_report`): garbage in the database (a blob that is not a JSON
object, a start time that is no number, a figure that is NaN or not positive) is a one-line
error naming the database, the session and the field.

A node DRIFTS when the median of its latest session is worse than the median of its earlier
sessions of the window (default the last 30 days) by more than the threshold; the trend
(least-squares slope, % per week, negative = losing) shows a slow decline before it crosses
the site's target: a node losing 1 % a week shows -1.0 %/week long before it fails.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topobind.errors import TopobindError
from topobind.measure import stats
from topobind.validation import reframe_report, verdict
from topobind.validation.reframe_report import Report, ReportError

DAY = 86400.0


@dataclass(frozen=True)
class Point:
    when: float  # the session's start (unix time)
    value: float


@dataclass(frozen=True)
class Trend:
    node: str
    figure: str
    unit: str
    sessions: int
    baseline: float | None  # median of the earlier sessions' values in the window
    latest: float  # median of the latest session's values
    change: float | None  # stats.slowdown of latest against baseline (0.05 = 5 % worse)
    per_week: float | None  # slope as a fraction of the baseline per week (+ = better)
    drift: bool
    differ: str = ""  # the latest session's settings, when no earlier one had them
    #: a DRIFT's cause: the latest session's evidence against the node's earlier sessions'
    #: (measure.causes.explain, each session a peer); '' for the others
    cause: str = ""


MAX_TIME = 1e11  # unix seconds: the year 5138
MAX_DAYS = 36_500  # a hundred years of sessions
MAX_SESSIONS = 100_000  # a results database of ten years of daily sessions holds ~4,000


def days_of(since: str) -> int:
    """``--since`` for ``--history``: whole days (``30d``); TopobindError otherwise."""
    import re

    m = re.fullmatch(r"(\d{1,6})d", since, re.ASCII)  # ASCII digits: '١d' is no day count
    if not m or not 1 <= int(m.group(1)) <= MAX_DAYS:
        raise TopobindError(f"--since {since[:40]!r}: with --history give days, 1d to "
                            f"{MAX_DAYS}d, e.g. 30d")  # fmt: skip
    return int(m.group(1))


def sessions(db: Path, site: str, since_days: float, now: float | None = None) -> list[Report]:
    """The session reports of ``site`` in the database, oldest first, within the window
    (each with its ``start``)."""
    if not db.is_file():
        raise TopobindError(
            f"{db}: no ReFrame results database yet (run topobind validate --each-node first, "
            "or give --results DIR)"
        )
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute(
                "SELECT session_start_unix, json_blob, uuid FROM sessions "
                f"ORDER BY session_start_unix LIMIT {MAX_SESSIONS + 1}"
            ).fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise TopobindError(f"{db}: not a ReFrame results database ({exc})") from None
    if len(rows) > MAX_SESSIONS:
        raise TopobindError(f"{db}: more than {MAX_SESSIONS} sessions; not a ReFrame results "
                            "database of one site")  # fmt: skip
    starts = [_start(db, i, uuid, start) for i, (start, _, uuid) in enumerate(rows)]
    last = max(starts, default=0.0) if now is None else now
    out = []
    for i, ((_, blob, uuid), start) in enumerate(zip(rows, starts, strict=True)):
        if start < last - since_days * DAY:
            continue
        where = f"{db}: session {_name(i, uuid)}"
        if isinstance(blob, bytes):
            blob = blob.decode("utf-8", errors="replace")
        if not isinstance(blob, str):
            raise ReportError(f"{where}: json_blob is not JSON text ({type(blob).__name__})")
        if len(blob) > reframe_report.MAX_REPORT_BYTES:
            raise ReportError(f"{where}: json_blob of {len(blob) / 2**20:,.0f} MiB is larger than "
                              "any ReFrame report")  # fmt: skip
        doc = reframe_report.parse_json(blob, where)
        report = reframe_report.report_from_document(doc, where)
        if any(tc.system == site for tc in report.cases):
            out.append(Report(report.source, report.cases, start, report.runs, report.settings))
    return out


def _name(i: int, uuid: object) -> str:
    return str(uuid)[:40] if isinstance(uuid, str) and uuid.isprintable() else f"#{i + 1}"


def _start(db: Path, i: int, uuid: object, start: object) -> float:
    if (isinstance(start, bool) or not isinstance(start, int | float)
            or not math.isfinite(start) or not 0 <= start <= MAX_TIME):  # fmt: skip
        raise ReportError(f"{db}: session {_name(i, uuid)}: session_start_unix must be a "
                          f"unix time (a number of seconds), got {str(start)[:40]!r}")  # fmt: skip
    return float(start)


def trends(docs: Sequence[Report], site: str, threshold: float) -> list[Trend]:
    """One Trend per (node, figure) with at least two sessions: the latest against the
    earlier sessions made with the same settings of its check (-S: STREAM's elements...);
    when none was, the Trend says the settings differ and is not compared."""
    series: dict[tuple[str, str, str], dict[float, list[float]]] = {}
    made_with: dict[tuple[str, str, str], dict[float, tuple[tuple[str, str], ...]]] = {}
    evidence: dict[tuple[str, str, str], dict[float, list[dict[str, float]]]] = {}
    for doc in docs:
        obs = verdict.observe([doc], site)
        for (check, variant), by_node in obs.evidence.items():
            for node, runs in by_node.items():
                key = (node, check, variant)
                evidence.setdefault(key, {}).setdefault(doc.start or 0.0, []).extend(runs)
        for s in obs.samples:
            if s.unit not in reframe_report.RATE_UNITS:
                continue
            key = (s.node, f"{s.check}.{s.variant}.{s.metric}", s.unit)
            series.setdefault(key, {}).setdefault(doc.start or 0.0, []).append(s.value)
            made_with.setdefault(key, {})[doc.start or 0.0] = doc.settings_of(s.check)
    out = []
    for (node, figure, unit), by_session in sorted(series.items()):
        if len(by_session) < 2:
            continue
        times = sorted(by_session)
        sig = made_with[(node, figure, unit)]
        same = [t for t in times if sig[t] == sig[times[-1]]]
        latest = stats.median(by_session[times[-1]])
        if len(same) < 2:
            out.append(Trend(node, figure, unit, len(times), None, latest, None, None, False,
                             settings_text(sig[times[-1]])))  # fmt: skip
            continue
        trend = _trend(node, figure, unit, {t: by_session[t] for t in same}, threshold)
        if trend.drift:
            check, variant, _metric = figure.split(".", 2)
            trend = _with_cause(trend, evidence.get((node, check, variant), {}), threshold)
        out.append(trend)
    return out


def _with_cause(trend: Trend, by_session: dict[float, list[dict[str, float]]],
                threshold: float) -> Trend:  # fmt: skip
    """A DRIFT's cause: its latest session's evidence against its earlier sessions', each
    session a peer of the rule (measure.causes: 3 sessions and 3 runs at least)."""
    from dataclasses import replace

    from topobind.measure import causes

    times = sorted(by_session)
    if not times:
        return replace(trend, cause="unknown (no evidence: the sessions hold none)")
    runs = {f"session {i}": by_session[t] for i, t in enumerate(times)}
    got = causes.explain(f"session {len(times) - 1}", runs, threshold,
                         "the latest session holds none")  # fmt: skip
    return replace(trend, cause=got.text)


def settings_text(settings: Sequence[tuple[str, str]]) -> str:
    return " ".join(f"{k}={v}" for k, v in settings) or "the defaults"


def _trend(node: str, figure: str, unit: str, by_session: dict[float, list[float]],
           threshold: float) -> Trend:  # fmt: skip
    hib = reframe_report.RATE_UNITS[unit]
    times = sorted(by_session)
    latest = stats.median(by_session[times[-1]])
    earlier = [v for t in times[:-1] for v in by_session[t]]
    baseline = stats.median(earlier)
    change = stats.slowdown(latest, baseline, hib)
    pts = [Point(t, stats.median(by_session[t])) for t in times]
    slope = _slope(pts) if times[-1] - times[0] >= DAY else None  # minutes: no trend
    per_week = None if slope is None else slope * 7 * DAY / baseline * (1 if hib else -1)
    return Trend(node, figure, unit, len(times), baseline, latest, change, per_week,
                 change > threshold)  # fmt: skip


def _slope(points: Sequence[Point]) -> float | None:
    """Least-squares slope (value per second)."""
    n = len(points)
    if n < 2:
        return None
    mt = sum(p.when for p in points) / n
    mv = sum(p.value for p in points) / n
    den = sum((p.when - mt) ** 2 for p in points)
    if den == 0:
        return None
    return sum((p.when - mt) * (p.value - mv) for p in points) / den


def table(rows: Sequence[Trend]) -> str:
    head = ("node", "figure", "sessions", "earlier median", "latest", "worse by", "trend",
            "verdict")  # fmt: skip
    data = [head]
    for t in rows:
        data.append((
            t.node, t.figure, str(t.sessions),
            f"{acceptance_fmt(t.baseline)} {t.unit}", f"{acceptance_fmt(t.latest)} {t.unit}",
            "-" if t.change is None else f"{100 * t.change:+.1f}%",
            "-" if t.per_week is None else f"{100 * t.per_week:+.1f}%/week",
            "DRIFT" if t.drift else f"not compared: settings differ ({t.differ})" if t.differ
            else "ok",
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in data) for i in range(len(head))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in data[:1]]
    lines.append("  ".join("-" * w for w in widths))
    for t, r in zip(rows, data[1:], strict=True):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        if t.cause:
            lines.append(f"{'':{widths[0]}}  cause: {t.cause}")
    return "\n".join(lines)


def acceptance_fmt(value: float | None) -> str:
    from topobind.validation.reframe_runs import fmt

    return fmt(value)
