"""Pictures of a plan on its topology: packages, NUMA nodes, L3 domains and cores as nested
boxes, each rank in its own colour, thread numbers on the cores they own.

Two renderings of the same tree: :func:`draw_png` (matplotlib) and :func:`draw_text`
(terminals; ANSI colours on request). Cores are labelled by hwloc logical index (``L#``),
NUMA nodes by OS index, PUs (in the text legend) by OS index.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from topobind.plan import Plan, RankPlan
from topobind.report.fmt import plural
from topobind.report.layouts import LayoutSeen
from topobind.topology import Core, format_list

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
MAX_LEGEND_RANKS = 16  # beyond this every core's label says its rank; a legend would be noise


@dataclass(frozen=True)
class RankStyle:
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


def _title(plan: Plan, where: str | None = None) -> str:
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


def _legend_label(r: RankPlan, width: int) -> str:
    """``rank 0: 4 threads on core L#0,2,4,6; NUMA 0`` (the text output's list format)."""
    text = (
        f"rank {r.rank}: {plural(r.threads, 'thread')} on "
        f"{'core' if len(r.cores) == 1 else 'cores'} L#{format_list(r.cores)}; "
        f"NUMA {format_list(r.numa)}"
    )
    return _wrap(text, width)


def _wrap(text: str, width: int, indent: str = "  ") -> str:
    """Greedy wrap that may also break after a comma (long PU/core lists have no spaces)."""
    lines = [""]
    for token in re.findall(r"[^ ,]+[ ,]?|[ ,]", text):
        if lines[-1].strip() and len(lines[-1]) + len(token.rstrip()) > width:
            lines[-1] = lines[-1].rstrip()
            lines.append(indent)
        lines[-1] += token
    return "\n".join(line.rstrip() for line in lines)


def _hatch_ink(ink: str, edge: str | None, hatchcolor: bool | None = None) -> dict[str, str]:
    """Keywords that draw a patch's hatch in ``ink``: ``hatchcolor`` from matplotlib 3.11 on
    (``hatchcolor=None``: ask matplotlib); before it the hatch takes the edge colour
    (``edge``, or ``ink`` where the patch has no visible edge)."""
    if hatchcolor is None:
        from matplotlib.patches import Patch

        hatchcolor = hasattr(Patch, "set_hatchcolor")
    if hatchcolor:
        return {"hatchcolor": ink} if edge is None else {"hatchcolor": ink, "ec": edge}
    return {"ec": ink if edge is None else edge}


def _rank_patches(ax: Any, rank: int, x: float, y: float, w: float, h: float) -> None:
    """One rank's fill on a core box (or a stripe of a shared core): colour, hatch, border."""
    from matplotlib.patches import Rectangle

    st = rank_style(rank)
    ax.add_patch(Rectangle((x, y), w, h, fc=st.colour, ec="#555555", lw=0.6))
    if st.hatch:  # see-through ink over the fill; the labels sit on plain patches above it
        ink = "#00000066" if st.ink == "#000000" else "#ffffffaa"
        ax.add_patch(
            Rectangle((x, y), w, h, fill=False, hatch=st.hatch, lw=0, **_hatch_ink(ink, None))
        )
    if st.edge != "solid":
        inset = min(0.06, w / 4)
        ax.add_patch(
            Rectangle(
                (x + inset, y + inset), w - 2 * inset, h - 2 * inset, fill=False, ec=st.ink,
                lw=1.4, ls=st.edge,
            )
        )  # fmt: skip


def _legend_handle(rank: int | None, label: str) -> Any:
    from matplotlib.patches import Patch

    if rank is None:
        return Patch(fc="white", ec="#555555", label=label)
    st = rank_style(rank)
    ink = "#00000066" if st.ink == "#000000" else "#ffffffaa"
    return Patch(
        fc=st.colour,
        hatch=st.hatch or None,
        ls=st.edge,
        label=label,
        **_hatch_ink(ink, "#555555"),
    )


