"""Where the running program's memory really is, against each rank's planned memory.

The per-rank step's sampler (``rankstep/rankexec.c``, ``sample_memory``) adds to each rank's
sample a ``memory`` member read from ``/proc/PID/numa_maps`` and ``smaps_rollup``: resident
anonymous bytes per NUMA node and per page size, transparent huge pages, and every anonymous
mapping of 64 MiB or more (its page size, bytes and policy). A rank is a MISMATCH when more
than :data:`MAX_OUTSIDE` of its anonymous resident memory lies outside its planned NUMA nodes,
or when a large mapping is not on the planned page size (``--pages 2M|1G``; ``4k``: no
transparent huge pages at all). A program that rebinds its memory (``mbind``,
``set_mempolicy``, ``numactl --membind``) is caught by the first rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from topobind.launch.samples import Sample
from topobind.plan.memory import memory_text
from topobind.plan.model import MemoryPlacement, Plan
from topobind.topo.memory_state import page_label
from topobind.topo.topology import format_list

#: The share of a rank's anonymous resident memory allowed outside its planned NUMA nodes.
MAX_OUTSIDE = 0.10
#: Below this much anonymous resident memory the node side is not judged.
MIN_JUDGED = 1 << 20
HUGE_KIB = {"2M": 2048, "1G": 1 << 20}


@dataclass(frozen=True)
class MemRow:
    """One rank's memory as sampled, and the verdict against its plan."""

    rank: int
    host: str
    planned: MemoryPlacement | None
    nodes: dict[int, int] = field(default_factory=dict)  # NUMA node -> anonymous bytes
    pages: dict[int, int] = field(default_factory=dict)  # page size KiB -> anonymous bytes
    thp: int = 0
    large: list[dict[str, object]] = field(default_factory=list)
    status: str = "OK"  # OK | MISMATCH | MISSING
    why: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "OK"


def check(plan: Plan, samples: Sequence[Sample]) -> list[MemRow]:
    """A row per sample holding memory (its plan rank: global rank modulo the ranks per node),
    and a MISSING row per planned rank no sample names."""
    rows = []
    seen = set()
    for sample in sorted(samples, key=lambda x: x.rank):
        if sample.memory is None:
            continue
        seen.add(sample.rank % plan.nranks)
        planned = plan.ranks[sample.rank % plan.nranks].memory
        rows.append(_row(sample.rank, sample.host, planned, sample.memory))
    for r in plan.ranks:
        if r.rank not in seen:
            rows.append(MemRow(r.rank, "?", r.memory, status="MISSING", why="no sample"))
    return rows


def _row(rank: int, host: str, planned: MemoryPlacement | None, mem: dict[str, object]) -> MemRow:
    nodes = {int(k): int(v) for k, v in dict(mem.get("nodes") or {}).items()}  # type: ignore[call-overload]
    pages = {int(k): int(v) for k, v in dict(mem.get("pages") or {}).items()}  # type: ignore[call-overload]
    large = [dict(x) for x in list(mem.get("large") or [])]  # type: ignore[call-overload]
    row = MemRow(rank, host, planned, nodes, pages, int(str(mem.get("thp", 0))), large)
    if "error" in mem:
        return _judged(row, "MISSING", str(mem["error"]))
    why = _node_problem(row) or _page_problem(row)
    return _judged(row, "MISMATCH", why) if why else row


def _judged(row: MemRow, status: str, why: str) -> MemRow:
    import dataclasses

    return dataclasses.replace(row, status=status, why=why)


def _node_problem(row: MemRow) -> str:
    m = row.planned
    total = sum(row.nodes.values())
    if m is None or m.policy == "none" or total < MIN_JUDGED:
        return ""
    outside = sum(b for n, b in row.nodes.items() if n not in m.nodes)
    if outside > MAX_OUTSIDE * total:
        return (
            f"{_mib(outside)} of {_mib(total)} anonymous memory outside planned NUMA "
            f"{format_list(m.nodes)} (more than {MAX_OUTSIDE:.0%})"
        )
    return ""


