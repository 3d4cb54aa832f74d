"""Placement verification: the probe's report (kernels/bin/whereami) against the Plan.

The probe prints one JSON document per rank (JSON Lines), each with ``placement`` entries
``{rank, thread, cpu, affinity, host}`` (OS PU indexes). A thread is OK when the CPU it ran
on is in its planned place; a rank or thread the plan expects and the probe did not report
is MISSING; anything else is MISMATCH.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from topobind.errors import TopobindError
from topobind.plan import PlannedRank
from topobind.topology import format_list


@dataclass(frozen=True)
class Observed:
    host: str
    rank: int
    thread: int
    cpu: int
    affinity: tuple[int, ...]


@dataclass(frozen=True)
class Row:
    rank: int
    thread: int
    planned: tuple[int, ...]
    observed: Observed | None
    status: str  # OK | MISMATCH | MISSING | UNPLANNED
    loose: bool = False  # OK, but the thread's affinity mask is wider than its place


def parse_probe_output(text: str) -> list[Observed]:
    out: list[Observed] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TopobindError(f"probe output line {lineno} is not JSON: {exc}") from exc
        if doc.get("kernel") != "whereami":
            continue
        for p in doc.get("placement", []):
            out.append(
                Observed(
                    host=str(p.get("host", doc.get("host", "?"))),
                    rank=int(p["rank"]),
                    thread=int(p["thread"]),
                    cpu=int(p["cpu"]),
                    affinity=tuple(int(x) for x in p.get("affinity", [])),
                )
            )
    if not out:
        raise TopobindError("the placement probe reported nothing (did the launch fail?)")
    return out


def compare(planned: list[PlannedRank], observed: list[Observed], nnodes: int = 1) -> list[Row]:
    """Rank r of the plan describes local rank r on every node (global rank % ranks/node)."""
    per_node = len(planned)
    seen: dict[tuple[int, int], list[Observed]] = {}
    for o in observed:
        seen.setdefault((o.rank, o.thread), []).append(o)
    rows: list[Row] = []
    for global_rank in range(per_node * nnodes):
        pr = planned[global_rank % per_node]
        for t, place in enumerate(pr.places):
            obs = seen.pop((global_rank, t), [])
            if not obs:
                rows.append(Row(global_rank, t, place, None, "MISSING"))
                continue
            o = obs[0]
            ok = o.cpu in place
            loose = ok and bool(o.affinity) and not set(o.affinity) <= set(place)
            rows.append(Row(global_rank, t, place, o, "OK" if ok else "MISMATCH", loose))
    for (rank, thread), obs in sorted(seen.items()):
        rows.append(Row(rank, thread, (), obs[0], "UNPLANNED"))
    return rows


def all_ok(rows: list[Row]) -> bool:
    return all(r.status == "OK" for r in rows)


def table(rows: list[Row]) -> str:
    lines = [
        "CPU numbers are OS indexes.",
        f"{'rank':>4} {'thread':>6}  {'host':<10} {'planned':<12} {'actual':>6}  "
        f"{'affinity':<14} status",
    ]
    for r in rows:
        o = r.observed
        status = r.status + (" (loosely bound)" if r.loose else "")
        lines.append(
            f"{r.rank:>4} {r.thread:>6}  {(o.host if o else '-'):<10} "
            f"{format_list(r.planned) or '-':<12} {(str(o.cpu) if o else '-'):>6}  "
            f"{(format_list(o.affinity) if o else '-'):<14} {status}"
        )
    bad = sum(1 for r in rows if r.status != "OK")
    lines.append(
        f"{len(rows) - bad} of {len(rows)} threads on their planned CPU"
        + ("" if not bad else f"; {bad} not")
    )
    return "\n".join(lines)


def rows_json(rows: list[Row]) -> list[dict[str, object]]:
    return [
        {
            "rank": r.rank,
            "thread": r.thread,
            "planned": list(r.planned),
            "cpu": r.observed.cpu if r.observed else None,
            "affinity": list(r.observed.affinity) if r.observed else None,
            "host": r.observed.host if r.observed else None,
            "status": r.status,
            "loosely_bound": r.loose,
        }
        for r in rows
    ]
