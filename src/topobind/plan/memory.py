"""Where each rank's memory lives: the NUMA policy and page size of the user's program.

``--mem`` (:data:`POLICIES`) and ``--pages`` (:data:`PAGES`) give every rank of a plan a
:class:`topobind.plan.model.MemoryPlacement` (:func:`plan_memory`):

- ``local`` (default): a rank whose cores lie on one NUMA node binds its memory there; a rank
  spanning several NUMA nodes (``per-socket`` on an NPS4 EPYC) interleaves over exactly those.
- ``bind`` / ``interleave`` / ``preferred``: that policy over the rank's NUMA nodes
  (``preferred``: the first node first, the others when it is full; never fails).
- ``none``: the kernel's default (first touch, NUMA balancing).
- pages ``4k`` (transparent huge pages off for the program), ``thp`` (the kernel's default),
  ``2M`` / ``1G`` (hugetlb pages through the LD_PRELOAD shim ``libtbhugepages.so`` for
  allocations of 64 MiB or more), ``auto``: the largest size whose free pool on the rank's
  nodes holds ``--pages-min`` (else ``thp``, with a note).

The per-rank step (``rankstep/rankexec.c``) applies the placement from its step-file fields
(:func:`step_fields`: ``%mem=bind:0-1``, ``%thp=off``, ``%preload=SHIM``);
:mod:`topobind.launch.verify_memory` checks it on the running program.
"""

from __future__ import annotations

from topobind.errors import PlanError, TopobindError
from topobind.plan.model import MemoryPlacement, Plan, RankPlan
from topobind.topo.memory_state import (
    Pool,
    _int,
    allowed_nodes,
    memory_nodes,
    page_label,
    pool_file,
    pool_sizes,
    read_pools,
)
from topobind.topo.topology import format_list

POLICIES = ("local", "bind", "interleave", "preferred", "none")
PAGES = ("1G", "2M", "thp", "4k", "auto")
#: hugetlb sizes in KiB by --pages spelling
HUGE_KIB = {"1G": 1 << 20, "2M": 2048}
#: the shim serves allocations of at least this many bytes (TOPOBIND_HUGE_MIN's default)
SHIM_MIN_BYTES = 64 << 20
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def rank_placement(plan: Plan, rank: RankPlan, mem: str, pages: str = "thp") -> MemoryPlacement:
    """The policy of ``--mem`` resolved for one rank (``local`` -> bind or interleave)."""
    if mem == "none":
        return MemoryPlacement("none", (), pages)
    nodes = tuple(rank.numa)
    if not nodes or not plan.topology.numa_nodes:
        raise PlanError(
            f"--mem {mem}: topology {plan.topology.source} has no NUMA information for rank "
            f"{rank.rank}; give an hwloc XML with NUMA nodes, or --mem none"
        )
    if mem == "local":
        return MemoryPlacement("bind" if len(nodes) == 1 else "interleave", nodes, pages)
    return MemoryPlacement(mem, nodes, pages)


def plan_memory(
    plan: Plan,
    mem: str = "local",
    pages: str = "thp",
    pages_min: int | None = None,
    root: str = "/",
) -> Plan:
    """``plan`` with every rank's memory placement. Pools are checked on this machine only
    when the topology is this machine's (``live``); ``root``: tests' /sys tree."""
    notes: list[str] = []
    if mem == "local" and not plan.topology.numa_nodes:
        mem = "none"
        notes.append("the topology has no NUMA nodes: memory left to the kernel (--mem none)")
    live = plan.topology.source.startswith("live")
    # no --pages-min: the least a rank's hugetlb pool must hold for the shim to map anything
    need = SHIM_MIN_BYTES if pages_min is None else pages_min
    size = _page_choice(plan, mem, pages, need, live, root, notes)
    placements: dict[tuple[int, ...], MemoryPlacement] = {}  # ranks on the same nodes share one
    for r in plan.ranks:
        if r.numa not in placements and mem == "local" and not r.numa:
            placements[r.numa] = MemoryPlacement("none", (), size)  # the default's fallback
            notes.append(
                f"the topology has no NUMA node for the CPUs of rank {r.rank} (and of any "
                "rank on such CPUs): their memory is left to the kernel (--mem none)"
            )
        elif r.numa not in placements:
            placements[r.numa] = rank_placement(plan, r, mem, size)
    ranks = tuple(r._replace(memory=placements[r.numa]) for r in plan.ranks)
    if mem in ("bind", "local") and len(plan.topology.numa_nodes) > 1 and live:
        notes += _balancing_note(root)
    return plan._replace(ranks=ranks, notes=(*plan.notes, *notes))