def _page_problem(row: MemRow) -> str:
    m = row.planned
    if m is None or m.pages == "thp":
        return ""
    want = HUGE_KIB.get(m.pages, 4)
    for x in row.large:
        kib = int(str(x.get("kib", 4)))
        if kib != want:
            return (
                f"a {_mib(int(str(x.get('bytes', 0))))} mapping on {page_label(kib)} pages, "
                f"--pages {m.pages} planned"
            )
    if m.pages == "4k" and row.thp:
        return f"{_mib(row.thp)} on transparent huge pages, --pages 4k planned"
    return ""


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def table(rows: list[MemRow]) -> str:
    """One line per rank: planned, resident anonymous memory by NUMA node and by page size."""

    def cells(r: MemRow) -> str:
        nodes = ", ".join(f"{n}: {_mib(b)}" for n, b in sorted(r.nodes.items())) or "-"
        sizes = [f"{page_label(k)} {_mib(b)}" for k, b in sorted(r.pages.items())]
        sizes += [f"(THP {_mib(r.thp)})"] if r.thp else []
        return f"{nodes:<24} {', '.join(sizes) or '-':<30}"

    return _table(rows, f"{'by NUMA node':<24} {'by page size':<30}", cells)


_Row = TypeVar("_Row", MemRow, "ProbeRow")
#: ranks a table lists one a line; more are grouped (topobind.topo.hostlist.grouped)
GROUP_AFTER = 16


def _table(rows: Sequence[_Row], heads: str, cells: Callable[[_Row], str]) -> str:
    """The memory tables: rank, host and planned memory, the table's own columns (``heads``
    over ``cells`` of each row), the verdict."""
    from topobind.topo.hostlist import grouped

    def rest(r: _Row) -> str:
        verdict = r.status + (f": {r.why}" if r.why else "")
        return f"{memory_text(r.planned):<20} {cells(r)} {verdict}"

    if len(rows) > GROUP_AFTER:  # many ranks: identical rows once, with their ranks and nodes
        order = sorted(rows, key=lambda r: (r.status == "OK", r.rank))  # the others first
        body = grouped((r.rank, r.host, rest(r)) for r in order)
        return "\n".join([f"{'ranks, nodes:':<20} {'planned':<20} {heads} verdict", *body])
    lines = [f"{'rank':>4}  {'host':<12} {'planned':<20} {heads} verdict"]
    lines += [f"{r.rank:>4}  {r.host[:12]:<12} {rest(r)}" for r in rows]
    return "\n".join(lines)


def rows_json(rows: list[MemRow]) -> list[dict[str, object]]:
    return [
        {
            "rank": r.rank,
            "host": r.host,
            "planned": r.planned.to_dict() if r.planned else None,
            "nodes": {str(k): v for k, v in r.nodes.items()},
            "pages_kib": {str(k): v for k, v in r.pages.items()},
            "thp": r.thp,
            "large": r.large,
            "status": r.status,
            "why": r.why,
        }
        for r in rows
    ]


def summary(rows: list[MemRow]) -> str:
    """The verdict line."""
    if all(r.ok for r in rows):
        large = sum(len(r.large) for r in rows)
        return (
            f"the memory of all {len(rows)} ranks is on its planned NUMA nodes and pages "
            f"({large} mappings of 64 MiB or more checked; at most {MAX_OUTSIDE:.0%} of a "
            "rank's anonymous memory may lie elsewhere)"
        )
    bad = [r for r in rows if not r.ok]
    return f"the memory of {len(bad)} of {len(rows)} ranks differs from the plan"


@dataclass(frozen=True)
class ProbeRow:
    """The placement probe's memory (kernels/whereami.c): its policy and where its test page
    landed, against the rank's planned memory."""

    rank: int
    host: str
    planned: MemoryPlacement | None
    policy: str
    nodes: tuple[int, ...]
    page_node: int
    status: str = "OK"  # OK | MISMATCH | REPORTED (not judged: nothing applied it)
    why: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "MISMATCH"


