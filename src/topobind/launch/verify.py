"""Placement verification: the probe's report (kernels/bin/whereami) against the Plan.

The probe prints one JSON document per rank (JSON Lines), each with ``placement`` entries
``{rank, thread, cpu, affinity, host}`` (OS PU indexes). A thread is OK only when it is
*bound* to its planned place: the CPU it ran on is in the place and its affinity mask lies
inside the place. A thread on the right CPU whose mask is wider (``OMP_PROC_BIND=false``, a
binding the launcher ignored) is a MISMATCH ("unbound"): it ran there by luck and may
migrate. A rank or thread the plan expects and the probe did not report is MISSING; one the
plan does not have is UNPLANNED.

``topobind run --verify-running`` checks the real program instead of a probe: the per-rank
step samples each rank's threads from /proc (see rankstep/rankexec.c) in the same format, and
:func:`compare` matches the sampled threads to the planned places (``match_threads``).

The plan describes one node. Ranks are compared per node: the ranks the probe reports on one
host, in rank order, are that node's local ranks 0, 1, ... (what ``SLURM_LOCALID`` and
``OMPI_COMM_WORLD_LOCAL_RANK`` number, for block and cyclic distributions alike), and local
rank *i* must match rank *i* of the plan.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from topobind.errors import TopobindError, plural
from topobind.plan.model import PlannedRank
from topobind.topo.bitmap import MAX_OS_INDEX
from topobind.topo.topology import format_list


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
    status: str  # OK | MISMATCH | MISSING | UNPLANNED | UNUSED (see topobind.launch.samples)
    reason: str = ""  # why it is not OK (empty when OK)


_PROBE_FIX = "the probe's output is corrupt (is kernels/bin/whereami topobind's probe?)"


def probe_documents(text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, document) of each whereami report in the probe's output (JSON Lines;
    other lines, such as a launcher's messages, are skipped). A line that starts like JSON
    but is not (bad syntax, nested too deep, not an object) is a :class:`TopobindError`."""
    out: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TopobindError(f"probe output line {lineno} is not JSON: {exc}") from exc
        except RecursionError:
            raise TopobindError(
                f"probe output line {lineno} is not JSON that topobind reads (nested too "
                f"deep); {_PROBE_FIX}"
            ) from None
        if isinstance(doc, dict) and doc.get("kernel") == "whereami":
            out.append((lineno, doc))
    return out


def _whole(entry: dict[str, Any], key: str, where: str, hi: int = 1 << 31) -> int:
    """``entry[key]``, a JSON whole number from 0 to ``hi`` (not a bool, a float, NaN)."""
    value = entry.get(key)
    if type(value) is not int or not 0 <= value <= hi:
        shown = "missing" if key not in entry else repr(value)[:40]
        raise TopobindError(
            f'{where}: "{key}" must be a whole number from 0 to {hi}, got {shown}; {_PROBE_FIX}'
        )
    return value


def _observed(p: object, host: object, where: str) -> Observed:
    """One placement entry of the probe's report, checked."""
    if not isinstance(p, dict):
        raise TopobindError(f"{where} is not a JSON object; {_PROBE_FIX}")
    affinity = p.get("affinity", [])
    if not isinstance(affinity, list):
        raise TopobindError(f'{where}: "affinity" must be a list of CPUs; {_PROBE_FIX}')
    return Observed(
        host=str(p.get("host", host)),
        rank=_whole(p, "rank", where),
        thread=_whole(p, "thread", where),
        cpu=_whole(p, "cpu", where, MAX_OS_INDEX),
        affinity=tuple(_whole({"affinity": x}, "affinity", where, MAX_OS_INDEX) for x in affinity),
    )


def parse_probe_output(text: str) -> list[Observed]:
    out: list[Observed] = []
    for lineno, doc in probe_documents(text):
        placement = doc.get("placement", [])
        if not isinstance(placement, list):
            raise TopobindError(
                f'probe output line {lineno}: "placement" must be a list; {_PROBE_FIX}'
            )
        host = doc.get("host", "?")
        for i, p in enumerate(placement):
            out.append(_observed(p, host, f"probe output line {lineno}, placement entry {i}"))
    if not out:
        raise TopobindError("the placement probe reported nothing (did the launch fail?)")
    return out


