"""The layouts that appear in the results, as plans that can be drawn.

A result names its layout (``layout``, from ``TOPOBIND_LAYOUT``), its ``ranks`` and
``threads`` per rank, and where every thread ran (``placement``: rank, thread, the OS index
of its PU, its NUMA node). The report draws that *recorded* placement, not the plan the
layout would make: the picture shows what really ran, so a layout that did not bind as
intended shows up.

Rules (docs/report.md repeats them):

- Results are grouped by layout, ranks, threads, host and kernel. Inside a group the
  placement of each (rank, thread) is taken from the earliest result that records it (a
  multi-rank launch of a non-MPI kernel writes one result per rank; ``whereami`` one line per
  thread), so a group's placement is complete when every one of its ranks x threads threads
  is recorded.
- The node topology comes from, in this order: ``topobind report --topology SRC`` (for every
  host), ``params.topology`` of the results (an hwloc synthetic description, as the fleet
  generator writes), or this machine's live topology when the results' host is this machine.
- Every PU of the placement must exist in that topology, on the NUMA node the result says.
- A host's topology is found once for all its results (a host is one node, whichever of its
  results records ``params.topology``).
- Results whose placements are identical (same layout, ranks, threads, PU of every thread,
  on topologies of the same shape: the same cores, PUs, NUMA nodes and L3 domains) share one
  drawing, however their topology was found; a layout that ran with different placements
  gets one drawing per placement, the most common first.
- A group that cannot be drawn (no ranks/threads, incomplete placement, unknown PU, no
  topology, a topology that does not fit) is listed with the reason; nothing fails.
"""

from __future__ import annotations

import re
import socket
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from topobind.errors import TopobindError
from topobind.measure.results import Result
from topobind.plan.model import Plan, RankPlan
from topobind.report.fmt import plural
from topobind.topo.topology import SYNTHETIC_PREFIX, Topology, format_list, load, load_live

MAX_LAYOUT_PICTURES = 12  # distinct placements drawn; the rest are listed as not drawn


@dataclass(frozen=True)
class LayoutSeen:
    """One distinct recorded placement of a layout: one picture."""

    layout: str
    ranks: int
    threads: int
    plan: Plan  # the recorded placement on its topology: places[t] = (PU thread t ran on,)
    topology: str  # where the topology came from, in words
    hosts: tuple[str, ...]  # hosts that ran exactly this placement, sorted
    kernels: tuple[str, ...]
    source: str  # a result file it was read from
    generated: bool  # params.generated: synthetic (tests/fleetgen.py)
    variant: int  # 1 = the placement most hosts had; 2, 3, ... = other placements
    variants: int  # placements drawn for this layout, ranks and threads
    shared_pus: tuple[int, ...]  # OS indexes of PUs that ran more than one thread

    @property
    def filename(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "_", self.layout)
        extra = f"-{self.variant}" if self.variants > 1 else ""
        return f"layout-{slug}-{self.ranks}x{self.threads}{extra}.png"

    @property
    def what(self) -> str:
        return f"{self.layout} ({plural(self.ranks, 'rank')} x {plural(self.threads, 'thread')})"


@dataclass(frozen=True)
class LayoutNotDrawn:
    """Results of a layout that could not be drawn, and why."""

    layout: str
    ranks: int | None
    threads: int | None
    hosts: tuple[str, ...]
    reason: str

    @property
    def what(self) -> str:
        if self.ranks is None or self.threads is None:
            return self.layout
        return f"{self.layout} ({plural(self.ranks, 'rank')} x {plural(self.threads, 'thread')})"


@dataclass(frozen=True)
class Layouts:
    seen: tuple[LayoutSeen, ...] = ()
    not_drawn: tuple[LayoutNotDrawn, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.seen or self.not_drawn)


class _Skip(Exception):
    """Internal: this group cannot be drawn, for the reason given."""


@dataclass
class _Acc:
    layout: str
    ranks: int
    threads: int
    topo: Topology
    cpus: tuple[int, ...]  # PU of (rank 0 thread 0), (rank 0 thread 1), ...
    labels: dict[str, None] = field(default_factory=dict)  # where the topology came from
    hosts: set[str] = field(default_factory=set)
    kernels: set[str] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)
    generated: bool = False