def draw_png(plan: Plan, title: str | None = None, dpi: int = 100, note: str = "") -> bytes:
    """The plan as a PNG. ``note`` is printed under the standard key (e.g. where it came from)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    tree, width, height = layout_tree(plan)
    scale = min(0.75, 22.0 / width)  # inches per core box, figure at most ~22 in wide
    fig_w = max(10.0, width * scale + 0.6)
    pt = scale * 72  # points per unit
    legend_size = max(9.0, 0.2 * pt)
    ncol = max(1, min(4, int(fig_w / 4.8)))
    labels: list[str] = []
    if plan.nranks <= MAX_LEGEND_RANKS:
        chars = int((fig_w / ncol - 0.5) * 72 / (legend_size * 0.6))
        labels = [_legend_label(r, chars) for r in plan.ranks] + ["idle core"]
        ncol = min(ncol, len(labels))
        lines = max(label.count("\n") + 1 for label in labels)
        legend_h = 0.5 + 0.3 * math.ceil(len(labels) / ncol) * lines * legend_size / 10
    else:
        legend_h = 0.3
    title_size = max(12.0, 0.3 * pt)
    head = textwrap.fill(title or _title(plan), width=int(fig_w * 72 / (title_size * 0.6)))
    head_lines = head.count("\n") + 1
    note_size = max(9.0, 0.2 * pt)
    key = (
        "each core: L#<hwloc logical index>, r<rank>:<OpenMP thread numbers> of the threads "
        "it runs; white = idle. NUMA node numbers are OS indexes."
    )
    if plan.nranks > len(PALETTE):
        key += " Colours repeat every 20 ranks with a different hatching: read the rank number."
    if note:
        key += " " + note
    key = textwrap.fill(key, width=int(fig_w * 72 / (note_size * 0.55)))
    key_lines = key.count("\n") + 1
    title_h = 0.15 + head_lines * title_size * 1.3 / 72  # inches, from the top
    top_h = title_h + 0.15 + key_lines * note_size * 1.35 / 72 + 0.25
    fig = plt.figure(figsize=(fig_w, height * scale + top_h + 0.3 + legend_h))
    fig_h = fig.get_figheight()
    ax = fig.add_axes((0.01, legend_h / fig_h, 0.98, 1 - (legend_h + top_h) / fig_h))
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
            x, y, size = box.x + 0.04, box.y + 0.04, 0.92
            if not ranks:
                ax.add_patch(Rectangle((x, y), size, size, fc="white", ec="#555555", lw=0.6))
            for k, r in enumerate(ranks):  # a core shared by ranks: one stripe each
                _rank_patches(ax, r, x + k * size / len(ranks), y, size / len(ranks), size)
            first = rank_style(ranks[0]) if ranks else None
            ink = first.ink if first else "#333333"
            # on a hatched or bordered fill, the labels sit on a plain patch of the colour
            plain = (
                {"boxstyle": "square,pad=0.1", "fc": first.colour, "ec": "none"}
                if first and (first.hatch or first.edge != "solid")
                else None
            )
            ax.text(
                box.x + 0.5,
                box.y + 0.22,
                f"L#{use.core.logical}",
                ha="center",
                va="center",
                fontsize=max(3.5, 0.2 * pt),
                color=ink,
                bbox=plain,
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
                    bbox=plain,
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
    fig.suptitle(head, fontsize=title_size, y=1 - 0.15 / fig_h, va="top")
    fig.text(
        0.5,
        1 - (title_h + 0.15) / fig_h,
        key,
        ha="center",
        va="top",
        fontsize=note_size,
        color="#444444",
    )
    if labels:
        ranks: list[int | None] = [r.rank for r in plan.ranks]
        handles = [
            _legend_handle(r, label) for r, label in zip([*ranks, None], labels, strict=True)
        ]
        fig.legend(
            handles=handles,
            loc="lower center",
            ncol=ncol,
            fontsize=legend_size,
            frameon=False,
            bbox_to_anchor=(0.5, 0.1 / fig_h),
        )
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return _small_png(buf.getvalue())


def _small_png(png: bytes) -> bytes:
    """The same picture with a 256-colour palette: a third of the size, same look (the
    drawing has a few flat colours; anti-aliased edges lose nothing visible)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return png
    img = Image.open(io.BytesIO(png)).convert("RGB")
    # Image.Quantize/Image.Dither from Pillow 9.1; the module constants before it
    method = getattr(Image, "Quantize", Image).MEDIANCUT
    dither = getattr(Image, "Dither", Image).NONE
    small = img.quantize(colors=256, method=method, dither=dither)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    data = out.getvalue()
    return data if len(data) < len(png) else png


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


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)


