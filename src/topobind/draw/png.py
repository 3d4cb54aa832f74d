"""A plan on its topology as a PNG: packages, NUMA nodes, L3 domains and cores as nested
boxes (the tree of :mod:`topobind.draw.boxes`), each rank in its own colour, thread numbers
on the cores they own.

Every core box shows its hwloc logical index (``L#``) and the OS indexes of its PUs, SMT
siblings included (what Slurm masks, ``OMP_PLACES`` and ``/proc`` use); NUMA nodes are OS
indexes; the legend gives every rank's cores, PUs and NUMA nodes.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from topobind.draw.boxes import PALETTE, Box, build_tree, rank_style
from topobind.draw.boxes import title as plan_title
from topobind.errors import plural
from topobind.plan.model import Plan, RankPlan
from topobind.topo.topology import format_list

MAX_LEGEND_RANKS = 16  # beyond this every core's label says its rank; a legend would be noise


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
    box.cols = cols
    box.cell = (cw, ch)


def _place(box: Box, x: float, y: float) -> None:
    """Top-left at (x, y); y grows downwards."""
    box.x, box.y = x, y
    if box.kind == "core":
        return
    cols = box.cols
    cw, ch = box.cell
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


def _legend_label(r: RankPlan, width: int) -> str:
    """``rank 0: 4 threads on cores L#0,2,4,6 (PUs 0,2,4,6); NUMA 0`` (PUs: OS indexes
    of the PUs its threads may run on, as in the text output)."""
    text = (
        f"rank {r.rank}: {plural(r.threads, 'thread')} on "
        f"{'core' if len(r.cores) == 1 else 'cores'} L#{format_list(r.cores)} "
        f"({'PU' if len(r.cpus) == 1 else 'PUs'} {format_list(r.cpus)}); "
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


def _hatch_ink(ink: str, edge: str | None, hatchcolor: bool | None = None) -> dict[str, Any]:
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


@dataclass(frozen=True)
class _Layout:
    """Sizes of the figure around the drawing (inches unless said otherwise)."""

    fig_w: float
    pt: float  # points per unit (one core box)
    legend: list[str]  # legend labels, "" entries none (many ranks: no legend)
    ncol: int
    legend_size: float
    legend_h: float
    head: str  # the wrapped title
    title_size: float
    title_h: float
    key: str  # the wrapped key under the title
    note_size: float
    top_h: float


def _frame(plan: Plan, width: float, title: str | None, note: str) -> _Layout:
    scale = min(0.75, 22.0 / width)  # inches per core box, figure at most ~22 in wide
    fig_w = max(10.0, width * scale + 0.6)
    pt = scale * 72
    legend_size = max(9.0, 0.2 * pt)
    ncol = max(1, min(4, int(fig_w / 4.8)))
    labels: list[str] = []
    legend_h = 0.3
    if plan.nranks <= MAX_LEGEND_RANKS:
        chars = int((fig_w / ncol - 0.5) * 72 / (legend_size * 0.6))
        labels = [_legend_label(r, chars) for r in plan.ranks] + ["idle core"]
        ncol = min(ncol, len(labels))
        lines = max(label.count("\n") + 1 for label in labels)
        legend_h = 0.5 + 0.3 * math.ceil(len(labels) / ncol) * lines * legend_size / 10
    title_size = max(12.0, 0.3 * pt)
    head = textwrap.fill(title or plan_title(plan), width=int(fig_w * 72 / (title_size * 0.6)))
    note_size = max(9.0, 0.2 * pt)
    key = KEY
    if plan.nranks > len(PALETTE):
        key += " Colours repeat every 20 ranks with a different hatching: read the rank number."
    if note:
        key += " " + note
    key = textwrap.fill(key, width=int(fig_w * 72 / (note_size * 0.55)))
    title_h = 0.15 + (head.count("\n") + 1) * title_size * 1.3 / 72  # from the top
    top_h = title_h + 0.15 + (key.count("\n") + 1) * note_size * 1.35 / 72 + 0.25
    return _Layout(
        fig_w, pt, labels, ncol, legend_size, legend_h, head, title_size, title_h, key,
        note_size, top_h,
    )  # fmt: skip


KEY = (
    "each core: L#<hwloc logical index>, PU <OS indexes of its PUs, SMT siblings "
    "included: as in Slurm masks, OMP_PLACES and /proc>, r<rank>:<OpenMP thread numbers> "
    "of the threads it runs; white = idle. NUMA node numbers are OS indexes."
)
BOX_STYLE = {
    "package": {"ec": "black", "lw": 2.0, "fc": "#f4f4f4", "ls": "-"},
    "numa": {"ec": "#1f4e9e", "lw": 1.6, "fc": "#eaf1fb", "ls": "-"},
    "l3": {"ec": "#2a7a2a", "lw": 1.2, "fc": "#f3faf0", "ls": "--"},
}


def draw_png(plan: Plan, title: str | None = None, dpi: int = 100, note: str = "") -> bytes:
    """The plan as a PNG. ``note`` is printed under the standard key (e.g. where it came from)."""
    # matplotlib (~0.3 s to import) only in the functions that draw, after choosing Agg
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    tree, width, height = layout_tree(plan)
    f = _frame(plan, width, title, note)
    fig = plt.figure(figsize=(f.fig_w, height * f.pt / 72 + f.top_h + 0.3 + f.legend_h))
    fig_h = fig.get_figheight()
    ax = fig.add_axes((0.01, f.legend_h / fig_h, 0.98, 1 - (f.legend_h + f.top_h) / fig_h))
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(height + 0.1, -0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    for pkg in tree:
        _draw_box(ax, pkg, f.pt)
    fig.suptitle(f.head, fontsize=f.title_size, y=1 - 0.15 / fig_h, va="top")
    fig.text(
        0.5,
        1 - (f.title_h + 0.15) / fig_h,
        f.key,
        ha="center",
        va="top",
        fontsize=f.note_size,
        color="#444444",
    )
    if f.legend:
        ranks: list[int | None] = [r.rank for r in plan.ranks]
        handles = [
            _legend_handle(r, label) for r, label in zip([*ranks, None], f.legend, strict=True)
        ]
        fig.legend(
            handles=handles,
            loc="lower center",
            ncol=f.ncol,
            fontsize=f.legend_size,
            frameon=False,
            bbox_to_anchor=(0.5, 0.1 / fig_h),
        )
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return _small_png(buf.getvalue())


def _draw_box(ax: Any, box: Box, pt: float) -> None:
    """A package, NUMA node or L3 box with its label, then what it holds."""
    from matplotlib.patches import Rectangle

    if box.kind == "core":
        _draw_core(ax, box, pt)
        return
    st = BOX_STYLE[box.kind]
    ax.add_patch(
        Rectangle((box.x, box.y), box.w, box.h, fc=st["fc"], ec=st["ec"], lw=st["lw"], ls=st["ls"])
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
        _draw_box(ax, child, pt)


def _draw_core(ax: Any, box: Box, pt: float) -> None:
    """A core: its ranks' colours (a stripe each), L#, its PUs, and r<rank>:<threads>."""
    from matplotlib.patches import Rectangle

    use = box.use
    assert use is not None
    ranks = use.ranks
    x, y, size = box.x + 0.04, box.y + 0.04, 0.92
    if not ranks:
        ax.add_patch(Rectangle((x, y), size, size, fc="white", ec="#555555", lw=0.6))
    for k, r in enumerate(ranks):  # a core shared by ranks: one stripe each
        _rank_patches(ax, r, x + k * size / len(ranks), y, size / len(ranks), size)
    first = rank_style(ranks[0]) if ranks else None
    # on a hatched or bordered fill, the labels sit on a plain patch of the colour
    plain = (
        {"boxstyle": "square,pad=0.1", "fc": first.colour, "ec": "none"}
        if first and (first.hatch or first.edge != "solid")
        else None
    )
    text = {"ha": "center", "va": "center", "color": first.ink if first else "#333333"}
    text["bbox"] = plain  # type: ignore[assignment]
    ax.text(
        box.x + 0.5, box.y + 0.17, f"L#{use.core.logical}", fontsize=max(3.5, 0.18 * pt), **text
    )
    pus = _pu_label(use.pus)
    longest = max(len(line) for line in pus.split("\n"))
    ax.text(
        box.x + 0.5,
        box.y + 0.38,
        pus,
        fontsize=max(3.0, min(0.16, 1.3 / longest) * pt),
        linespacing=0.9,
        **text,
    )
    if ranks:
        ax.text(
            box.x + 0.5,
            box.y + 0.7,
            use.label().replace("/", "\n"),
            fontsize=max(3.5, 0.22 * pt),
            fontweight="bold",
            **text,
        )


def _pu_label(pus: str) -> str:
    """``PU 0,128``; a long list goes on two lines, broken after a comma."""
    text = f"PU {pus}"
    if len(text) <= 10 or "," not in pus:
        return text
    parts = pus.split(",")
    half = (len(parts) + 1) // 2
    return f"PU {','.join(parts[:half])},\n{','.join(parts[half:])}"


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
