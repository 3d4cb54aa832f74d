"""The one summary every benchmark writes, and the rule its figures are judged by (issue 48
item 6).

Each ``scripts/bench-*.py`` keeps its own document in ``results/bench/<name>.json`` and adds
to it a ``summary``: the machine it ran on (:func:`machine`) and its targets, each a
:func:`target` row ``{name, figure, unit, target, verdict, note}`` with the verdict one of
:data:`VERDICTS`. ``scripts/bench-all`` (what ``make bench`` runs) runs every benchmark
whatever an earlier one measured, reads these rows and prints them all in one table at the end.

The "within X %" rule (:func:`within`): a figure equal to its reference is met, 0 against 0
included (a ratio of 0 by 0 is no miss); a figure whose own repeated runs already differ from
each other by more than the rule allows (highest against lowest) is ``too-noisy``: the rule
cannot tell a difference from that noise, so it is not called a miss.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: met: the figure is within its target; missed: it is not; too-noisy: the runs the figure is
#: judged against spread wider than the rule, so it is not judged; not-run: the benchmark did
#: not measure it (it failed, was skipped, or wrote no result)
VERDICTS = ("met", "missed", "too-noisy", "not-run")
#: /proc/cpuinfo is small; read at most this much of it
_CPUINFO_BYTES = 1 << 20


def target(
    name: str,
    figure: float | str | None,
    goal: str,
    verdict: str | bool,
    unit: str = "",
    note: str = "",
) -> dict[str, Any]:
    """One summary row: ``verdict`` a :data:`VERDICTS` word, or a bool (True: met)."""
    if isinstance(verdict, bool):
        verdict = "met" if verdict else "missed"
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is none of {', '.join(VERDICTS)}")
    row: dict[str, Any] = {"name": name, "figure": figure, "unit": unit, "target": goal}
    row["verdict"] = verdict
    if note:
        row["note"] = note
    return row


def within(
    value: float, reference: float | None, tolerance: float, runs: Sequence[float] = ()
) -> str:
    """``value`` against ``reference`` under "within ``tolerance`` (a share) of it": met,
    missed, too-noisy (``runs``, the repeated runs ``reference`` summarises, differ from each
    other, highest against lowest, by more than ``tolerance``) or not-run (no reference)."""
    if reference is None:
        return "not-run"
    if value == reference:
        return "met"
    if len(runs) >= 2 and _spread(runs) > tolerance:
        return "too-noisy"
    if reference == 0:
        return "missed"
    return "met" if abs(value / reference - 1) <= tolerance else "missed"


def _spread(runs: Sequence[float]) -> float:
    """How far the highest of ``runs`` is above the lowest, as a share of the lowest (inf when
    the lowest is 0 and the highest is not)."""
    lo, hi = min(runs), max(runs)
    if lo == hi:
        return 0.0
    return (hi - lo) / abs(lo) if lo else float("inf")


def machine() -> dict[str, Any]:
    """The machine a benchmark ran on: CPU model name, cores the process may use, load."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f.read(_CPUINFO_BYTES).splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0))
    return {"model": model, "cores": cores, "loadavg": [round(x, 2) for x in os.getloadavg()]}


def add_summary(doc: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``doc`` with its ``summary`` (the machine now and ``rows``) added; returns ``doc``."""
    doc["summary"] = {"machine": machine(), "targets": rows}
    return doc


def read_summary(path: Path, max_bytes: int = 64 << 20) -> list[dict[str, Any]] | None:
    """The target rows of a benchmark's result file, or None when it has none (an older
    benchmark, or a file that is not a result document)."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
        rows = doc["summary"]["targets"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    return [r for r in rows if r.get("verdict") in VERDICTS]
