"""A plan on its topology as a tree of boxes, and the text pictures of it.

The tree (:func:`build_tree`: package -> NUMA node -> L3 domain -> core, in hwloc logical
order, every core with the (rank, thread) pairs placed on it) is the one model every picture
of a plan is drawn from: the two text pictures here and the PNG of :mod:`topobind.draw.png`.

- :func:`text_grid` (``topobind plan --format picture``): one line per NUMA node, one bracket
  per L3 domain, one cell per core holding the rank that uses it, and the OS indexes of the
  PUs of that NUMA node's cores.
- :func:`text_tree` (``topobind draw --format text``): the nested boxes as indented text;
  every core as ``L#<logical> (PU <OS indexes>) r<rank>:<threads>``, ANSI colours on request.

Cores are named by hwloc logical index (``L#``); PUs and NUMA nodes by OS index (what Slurm
masks, ``OMP_PLACES`` and ``/proc`` use).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from topobind.errors import plural
from topobind.plan.model import Plan
from topobind.topo.topology import Core, format_list

# 20 distinguishable colours (matplotlib tab20, reordered so neighbours differ)
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip
# After the first 20 ranks the colours come round again, each round with its own hatching
# (and, after all the hatchings, a dashed border): ranks 0-519 all look different.
HATCHES = (
    "", "///", "\\\\\\", "xxx", "...", "|||", "---", "+++", "ooo", "**", "/o", "\\.", "OO",
)  # fmt: skip
EDGES = ("solid", "dashed")
ANSI = (34, 33, 32, 31, 35, 36, 94, 93, 92, 91, 95, 96)
TREE_ROW_CORES = 4  # cores per line of the text tree


class RankStyle(NamedTuple):
    """How one rank is painted: fill colour, hatching ("" = plain) and border line style."""

    colour: str
    hatch: str
    edge: str  # matplotlib line style of the core box border: solid | dashed

    @property
    def ink(self) -> str:
        """Text colour that reads on the fill (and the colour of the hatching)."""
        return _ink(self.colour)


def rank_style(rank: int) -> RankStyle:
    """Distinct for ranks 0 to len(PALETTE) x len(HATCHES) x len(EDGES) - 1 (520 ranks)."""
    cycle, i = divmod(rank, len(PALETTE))
    hatch = HATCHES[cycle % len(HATCHES)]
    edge = EDGES[(cycle // len(HATCHES)) % len(EDGES)]
    return RankStyle(PALETTE[i], hatch, edge)


def rank_colour(rank: int) -> str:
    return rank_style(rank).colour


def _ink(fill: str) -> str:
    """Black or white text, whichever reads better on ``fill`` (#rrggbb)."""
    r, g, b = (int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "#ffffff"


class CoreUse(NamedTuple):
    """Who runs on one core: (rank, thread) pairs, in thread order."""

    core: Core
    owners: tuple[tuple[int, int], ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({r for r, _ in self.owners}))

    @property
    def pus(self) -> str:
        """The OS indexes of the core's PUs, SMT siblings included: ``0,128``."""
        return format_list(self.core.pus)

    def label(self) -> str:
        """``r3:0`` (rank 3, thread 0), ``r3:0,1`` (two SMT threads), ``-`` (idle)."""
        if not self.owners:
            return "-"
        by_rank: dict[int, list[int]] = defaultdict(list)
        for r, t in self.owners:
            by_rank[r].append(t)
        return "/".join(f"r{r}:{_threads(ts)}" for r, ts in sorted(by_rank.items()))


def _threads(ts: list[int]) -> str:
    ts = sorted(set(ts))
    if len(ts) > 2 and ts == list(range(ts[0], ts[-1] + 1)):
        return f"{ts[0]}-{ts[-1]}"
    return ",".join(str(t) for t in ts)


@dataclass
class Box:
    """A node of the drawing tree: package, NUMA node, L3 domain or core."""

    kind: str  # package | numa | l3 | core
    label: str
    children: list[Box] = field(default_factory=list)
    use: CoreUse | None = None
    numa: tuple[int, ...] = ()  # numa boxes: the OS indexes of the nodes local to its cores
    # geometry, filled by topobind.draw.png (units: one core box is 1 x 1)
    w: float = 0.0
    h: float = 0.0
    x: float = 0.0
    y: float = 0.0
    cols: int = 1
    cell: tuple[float, float] = (1.0, 1.0)

    def cores(self) -> list[CoreUse]:
        if self.use is not None:
            return [self.use]
        return [u for child in self.children for u in child.cores()]


def core_uses(plan: Plan) -> list[CoreUse]:
    """Every usable core of the topology with the (rank, thread) pairs placed on its PUs."""
    owner: dict[int, list[tuple[int, int]]] = defaultdict(list)
    pu_core = plan.topology.pu_to_core()
    for rank in plan.ranks:
        for t, place in enumerate(rank.places):
            seen = set()
            for pu in place:
                core = pu_core.get(pu)
                if core is not None and core.logical not in seen:
                    seen.add(core.logical)
                    owner[core.logical].append((rank.rank, t))
    return [CoreUse(c, tuple(owner.get(c.logical, ()))) for c in plan.topology.cores]


def build_tree(plan: Plan) -> list[Box]:
    """package -> NUMA node -> L3 domain -> core, in hwloc logical order."""
    topo = plan.topology
    level = f"L{topo.shared_cache_level}" if topo.shared_cache_level else "cache"
    packages: dict[int, Box] = {}
    numas: dict[tuple[int, int | None], Box] = {}
    l3s: dict[tuple[int, int | None, int | None], Box] = {}
    for use in core_uses(plan):
        c = use.core
        pkg = packages.setdefault(c.package, Box("package", f"package L#{c.package}"))
        numa = c.numa[0] if c.numa else None
        nkey = (c.package, numa)
        if nkey not in numas:
            name = "NUMA ?" if numa is None else f"NUMA node {numa}"
            numas[nkey] = Box("numa", name, numa=c.numa)
            pkg.children.append(numas[nkey])
        lkey = (c.package, numa, c.l3)
        if lkey not in l3s:
            name = f"no shared {level}" if c.l3 is None else f"{level} L#{c.l3}"
            l3s[lkey] = Box("l3", name)
            numas[nkey].children.append(l3s[lkey])
        l3s[lkey].children.append(Box("core", f"core L#{c.logical}", use=use))
    return list(packages.values())


def title(plan: Plan, where: str | None = None) -> str:
    """``layout L: R ranks x T threads on HOST (node summary)``; ``where`` replaces "on HOST"."""
    topo = plan.topology
    smt = ", SMT: every PU" if plan.smt else ""
    if where is None:
        where = f"on {topo.hostname}" if topo.hostname else ""
    where = f" {where}" if where else ""
    return (
        f"layout {plan.layout}: {plural(plan.nranks, 'rank')} x {plural(plan.threads, 'thread')}"
        f"{smt}{where} ({plural(len(topo.packages), 'package')}, "
        f"{plural(len(topo.numa_nodes), 'NUMA node')}, "
        f"{plural(len(topo.l3_domains), 'L3 domain')}, "
        f"{plural(len(topo.cores), 'core')}, {plural(len(topo.pus), 'PU')})"
    )


# ----------------------------------------------------------------------------- grid
def _grid_cell(plan: Plan, use: CoreUse, owner: dict[int, int], width: int) -> str:
    if plan.smt:
        text = "/".join(str(owner[pu]) if pu in owner else "." for pu in use.core.pus)
    else:  # the rank using the core, through whichever PU of it
        used = [owner[pu] for pu in use.core.pus if pu in owner]
        text = str(used[0]) if used else "."
    return text.rjust(width)


def text_grid(plan: Plan) -> str:
    """One line per NUMA node, one bracket per L3 domain, one cell per core (its rank)."""
    topo = plan.topology
    owner = {pu: r.rank for r in plan.ranks for place in r.places for pu in place}
    width = max(len(str(plan.nranks - 1)), 1)
    if plan.smt:
        width = width * topo.smt + topo.smt - 1
    lines = [
        f"{plan.layout}: {plan.nranks} ranks x {plan.threads} threads on {topo.source}",
        "one cell per core, in hwloc logical order; the number is the rank using it "
        "('.' unused)"
        + ("; SMT: rank per PU of the core" if plan.smt else "")
        + "; PUs: OS indexes of the cores of the line, SMT siblings included",
    ]
    for pkg in build_tree(plan):
        lines.append(f"Package {pkg.label.removeprefix('package ')}")
        for numa in pkg.children:
            label = "NUMA " + (",".join(map(str, numa.numa)) if numa.numa else "?")
            cells = [
                "[" + " ".join(_grid_cell(plan, u, owner, width) for u in l3.cores()) + "]"
                for l3 in numa.children
            ]
            pus = format_list(sorted(pu for u in numa.cores() for pu in u.core.pus))
            lines.append(f"  {label:<8}" + "".join(cells) + f"  PUs {pus}")
    lines.extend(memory_lines(plan))
    return "\n".join(lines)


def memory_lines(plan: Plan) -> list[str]:
    """``memory: ranks 0-3 bind 0 2M; ranks 4-7 bind 1 2M``: each rank's NUMA nodes and
    pages (consecutive ranks with the same memory together)."""
    from topobind.plan.memory import memory_text

    if all(r.memory is None for r in plan.ranks):
        return []
    groups: list[tuple[list[int], str]] = []  # consecutive ranks with the same memory
    for r in plan.ranks:
        text = memory_text(r.memory)
        if groups and groups[-1][1] == text:
            groups[-1][0].append(r.rank)
        else:
            groups.append(([r.rank], text))
    parts = [
        f"rank{'s' if len(ranks) > 1 else ''} {format_list(ranks)} {text}" for ranks, text in groups
    ]
    return ["memory: " + "; ".join(parts)]


# ----------------------------------------------------------------------------- tree
def core_text(use: CoreUse) -> str:
    """``L#0 (PU 0,128) r0:0``: the core, its PUs (OS indexes) and who runs on it."""
    return f"L#{use.core.logical} (PU {use.pus}) {use.label()}"


def text_tree(plan: Plan, colour: bool = False, width: int = TREE_ROW_CORES) -> str:
    """Nested boxes as indented text; each L3 row lists its cores as :func:`core_text`."""
    tree = build_tree(plan)
    cell = max(len(core_text(u)) for u in core_uses(plan)) + 2

    def paint(text: str, use: CoreUse) -> str:
        if not colour or not use.owners:
            return text
        code = ANSI[use.ranks[0] % len(ANSI)]
        return f"\x1b[{code};1m{text}\x1b[0m"

    from topobind.plan.memory import memory_text

    out = [title(plan)]
    for pkg in tree:
        out.append(f"+ {pkg.label}")
        for numa in pkg.children:
            out.append(f"|  + {numa.label} (OS index)")
            for l3 in numa.children:
                out.append(f"|  |  + {l3.label}")
                cores = l3.cores()
                for i in range(0, len(cores), width):
                    row = [paint(core_text(u).ljust(cell), u) for u in cores[i : i + width]]
                    out.append("|  |  |  " + "".join(row).rstrip())
    out.append("ranks (cores: hwloc logical indexes; PUs: OS indexes):")
    for r in plan.ranks:
        out.append(
            f"  rank {r.rank}: {r.threads} thread(s) on core L#{format_list(r.cores)}; "
            f"PUs {format_list(r.cpus)}; NUMA {format_list(r.numa)}"
            + (f"; memory {memory_text(r.memory)}" if r.memory is not None else "")
        )
    for w in plan.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"