def check_thread(place: tuple[int, ...], o: Observed) -> Row:
    """OK only when the thread ran in its place *and* its affinity mask lies inside it."""
    planned = format_list(place)
    unbound = bool(o.affinity) and len(set(o.affinity)) > len(place)
    if o.cpu not in place:
        why = f"ran on {o.cpu}, planned {planned}"
        if unbound:
            why += f"; unbound: affinity {format_list(o.affinity)}"
        return Row(o.rank, o.thread, place, o, "MISMATCH", why)
    if not o.affinity:
        return Row(o.rank, o.thread, place, o, "MISMATCH", "the probe reported no affinity mask")
    if not set(o.affinity) <= set(place):
        what = "unbound: affinity" if unbound else "bound elsewhere: affinity"
        return Row(
            o.rank,
            o.thread,
            place,
            o,
            "MISMATCH",
            f"{what} {format_list(o.affinity)}, planned {planned}",
        )
    return Row(o.rank, o.thread, place, o, "OK")


def _bound_in(place: tuple[int, ...], o: Observed) -> bool:
    return o.cpu in place and bool(o.affinity) and set(o.affinity) <= set(place)


def _match_threads(
    places: tuple[tuple[int, ...], ...], seen: dict[int, Observed]
) -> list[Observed | None]:
    """Sampled threads of one rank for its planned places. A running program has threads of
    its own besides the OpenMP team (MPI progress threads, ...), in any creation order: each
    place takes a distinct thread bound inside it; a place no thread is bound in takes the
    first thread left (in creation order) as the evidence of its MISMATCH; threads left over
    are not judged."""
    free = [seen[t] for t in sorted(seen)]
    got: list[Observed | None] = []
    for place in places:
        hit = next((o for o in free if _bound_in(place, o)), None)
        if hit is not None:
            free.remove(hit)
        got.append(hit)
    return [g if g is not None else (free.pop(0) if free else None) for g in got]


def _cyclic(ranks_on: dict[str, list[int]], per_node: int, nnodes: int) -> bool:
    """True when a host that reported all its ranks holds them every ``nnodes`` ranks (a cyclic
    distribution: srun -m cyclic, mpirun --map-by node); block otherwise (the default)."""
    for ranks in ranks_on.values():
        rs = sorted(ranks)
        if len(rs) == per_node > 1 and nnodes > 1:
            return all(b - a == nnodes for a, b in zip(rs, rs[1:], strict=False))
    return False