def _balancing_note(root: str) -> list[str]:
    if _int(f"{root.rstrip('/')}/proc/sys/kernel/numa_balancing") not in (None, 0):
        return [
            "kernel.numa_balancing is 1: bound pages stay on their nodes, but the kernel "
            "still unmaps pages to sample accesses (page faults) and moves the program's "
            "threads; turn it off for the job as root (sysctl kernel.numa_balancing=0) or "
            "check with --verify-running"
        ]
    return []


def _page_choice(
    plan: Plan, mem: str, pages: str, need: int, live: bool, root: str, notes: list[str]
) -> str:
    """The page size for every rank: ``pages`` checked against the pools, or ``auto``'s."""
    if pages in ("4k", "thp"):
        return pages
    sizes = pool_sizes(root) if live else []
    if not live:
        if pages == "auto":
            notes.append("--pages auto: the topology is not this machine's, pools unknown: thp")
            return "thp"
        notes.append(f"--pages {pages}: pools not checked (the topology is not this machine)")
        return pages
    pools = read_pools(root)
    if pages == "auto":
        for label in ("1G", "2M"):
            if HUGE_KIB[label] in sizes and not _shortfall(plan, mem, label, need, pools):
                return label
        notes.append(
            "--pages auto: no hugetlb pool holds the ranks' memory (--pages-min "
            f"{need >> 20} MiB): the kernel's default pages (thp)"
        )
        return "thp"
    kib = HUGE_KIB[pages]
    if kib not in sizes:
        raise TopobindError(
            f"--pages {pages}: this kernel has no {page_label(kib)} page pool "
            f"(no /sys/kernel/mm/hugepages/hugepages-{kib}kB); boot it with "
            f"hugepagesz={pages} or use --pages 2M|thp"
        )
    short = _shortfall(plan, mem, pages, need, pools)
    if short:
        node, want, free = short[0]
        fix = "; ".join(
            f"echo {_total(pools, n, kib) + w - f} > {pool_file(n, kib)}" for n, w, f in short
        )
        raise TopobindError(
            f"--pages {pages}: NUMA node {node} has {free} free {pages} pages, the plan needs "
            f"{want} there ({_per_rank(need)}); as root: {fix}"
        )
    return pages


def _per_rank(need: int) -> str:
    size = (
        f"{need >> 30} GiB"
        if need >= 1 << 30 and not need % (1 << 30)
        else f"{need >> 20} MiB"
        if need >= 1 << 20
        else f"{need} bytes"
    )
    if need == SHIM_MIN_BYTES:
        return (
            f"{size} per rank, the smallest allocation the hugepage shim maps; --pages-min "
            "SIZE for what the ranks allocate"
        )
    return f"--pages-min: {size} per rank"


def _total(pools: list[Pool], node: int, kib: int) -> int:
    return sum(p.total for p in pools if p.node == node and p.size_kib == kib)