def probe_rows(plan: Plan, text: str, judge: bool) -> list[ProbeRow]:
    """A row per rank of the whereami documents in ``text`` (``params.rank_memory``: every
    rank's memory, which the MPI probe gathers to rank 0; older probes: the document's own
    ``params``); ``judge``: compare with the plan (when the memory placement was applied: see
    :func:`topobind.plan.memory.needs_step`)."""
    rows = []
    for line in text.splitlines():
        if not line.lstrip().startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        params = doc.get("params") if isinstance(doc, dict) else None
        if not isinstance(params, dict) or "mempolicy" not in params:
            continue
        each = params.get("rank_memory")
        if not isinstance(each, list) or not all(isinstance(m, dict) for m in each):
            each = [{**params, "rank": doc.get("rank", 0), "host": doc.get("host", "?")}]
        rows += [_probe_row(plan, m, judge) for m in each]
    why = "" if judge else _not_judged(plan)
    rows = [replace(r, why=why) if r.status == "REPORTED" and not r.why else r for r in rows]
    return sorted(rows, key=lambda r: (r.host, r.rank))


def _not_judged(plan: Plan) -> str:
    """Why the probe's memory policy is shown and not judged: nothing applied one."""
    m = next((r.memory for r in plan.ranks if r.memory is not None), None)
    if m is None or m.policy == "none":
        return "not judged: --mem none leaves memory to the kernel"
    if len(plan.topology.numa_nodes) + len(plan.topology.cpuless_numa) <= 1:
        return (
            "not judged: one NUMA node, where every policy places memory alike; "
            "the launch applies none"
        )
    return "not judged: the launch applies no memory policy"


def _probe_row(plan: Plan, memory: dict[str, Any], judge: bool) -> ProbeRow:
    """The row of one rank's memory report; a report whose numbers are not integers (a
    broken probe) is a MISMATCH when judged, never a traceback or a silent pass."""
    try:
        return _probe_row_of(plan, memory, judge)
    except (TypeError, ValueError, OverflowError):
        why = "the probe's memory report of this rank is not readable"
        host = str(memory.get("host", "?"))[:64]
        status = "MISMATCH" if judge else "REPORTED"
        return ProbeRow(-1, host, None, "?", (), -1, status, why if judge else "")


def _probe_row_of(plan: Plan, memory: dict[str, Any], judge: bool) -> ProbeRow:
    rank = int(memory.get("rank", 0))
    row = ProbeRow(
        rank,
        str(memory.get("host", "?")),
        plan.ranks[rank % plan.nranks].memory,
        str(memory.get("mempolicy")),
        tuple(int(n) for n in memory.get("mempolicy_nodes") or ()),
        int(memory.get("test_page_node", -1)),
        "OK" if judge else "REPORTED",
    )
    why = _probe_problem(row) if judge else ""
    return replace(row, status="MISMATCH", why=why) if why else row


def _probe_problem(row: ProbeRow) -> str:
    m = row.planned
    if m is None or m.policy == "none":
        return ""
    policy = "preferred" if row.policy == "preferred_many" else row.policy
    if policy != m.policy or (m.policy != "preferred" and set(row.nodes) != set(m.nodes)):
        planned = f"{m.policy} {format_list(m.nodes)}"
        return f"policy {row.policy} {format_list(row.nodes)}, planned {planned}"
    if m.policy == "bind" and row.page_node not in m.nodes:
        return f"test page on NUMA node {row.page_node}, planned {format_list(m.nodes)}"
    return ""


def probe_table(rows: list[ProbeRow]) -> str:
    def cells(r: ProbeRow) -> str:
        policy = f"{r.policy} {format_list(r.nodes)}".strip()
        node = f"node {r.page_node}" if r.page_node >= 0 else "?"
        return f"{policy:<24} {node:<10}"

    return _table(rows, f"{'policy':<24} test page ", cells)


def probe_json(rows: list[ProbeRow]) -> list[dict[str, object]]:
    return [
        {
            "rank": r.rank,
            "host": r.host,
            "planned": r.planned.to_dict() if r.planned else None,
            "policy": r.policy,
            "nodes": list(r.nodes),
            "test_page_node": r.page_node,
            "status": r.status,
            "why": r.why,
            "ok": r.ok,
        }
        for r in rows
    ]
