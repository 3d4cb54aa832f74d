"""Each node's figures over time, from ReFrame's results database (``results.db`` in the
results directory, the one ``validate --compare`` asks ReFrame about): the sessions' own
JSON reports, so the same reading as ``validate --each-node`` (topobind.checks.acceptance).

A node DRIFTS when the median of its latest session is worse than the median of its earlier
sessions of the window (default the last 30 days) by more than the threshold; the trend
(least-squares slope, % per week, negative = losing) shows a slow decline before it crosses
the site's target: a node losing 1 % a week shows -1.0 %/week long before it fails.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topobind.checks import acceptance
from topobind.errors import TopobindError
from topobind.kernels import stats

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


def sessions(db: Path, site: str, since_days: float, now: float | None = None) -> list[dict]:
    """The session reports of ``site`` in the database, oldest first, within the window."""
    if not db.is_file():
        raise TopobindError(
            f"{db}: no ReFrame results database yet (run topobind validate --each-node first, "
            "or give --results DIR)"
        )
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = con.execute(
            "SELECT session_start_unix, json_blob FROM sessions ORDER BY session_start_unix"
        ).fetchall()
        con.close()
    except sqlite3.DatabaseError as exc:
        raise TopobindError(f"{db}: not a ReFrame results database ({exc})") from None
    last = max((r[0] for r in rows), default=0.0) if now is None else now
    out = []
    for start, blob in rows:
        if start < last - since_days * DAY:
            continue
        doc = json.loads(blob)
        if any(tc.get("system") == site for run in doc.get("runs", [])
               for tc in run.get("testcases", [])):  # fmt: skip
            doc["_start"] = start
            out.append(doc)
    return out


def trends(docs: Sequence[dict], site: str, threshold: float) -> list[Trend]:
    """One Trend per (node, figure) with at least two sessions."""
    series: dict[tuple[str, str, str], dict[float, list[float]]] = {}
    units: dict[tuple[str, str, str], str] = {}
    for doc in docs:
        obs = acceptance.observe([doc], site)
        for s in obs.samples:
            if s.unit not in acceptance.RATE_UNITS:
                continue
            key = (s.node, f"{s.check}.{s.variant}.{s.metric}", s.unit)
            series.setdefault(key, {}).setdefault(doc["_start"], []).append(s.value)
            units[key] = s.unit
    out = []
    for (node, figure, unit), by_session in sorted(series.items()):
        if len(by_session) < 2:
            continue
        hib = acceptance.RATE_UNITS[unit]
        times = sorted(by_session)
        latest = stats.median(by_session[times[-1]])
        earlier = [v for t in times[:-1] for v in by_session[t]]
        baseline = stats.median(earlier)
        change = stats.slowdown(latest, baseline, hib)
        pts = [Point(t, stats.median(by_session[t])) for t in times]
        slope = _slope(pts) if times[-1] - times[0] >= DAY else None  # minutes: no trend
        per_week = None if slope is None else slope * 7 * DAY / baseline * (1 if hib else -1)
        out.append(Trend(node, figure, unit, len(times), baseline, latest, change, per_week,
                         change > threshold))  # fmt: skip
    return out


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
            "DRIFT" if t.drift else "ok",
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in data) for i in range(len(head))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in data]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def acceptance_fmt(value: float | None) -> str:
    from topobind.checks.validation import fmt

    return fmt(value)
