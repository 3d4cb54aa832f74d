"""Pictures of a plan on its topology: packages, NUMA nodes, L3 domains and cores as nested
boxes, each rank in its own colour, thread numbers on the cores they own.

Two renderings of the same tree: :func:`draw_png` (matplotlib) and :func:`draw_text`
(terminals; ANSI colours on request). Cores are labelled by hwloc logical index (``L#``),
NUMA nodes by OS index, PUs (in the text legend) by OS index.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from topobind.plan import Plan
from topobind.report.fmt import plural
from topobind.topology import Core, format_list

# 20 distinguishable colours (matplotlib tab20, reordered so neighbours differ)
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip
ANSI = (34, 33, 32, 31, 35, 36, 94, 93, 92, 91, 95, 96)
MAX_LEGEND_RANKS = 16  # beyond this every core's label says its rank; a legend would be noise


def rank_colour(rank: int) -> str:
    return PALETTE[rank % len(PALETTE)]


def _ink(fill: str) -> str:
    """Black or white text, whichever reads better on ``fill`` (#rrggbb)."""
    r, g, b = (int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"


@dataclass(frozen=True)
class CoreUse:
    """Who runs on one core: (rank, thread) pairs, in thread order."""

    core: Core
    owners: tuple[tuple[int, int], ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({r for r, _ in self.owners}))

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
    # geometry, filled by _layout (units: one core box is 1 x 1)
    w: float = 0.0
    h: float = 0.0
    x: float = 0.0
    y: float = 0.0


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
            numas[nkey] = Box("numa", name)
            pkg.children.append(numas[nkey])
        lkey = (c.package, numa, c.l3)
        if lkey not in l3s:
            name = f"no shared {level}" if c.l3 is None else f"{level} L#{c.l3}"
            l3s[lkey] = Box("l3", name)
            numas[nkey].children.append(l3s[lkey])
        core_name = f"core L#{c.logical}"
        l3s[lkey].children.append(Box("core", core_name, use=use))
    return list(packages.values())


PAD = 0.25
HEAD = {"package": 0.75, "numa": 0.65, "l3": 0.55}


def _arrange(n: int, cw: float, ch: float, target: float) -> int:
    """Columns for ``n`` equal cells of cw x ch whose grid is closest to aspect ``target``."""
    best, best_err = 1, math.inf
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        empty = rows * cols - n  # a ragged last row reads badly: penalise it
        err = abs(math.log((cols * cw) / (rows * ch) / target)) + empty / n
        if err < best_err - 1e-9:
            best, best_err = cols, err
    return best


def _size(box: Box) -> None:
    if box.kind == "core":
        box.w, box.h = 1.0, 1.0
        return
    for child in box.children:
        _size(child)
    cw = max(c.w for c in box.children)
    ch = max(c.h for c in box.children)
    target = {"l3": 4.0, "numa": 2.0, "package": 2.5}[box.kind]
    cols = _arrange(len(box.children), cw + PAD, ch + PAD, target)
    rows = math.ceil(len(box.children) / cols)
    box.w = cols * (cw + PAD) + PAD
    box.h = rows * (ch + PAD) + PAD + HEAD[box.kind]
    box._cols = cols  # type: ignore[attr-defined]
    box._cell = (cw, ch)  # type: ignore[attr-defined]


def _place(box: Box, x: float, y: float) -> None:
    """Top-left at (x, y); y grows downwards."""
    box.x, box.y = x, y
    if box.kind == "core":
        return
    cols: int = box._cols  # type: ignore[attr-defined]
    cw, ch = box._cell  # type: ignore[attr-defined]
    for i, child in enumerate(box.children):
        r, c = divmod(i, cols)
        _place(child, x + PAD + c * (cw + PAD), y + HEAD[box.kind] + PAD + r * (ch + PAD))


def layout_tree(plan: Plan) -> tuple[list[Box], float, float]:
    """The tree with geometry; packages stacked top to bottom. Returns (tree, width, height)."""
    tree = build_tree(plan)
    for pkg in tree:
        _size(pkg)
    width = max(p.w for p in tree)
    y = 0.0
    for pkg in tree:
        _place(pkg, 0.0, y)
        y += pkg.h + PAD
    return tree, width, y - PAD


def _title(plan: Plan) -> str:
    topo = plan.topology
    smt = ", SMT: every PU" if plan.smt else ""
    host = f" on {topo.hostname}" if topo.hostname else ""
    return (
        f"layout {plan.layout}: {plural(plan.nranks, 'rank')} x {plural(plan.threads, 'thread')}"
        f"{smt}{host} ({plural(len(topo.packages), 'package')}, "
        f"{plural(len(topo.numa_nodes), 'NUMA node')}, "
        f"{plural(len(topo.l3_domains), 'L3 domain')}, "
        f"{plural(len(topo.cores), 'core')}, {plural(len(topo.pus), 'PU')})"
    )


def draw_png(plan: Plan, title: str | None = None, dpi: int = 100) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    tree, width, height = layout_tree(plan)
    scale = min(0.75, 22.0 / width)  # inches per core box, figure at most ~22 in wide
    fig_w = max(10.0, width * scale + 0.6)
    ncol = max(1, min(4, int(fig_w / 4.8)))
    legend_rows = math.ceil((plan.nranks + 1) / ncol) if plan.nranks <= MAX_LEGEND_RANKS else 0
    legend_h = 0.5 + 0.3 * legend_rows
    pt = scale * 72  # points per unit
    title_size = max(12.0, 0.3 * pt)
    head = textwrap.fill(title or _title(plan), width=int(fig_w * 72 / (title_size * 0.6)))
    head_lines = head.count("\n") + 1
    top_h = 0.35 + 0.3 * head_lines * title_size / 12 + 0.35
    fig = plt.figure(figsize=(fig_w, height * scale + top_h + 0.3 + legend_h))
    ax = fig.add_axes(
        (0.01, legend_h / fig.get_figheight(), 0.98, 1 - (legend_h + top_h) / fig.get_figheight())
    )
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(height + 0.1, -0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    style = {
        "package": {"ec": "black", "lw": 2.0, "fc": "#f4f4f4", "ls": "-"},
        "numa": {"ec": "#1f4e9e", "lw": 1.6, "fc": "#eaf1fb", "ls": "-"},
        "l3": {"ec": "#2a7a2a", "lw": 1.2, "fc": "#f3faf0", "ls": "--"},
    }

    def walk(box: Box) -> None:
        if box.kind == "core":
            use = box.use
            assert use is not None
            ranks = use.ranks
            fc = rank_colour(ranks[0]) if ranks else "white"
            ax.add_patch(
                Rectangle((box.x + 0.04, box.y + 0.04), 0.92, 0.92, fc=fc, ec="#555555", lw=0.6)
            )
            for k, r in enumerate(ranks[1:], start=1):  # a core shared by ranks: one stripe each
                w = 0.92 / len(ranks)
                ax.add_patch(
                    Rectangle(
                        (box.x + 0.04 + k * w, box.y + 0.04), w, 0.92, fc=rank_colour(r), lw=0
                    )
                )
            ink = _ink(fc) if ranks else "#333333"
            ax.text(
                box.x + 0.5,
                box.y + 0.22,
                f"L#{use.core.logical}",
                ha="center",
                va="center",
                fontsize=max(3.5, 0.2 * pt),
                color=ink,
            )
            if ranks:
                ax.text(
                    box.x + 0.5,
                    box.y + 0.62,
                    use.label().replace("/", "\n"),
                    ha="center",
                    va="center",
                    fontsize=max(3.5, 0.24 * pt),
                    color=ink,
                    fontweight="bold",
                )
            return
        st = style[box.kind]
        ax.add_patch(
            Rectangle(
                (box.x, box.y), box.w, box.h, fc=st["fc"], ec=st["ec"], lw=st["lw"], ls=st["ls"]
            )
        )
        ax.text(
            box.x + 0.12,
            box.y + HEAD[box.kind] * 0.55,
            box.label,
            va="center",
            ha="left",
            fontsize=max(4.0, 0.36 * pt if box.kind == "package" else 0.3 * pt),
            color=st["ec"],
        )
        for child in box.children:
            walk(child)

    for pkg in tree:
        walk(pkg)
    fig_h = fig.get_figheight()
    fig.suptitle(head, fontsize=title_size, y=1 - 0.15 / fig_h, va="top")
    note_size = max(9.0, 0.2 * pt)
    fig.text(
        0.5,
        1 - (top_h - 0.3) / fig_h,
        textwrap.fill(
            "each core: L#<hwloc logical index>, r<rank>:<OpenMP thread numbers> of the threads "
            "it runs; white = idle. NUMA node numbers are OS indexes.",
            width=int(fig_w * 72 / (note_size * 0.55)),
        ),
        ha="center",
        va="center",
        fontsize=note_size,
        color="#444444",
    )
    if plan.nranks <= MAX_LEGEND_RANKS:
        handles = [
            Patch(
                fc=rank_colour(r.rank),
                ec="#555555",
                label=f"rank {r.rank}: {r.threads} thread(s) on {len(r.cores)} core(s) "
                f"L#{min(r.cores)}-{max(r.cores)}, NUMA {format_list(r.numa)}",
            )
            for r in plan.ranks
        ]
        handles.append(Patch(fc="white", ec="#555555", label="idle core"))
        fig.legend(
            handles=handles,
            loc="lower center",
            ncol=min(ncol, len(handles)),
            fontsize=max(9.0, 0.2 * pt),
            frameon=False,
            bbox_to_anchor=(0.5, 0.1 / fig_h),
        )
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def draw_text(plan: Plan, colour: bool = False, width: int = 8) -> str:
    """Nested boxes as indented text; each L3 row lists its cores as ``L#n r<rank>:<threads>``."""
    tree = build_tree(plan)
    uses = [u for u in core_uses(plan)]
    cell = max(len(f"L#{u.core.logical} {u.label()}") for u in uses) + 1

    def paint(text: str, use: CoreUse) -> str:
        if not colour or not use.owners:
            return text
        code = ANSI[use.ranks[0] % len(ANSI)]
        return f"\x1b[{code};1m{text}\x1b[0m"

    out = [_title(plan)]
    for pkg in tree:
        out.append(f"+ {pkg.label}")
        for numa in pkg.children:
            out.append(f"|  + {numa.label} (OS index)")
            for l3 in numa.children:
                out.append(f"|  |  + {l3.label}")
                cores = l3.children
                for i in range(0, len(cores), width):
                    row = []
                    for b in cores[i : i + width]:
                        assert b.use is not None
                        txt = f"L#{b.use.core.logical} {b.use.label()}".ljust(cell)
                        row.append(paint(txt, b.use))
                    out.append("|  |  |  " + "".join(row).rstrip())
    out.append("ranks (cores: hwloc logical indexes; PUs: OS indexes):")
    for r in plan.ranks:
        out.append(
            f"  rank {r.rank}: {r.threads} thread(s) on core L#{format_list(r.cores)}; "
            f"PUs {format_list(r.cpus)}; NUMA {format_list(r.numa)}"
        )
    for w in plan.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"


def layout_pictures_hook(plans: list[Plan]) -> Any:
    """A report PictureHook that adds the drawings of ``plans`` to a report."""
    from topobind.report.pictures import Picture

    def hook(_report: Any) -> list[Picture]:
        return [
            Picture(
                filename=f"layout-{p.layout}-{p.nranks}x{p.threads}.png",
                title=f"layout {p.layout}: {p.nranks} ranks x {p.threads} threads",
                caption="Packages, NUMA nodes, L3 domains and cores; each rank in its colour, "
                "thread numbers on the cores they own.",
                kind="layout",
                png=draw_png(p),
            )
            for p in plans
        ]

    return hook