CAPTION = (
    "Packages, NUMA nodes (OS index), L3 domains and cores (hwloc logical index L#) as "
    "nested boxes; each rank in its own colour, r<rank>:<thread numbers> on the cores the "
    "threads run on; white cores are idle."
)


def layout_pictures_hook(plans: list[Plan]) -> Any:
    """A report PictureHook that adds the drawings of ``plans`` (planned, not recorded) to a
    report; the report draws the layouts of its results by itself."""
    from topobind.report.pictures import Picture

    def hook(_report: Any) -> list[Picture]:
        return [
            Picture(
                filename=f"plan-{_safe(p.layout)}-{p.nranks}x{p.threads}.png",
                title=f"layout {p.layout}: {plural(p.nranks, 'rank')} x "
                f"{plural(p.threads, 'thread')} (planned)",
                caption=CAPTION + " Planned: drawn from the plan, not from the results.",
                kind="plan",
                png=draw_png(p),
            )
            for p in plans
        ]

    return hook


def _hosts_text(hosts: tuple[str, ...]) -> str:
    if len(hosts) == 1:
        return hosts[0]
    if len(hosts) <= 3:
        return ", ".join(hosts[:-1]) + f" and {hosts[-1]}"
    return f"{len(hosts):,} hosts ({hosts[0]}, {hosts[1]}, ...)"


def layout_picture(seen: LayoutSeen) -> Any:
    """The report's picture of one layout as it ran: the placement recorded in the results."""
    from topobind.report.pictures import Picture

    tag = " [GENERATED DATA]" if seen.generated else ""
    other = f", placement {seen.variant} of {seen.variants}" if seen.variants > 1 else ""
    where = f"as recorded on {_hosts_text(seen.hosts)}{other}"
    note = (
        f"Drawn from the results' placement (the PU each thread ran on, kernels "
        f"{', '.join(seen.kernels)}) on {seen.topology}."
    )
    if seen.shared_pus:
        note += f" PUs running more than one thread: {format_list(seen.shared_pus)}."
    caption = (
        f"{CAPTION} This is where the threads really ran (the results' placement), on "
        f"{seen.topology}; hosts: {', '.join(seen.hosts[:12])}"
        + (f" and {len(seen.hosts) - 12:,} more" if len(seen.hosts) > 12 else "")
        + f"; example result: {seen.source}."
    )
    if seen.variants > 1:
        caption += f" This layout ran with {seen.variants} different placements; " + (
            "this one is the most common."
            if seen.variant == 1
            else "this one differs from the most common one: check how these hosts bind."
        )
    if seen.shared_pus:
        caption += f" PUs {format_list(seen.shared_pus)} ran more than one thread (oversubscribed)."
    return Picture(
        filename=seen.filename,
        title=f"layout {seen.what} as recorded on {_hosts_text(seen.hosts)}{other}",
        caption=caption,
        kind="layout",
        png=draw_png(seen.plan, title=_title(seen.plan, where) + tag, note=note),
    )