def _shortfall(
    plan: Plan, mem: str, label: str, need: int, pools: list[Pool]
) -> list[tuple[int, int, int]]:
    """(node, pages needed, pages free) of each NUMA node whose pool of ``label`` pages
    cannot hold what the ranks on it need (at least one page each, ``need`` bytes per rank,
    spread over a rank's nodes); ``none``/``preferred`` count every node's pool together."""
    kib = HUGE_KIB[label]
    free = {p.node: p.free for p in pools if p.size_kib == kib}
    per_rank = max(1, -(-need // (kib << 10)))
    want: dict[int, int] = {}
    for r in plan.ranks:
        nodes = r.numa if mem not in ("none", "preferred") and r.numa else tuple(free)
        if not nodes:
            continue
        share = -(-per_rank // len(nodes)) if mem != "preferred" else per_rank
        for n in nodes if mem not in ("none", "preferred") else (min(nodes),):
            want[n] = want.get(n, 0) + share
    if mem in ("none", "preferred"):
        total, free_all = sum(want.values()), sum(free.values())
        first = min(free) if free else 0
        return [(first, total, free_all)] if total > free_all else []
    return [(n, w, free.get(n, 0)) for n, w in sorted(want.items()) if w > free.get(n, 0)]


def needs_step(plan: Plan) -> bool:
    """Does applying the plan's memory take the per-rank step? Pages other than the kernel's,
    or a policy on a node with several NUMA nodes (on one node every policy is the default)."""
    several = len(plan.topology.numa_nodes) + len(plan.topology.cpuless_numa) > 1
    return any(
        r.memory is not None
        and (r.memory.pages != "thp" or (r.memory.policy != "none" and several))
        for r in plan.ranks
    )


def step_fields(plan: Plan, rank: RankPlan, shim: str | None) -> list[str]:
    """The rank's memory fields of its step-file line (see rankstep/rankexec.c): ``%mem=``,
    ``%thp=off``, ``%preload=`` and the shim's variables."""
    m = rank.memory
    if m is None or not needs_step(plan):
        return []
    out = []
    if m.policy != "none":
        out.append(f"%mem={m.policy}:{format_list(m.nodes)}")
    if m.pages == "4k":
        out.append("%thp=off")
    if m.pages in HUGE_KIB:
        if shim is None:
            raise TopobindError("--pages needs the hugepage shim libtbhugepages.so: make kernels")
        out += [f"%preload={shim}", f"TOPOBIND_HUGE_PAGES={m.pages}", "TOPOBIND_HUGE_VERBOSE=1"]
    return out


def uses_shim(plan: Plan) -> bool:
    return any(r.memory is not None and r.memory.pages in HUGE_KIB for r in plan.ranks)


def memory_text(m: MemoryPlacement | None) -> str:
    """``bind 0 2M`` / ``interleave 0-3 thp`` / ``none thp``: a rank's memory in one cell."""
    if m is None:
        return "-"
    nodes = f" {format_list(m.nodes)}" if m.nodes else ""
    return f"{m.policy}{nodes} {m.pages}"


def check_here(plan: Plan, program: str | None = None, root: str = "/") -> None:
    """Before a launch on this host: every planned NUMA node exists here, has memory and is
    allowed to this job (its cpuset's ``Mems_allowed_list``), and a program that needs the
    shim is a dynamic executable (the shim cannot reach a static one)."""
    planned = sorted(
        {n for r in plan.ranks if r.memory and r.memory.policy != "none" for n in r.memory.nodes}
    )
    policy = next((r.memory.policy for r in plan.ranks if r.memory), "none")
    have, allowed = set(memory_nodes(root)), allowed_nodes(root)
    for node in planned:
        if have and node not in have:
            raise TopobindError(
                f"--mem {policy}: the plan puts memory on NUMA node {node}, which this host "
                f"does not have (NUMA nodes with memory here: {format_list(sorted(have))}); "
                "plan on this machine's topology (--topology live) or give --mem none"
            )
        if allowed is not None and node not in allowed:
            raise TopobindError(
                f"--mem {policy}: NUMA node {node} is not allowed to this job (its cpuset "
                f"allows {format_list(allowed)}); ask for that node, or give --mem none"
            )
    if program is not None and uses_shim(plan):
        pages = next(r.memory.pages for r in plan.ranks if r.memory)
        if is_static(program):
            raise TopobindError(
                f"--pages {pages}: {program[:200]} is a static executable; the hugepage shim "
                "(LD_PRELOAD) cannot reach it: link it dynamically, or use --pages thp"
            )


def is_static(program: str) -> bool:
    """True for an ELF executable without an interpreter (PT_INTERP): LD_PRELOAD does not
    reach it. Scripts and what cannot be read are not (the launcher reports those)."""
    import shutil
    import struct

    path = program if "/" in program else shutil.which(program)
    try:
        with open(path or program, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # ELF64 only
                return False
            end = "<" if head[5] == 1 else ">"
            (phoff,) = struct.unpack(end + "Q", head[32:40])
            phentsize, phnum = struct.unpack(end + "HH", head[54:58])
            if phnum == 0 or phnum > 512 or phentsize < 4:
                return False
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
    except OSError:
        return False
    types = (struct.unpack(end + "I", table[i : i + 4])[0] for i in range(0, len(table), phentsize))
    return 3 not in types  # PT_INTERP