class _Topologies:
    """Topologies by source, loaded once; a failure is remembered as its message."""

    def __init__(self, given: Topology | None, local_host: str | None) -> None:
        self.given = given
        self.local_host = local_host
        self.cache: dict[str, Topology | str] = {}

    def _load(self, key: str, load_it: Callable[[], Topology]) -> Topology:
        if key not in self.cache:
            try:
                self.cache[key] = load_it()
            except TopobindError as exc:
                self.cache[key] = str(exc)
        got = self.cache[key]
        if isinstance(got, str):
            raise _Skip(got)
        return got

    def for_runs(self, host: str, runs: Sequence[Result]) -> tuple[Topology, str]:
        if self.given is not None:
            return self.given, f"the topology given with --topology ({self.given.source})"
        recorded = next((r.topology for r in runs if r.topology), None)
        if recorded is not None:
            desc = recorded.strip().removeprefix(SYNTHETIC_PREFIX)
            try:
                topo = self._load(desc, lambda: load(SYNTHETIC_PREFIX + desc))
            except _Skip as exc:
                raise _Skip(
                    f"params.topology {recorded!r} is not a usable hwloc synthetic "
                    f"description ({exc})"
                ) from None
            return topo, f"the topology recorded in the results (params.topology '{desc}')"
        if self.local_host is not None and host == self.local_host:
            topo = self._load("live", load_live)
            return topo, f"this machine's topology ({host}, read with hwloc)"
        raise _Skip(
            "no topology: the results do not record one (params.topology) and were not made "
            "on this machine; give --topology SRC (an hwloc XML file of the node)"
        )