def _local_indexes(
    ranks: list[int], per_node: int, nnodes: int, cyclic: bool
) -> list[tuple[int, int]]:
    """(index in the plan, rank) for the ranks one host reported, in rank order. A host with
    every rank: their order. A host with some missing: from the rank numbers and the job's
    distribution, so the ranks after a gap still meet their own planned PUs."""
    if 0 < len(ranks) < per_node:
        return [((r // nnodes) if cyclic else (r % per_node), r) for r in ranks]
    return list(enumerate(ranks))


def compare(
    planned: list[PlannedRank],
    observed: list[Observed],
    nnodes: int | None = None,
    match_threads: bool = False,
) -> list[Row]:
    """Rows for every planned thread of ``nnodes`` nodes (default: the hosts reported), and
    for every reported thread the plan does not have. ``match_threads``: the observations
    are samples of the real program (see :func:`_match_threads`), not the probe's threads."""
    per_node = len(planned)
    threads: dict[tuple[str, int], dict[int, Observed]] = {}
    twice: list[Observed] = []  # a second report of a rank's thread: a second process
    for o in observed:
        seen = threads.setdefault((o.host, o.rank), {})
        if o.thread in seen:
            twice.append(o)
        else:
            seen[o.thread] = o
    ranks_on: dict[str, list[int]] = {}
    for host, rank in threads:
        ranks_on.setdefault(host, []).append(rank)
    if nnodes is None:
        nnodes = max(1, len(ranks_on))
    expected = per_node * nnodes
    rows: list[Row] = []
    reported: set[int] = set()
    cyclic = _cyclic(ranks_on, per_node, nnodes)
    for host, ranks in ranks_on.items():
        for local, rank in _local_indexes(sorted(ranks), per_node, nnodes, cyclic):
            seen = dict(threads[(host, rank)])
            reported.add(rank)
            if local >= per_node or rank >= expected:
                why = (
                    f"{host} ran more than the {per_node} ranks per node of the plan"
                    if local >= per_node
                    else f"the plan has {expected} ranks ({per_node} per node x {nnodes})"
                )
                rows.extend(Row(rank, t, (), o, "UNPLANNED", why) for t, o in seen.items())
                continue
            pr = planned[local]
            if match_threads:
                for t, (place, got) in enumerate(
                    zip(pr.places, _match_threads(pr.places, seen), strict=True)
                ):
                    rows.append(
                        Row(rank, t, place, None, "MISSING", "no thread of the program to match")
                        if got is None
                        else dataclasses.replace(check_thread(place, got), thread=t)
                    )
                continue
            for t, place in enumerate(pr.places):
                got = seen.pop(t, None)
                if got is None:
                    rows.append(Row(rank, t, place, None, "MISSING", "not reported by the probe"))
                else:
                    rows.append(check_thread(place, got))
            for t, o in seen.items():
                rows.append(
                    Row(
                        rank,
                        t,
                        (),
                        o,
                        "UNPLANNED",
                        f"the plan has {plural(len(pr.places), 'thread')}",
                    )
                )
    for rank in range(expected):
        if rank not in reported:
            for t, place in enumerate(planned[rank % per_node].places):
                why = (
                    "rank not sampled: it ended before its sample, or never started"
                    if match_threads
                    else "rank not reported by the probe"
                )
                rows.append(Row(rank, t, place, None, "MISSING", why))
    rows.extend(_reported_twice(twice))
    rows.sort(key=lambda r: (r.rank, r.thread, r.observed.host if r.observed else ""))
    return rows


def _reported_twice(twice: list[Observed]) -> list[Row]:
    """UNPLANNED rows for the threads of a rank reported a second time on the same host (the
    launch ran the rank's program twice: only one of them can be the planned rank)."""
    return [
        Row(
            o.rank,
            o.thread,
            (),
            o,
            "UNPLANNED",
            f"reported twice on {o.host}: a second process ran as this rank",
        )
        for o in twice
    ]


def all_ok(rows: list[Row]) -> bool:
    """Every row OK; a place the sampled program never used (UNUSED: it ran fewer threads
    than planned) is not a wrong placement."""
    return all(r.status in ("OK", "UNUSED") for r in rows)


#: rows a table lists one a line; more are grouped (topobind.topo.hostlist.grouped)
GROUP_AFTER = 16


def table(rows: list[Row]) -> str:
    """The rows, one a line; past GROUP_AFTER rows, identical rows once with their ranks and
    nodes (``64 ranks, node[1-64]: ...``), those not OK first: bounded whatever the count."""
    from topobind.topo.hostlist import grouped

    def rest(r: Row) -> str:
        o = r.observed
        status = r.status + (f" ({r.reason})" if r.reason else "")
        return (
            f"{format_list(r.planned) or '-':<12} {(str(o.cpu) if o else '-'):>6}  "
            f"{(format_list(o.affinity) if o else '-'):<14} {status}"
        )

    lines = ["CPU numbers are OS indexes; OK means on the planned CPU and bound to it."]
    if len(rows) > GROUP_AFTER:
        order = sorted(rows, key=lambda r: (r.status in ("OK", "UNUSED"), r.rank, r.thread))
        lines.append(f"{'ranks, nodes: thread':<20} {'planned':<12} {'actual':>6}  "
                     f"{'affinity':<14} status")  # fmt: skip
        lines += grouped(
            (r.rank, r.observed.host if r.observed else "-", f"{r.thread:>6}  {rest(r)}")
            for r in order
        )
    else:
        lines.append(f"{'rank':>4} {'thread':>6}  {'host':<10} {'planned':<12} {'actual':>6}  "
                     f"{'affinity':<14} status")  # fmt: skip
        for r in rows:
            o = r.observed
            lines.append(f"{r.rank:>4} {r.thread:>6}  {(o.host if o else '-'):<10} {rest(r)}")
    unused = sum(1 for r in rows if r.status == "UNUSED")
    bad = sum(1 for r in rows if r.status not in ("OK", "UNUSED"))
    seen = len(rows) - unused
    lines.append(
        f"{seen - bad} of {seen} threads bound to their planned CPU"
        + ("" if not bad else f"; {bad} not")
        + ("" if not unused else f"; {plural(unused, 'planned thread')} never ran")
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
            "reason": r.reason,
        }
        for r in rows
    ]