def _recorded(
    runs: Sequence[Result], ranks: int, threads: int
) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, thread) -> (PU OS index, NUMA node or -1), each from the earliest result that
    records that thread."""
    placed: dict[tuple[int, int], tuple[int, int]] = {}
    for r in runs:
        for p in r.placement:
            placed.setdefault((p.rank, p.thread), (p.cpu, p.numa))
    if not placed:  # the reader keeps () for a missing, empty or malformed placement
        raise _Skip('no readable "placement" in the results')
    wanted = [(rk, t) for rk in range(ranks) for t in range(threads)]
    missing = [k for k in wanted if k not in placed]
    if missing:
        rk, t = missing[0]
        raise _Skip(
            f"the placement of {len(missing)} of {len(wanted)} threads is not in the results "
            f"(e.g. rank {rk} thread {t}: a rank's result file missing?)"
        )
    unknown = [k for k in wanted if placed[k][0] < 0]
    if unknown:
        raise _Skip(f"{len(unknown)} thread(s) ran on an unknown PU (cpu -1)")
    return {k: placed[k] for k in wanted}


def _check_fits(topo: Topology, label: str, placed: dict[tuple[int, int], tuple[int, int]]) -> None:
    pu_core = topo.pu_to_core()
    for (rank, thread), (cpu, numa) in placed.items():
        core = pu_core.get(cpu)
        if core is None:
            raise _Skip(
                f"PU {cpu} (OS index, rank {rank} thread {thread}) is not in {label} "
                f"(usable PUs {format_list(topo.pus)})"
            )
        if numa >= 0 and core.numa and numa not in core.numa:
            raise _Skip(
                f"PU {cpu} is on NUMA node {numa} in the results but on node "
                f"{format_list(core.numa)} in {label}: another node type?"
            )


def recorded_plan(topo: Topology, layout: str, ranks: int, cpus: Sequence[int]) -> Plan:
    """A Plan whose places are the PUs the threads ran on (``cpus`` rank-major)."""
    threads = len(cpus) // ranks
    pu_core = topo.pu_to_core()
    by_logical = {c.logical: c for c in topo.cores}
    out = []
    for rk in range(ranks):
        pus = cpus[rk * threads : (rk + 1) * threads]
        cores = tuple(dict.fromkeys(pu_core[p].logical for p in pus))
        out.append(
            RankPlan(
                rank=rk,
                places=tuple((p,) for p in pus),
                cores=cores,
                numa=tuple(sorted({n for c in cores for n in by_logical[c].numa})),
                l3=tuple(sorted({l3 for c in cores if (l3 := by_logical[c].l3) is not None})),
            )
        )
    per_core: dict[int, set[int]] = defaultdict(set)
    for p in cpus:
        per_core[pu_core[p].logical].add(p)
    smt = any(len(pus) > 1 for pus in per_core.values())
    warnings = tuple(f"PU {p} ran {n} threads" for p, n in sorted(_counts(cpus).items()) if n > 1)
    return Plan(topo, layout, threads, smt, tuple(out), warnings)


def _counts(cpus: Sequence[int]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for p in cpus:
        out[p] += 1
    return out


def _shape(topo: Topology) -> tuple[tuple[object, ...], ...]:
    """What a drawing shows of a topology: every core with its PUs, package, NUMA and L3."""
    return tuple((c.logical, c.pus, c.package, c.numa, c.l3) for c in topo.cores)


def _order(s: LayoutSeen) -> tuple[str, int, int, int]:
    """By layout; the run with the most threads (the whole-node kernels) first."""
    return (s.layout, -s.ranks * s.threads, s.ranks, s.variant)


def _variants(accs: Iterable[_Acc]) -> list[LayoutSeen]:
    """One LayoutSeen per distinct placement; the placements of one layout, ranks and
    threads numbered by how many hosts ran them (1 = the most common)."""
    by_layout: dict[tuple[str, int, int], list[_Acc]] = defaultdict(list)
    for acc in accs:
        by_layout[(acc.layout, acc.ranks, acc.threads)].append(acc)
    seen: list[LayoutSeen] = []
    for lkey in sorted(by_layout):
        variants = sorted(by_layout[lkey], key=lambda a: (-len(a.hosts), min(a.labels), a.cpus))
        for i, acc in enumerate(variants, start=1):
            seen.append(
                LayoutSeen(
                    layout=acc.layout,
                    ranks=acc.ranks,
                    threads=acc.threads,
                    plan=recorded_plan(acc.topo, acc.layout, acc.ranks, acc.cpus),
                    topology=" and ".join(sorted(acc.labels)),
                    hosts=tuple(sorted(acc.hosts)),
                    kernels=tuple(sorted(acc.kernels)),
                    source=min(acc.sources),
                    generated=acc.generated,
                    variant=i,
                    variants=len(variants),
                    shared_pus=tuple(p for p, n in sorted(_counts(acc.cpus).items()) if n > 1),
                )
            )
    return seen


def collect_layouts(
    runs: Sequence[Result],
    given: Topology | None = None,
    local_host: str | None = None,
    max_pictures: int = MAX_LAYOUT_PICTURES,
) -> Layouts:
    """Every distinct recorded placement of every layout in ``runs`` (see the module doc).

    ``given``: the topology of ``--topology`` (used for every host). ``local_host``: this
    machine's name, whose results are drawn on the live topology (default: the hostname).
    """
    if local_host is None:
        local_host = socket.gethostname()
    groups: dict[tuple[str, int | None, int | None, str, str], list[Result]] = defaultdict(list)
    by_host: dict[str, list[Result]] = defaultdict(list)
    for r in runs:
        if r.layout:
            groups[(r.layout, r.ranks, r.threads, r.host, r.kernel)].append(r)
            by_host[r.host].append(r)
    if not groups:
        return Layouts()
    topologies = _Topologies(given, local_host)
    shapes: dict[int, tuple[object, ...]] = {}  # id(topology) -> _shape, once per topology
    accs: dict[tuple[str, int, int, tuple[object, ...], tuple[int, ...]], _Acc] = {}
    skipped: dict[tuple[str, int | None, int | None, str], set[str]] = defaultdict(set)
    for key in sorted(groups, key=lambda k: (k[0], k[1] or 0, k[2] or 0, k[3], k[4])):
        layout, ranks, threads, host, kernel = key
        rs = sorted(groups[key], key=lambda r: (r.time, r.source))
        try:
            if ranks is None or threads is None:
                raise _Skip('the results do not record "ranks" and "threads" (integers >= 1)')
            placed = _recorded(rs, ranks, threads)
            topo, label = topologies.for_runs(host, by_host[host])
            _check_fits(topo, label, placed)
        except _Skip as why:
            skipped[(layout, ranks, threads, str(why))].add(host)
            continue
        order = tuple(placed[(rk, t)][0] for rk in range(ranks) for t in range(threads))
        acc = accs.setdefault(
            (layout, ranks, threads, shapes.setdefault(id(topo), _shape(topo)), order),
            _Acc(layout, ranks, threads, topo, order),
        )
        acc.labels[label] = None
        acc.hosts.add(host)
        acc.kernels.add(kernel)
        acc.sources.append(rs[0].source)
        acc.generated = acc.generated or any(r.generated for r in rs)
    seen = _variants(accs.values())
    # the most common placement of every layout first, then the other placements
    seen.sort(key=lambda s: (s.variant > 1, _order(s)))
    for extra in seen[max_pictures:]:
        skipped[
            (
                extra.layout,
                extra.ranks,
                extra.threads,
                f"placement {extra.variant} of {extra.variants}: more than {max_pictures} "
                "distinct placements in the results; only the first are drawn",
            )
        ].update(extra.hosts)
    drawn = sorted(seen[:max_pictures], key=_order)
    not_drawn = tuple(
        LayoutNotDrawn(layout, ranks, threads, tuple(sorted(hosts)), reason)
        for (layout, ranks, threads, reason), hosts in sorted(
            skipped.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2] or 0, kv[0][3])
        )
    )
    return Layouts(tuple(drawn), not_drawn)
