"""A picture of a GPU plan: ranks, GPUs and NICs drawn together (PNG, matplotlib).

Boxes: package -> NUMA node -> L3 domain -> cores (coloured by the rank using them, as in
:mod:`topobind.report.draw`). Every GPU and NIC is a badge in the smallest box holding its
locality (the L3 domain on an EX235A node, the package on a POWER9 node): a GPU badge has the
colour of the rank it serves and says which; a NIC badge lists the ranks using it.
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass, field

from topobind.draw.boxes import rank_colour, rank_style
from topobind.plan.model import Plan
from topobind.topo.devices import Gpu, Nic
from topobind.topo.topology import Core

PAD = 0.25
HEAD = 0.6
BADGE_W, BADGE_H = 2.2, 1.0


@dataclass
class _Box:
    kind: str  # package | numa | l3
    label: str
    pus: frozenset[int]
    children: list[_Box] = field(default_factory=list)
    cores: list[Core] = field(default_factory=list)
    devices: list[Gpu | Nic] = field(default_factory=list)
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


def _tree(plan: Plan) -> list[_Box]:
    topo = plan.topology
    pkgs: dict[int, _Box] = {}
    numas: dict[tuple[int, tuple[int, ...]], _Box] = {}
    l3s: dict[tuple[int, tuple[int, ...], int | None], _Box] = {}
    for c in topo.cores:
        pkg = pkgs.setdefault(c.package, _Box("package", f"package L#{c.package}", frozenset()))
        nkey = (c.package, c.numa)
        if nkey not in numas:
            name = "NUMA " + (",".join(map(str, c.numa)) or "?")
            numas[nkey] = _Box("numa", name, frozenset())
            pkg.children.append(numas[nkey])
        lkey = (c.package, c.numa, c.l3)
        if lkey not in l3s:
            l3s[lkey] = _Box("l3", "L3 ?" if c.l3 is None else f"L3 L#{c.l3}", frozenset())
            numas[nkey].children.append(l3s[lkey])
        l3s[lkey].cores.append(c)
    for box in l3s.values():
        box.pus = frozenset(pu for c in box.cores for pu in c.pus)
    for box in numas.values():
        box.pus = frozenset(pu for ch in box.children for pu in ch.pus)
    for box in pkgs.values():
        box.pus = frozenset(pu for ch in box.children for pu in ch.pus)
    tree = list(pkgs.values())
    devices: list[Gpu | Nic] = [*topo.devices.gpus, *topo.devices.nics]
    for dev in devices:
        _home(tree, dev).devices.append(dev)
    return tree


def _home(tree: list[_Box], dev: Gpu | Nic) -> _Box:
    """The smallest box whose PUs hold the device's locality (the first package if none)."""
    pus = set(dev.pus)
    boxes: list[_Box] = []
    stack = list(tree)
    while stack:
        box = stack.pop()
        boxes.append(box)
        stack.extend(box.children)
    holding = [b for b in boxes if pus and pus <= b.pus]
    return min(holding, key=lambda b: len(b.pus)) if holding else tree[0]


def _size(box: _Box) -> None:
    if box.kind == "l3":
        cols = min(4, len(box.cores))
        rows = math.ceil(len(box.cores) / cols)
        inner_w, inner_h = cols * (1 + PAD) - PAD, rows * (1 + PAD) - PAD
    else:
        for ch in box.children:
            _size(ch)
        cols = min(len(box.children), 4 if box.kind == "numa" else 2)
        cw = max(ch.w for ch in box.children)
        chh = max(ch.h for ch in box.children)
        rows = math.ceil(len(box.children) / cols)
        inner_w, inner_h = cols * (cw + PAD) - PAD, rows * (chh + PAD) - PAD
        box._grid = (cols, cw, chh)  # type: ignore[attr-defined]
    per_row = max(1, int((max(inner_w, BADGE_W) + PAD) // (BADGE_W + PAD)))
    strip = math.ceil(len(box.devices) / per_row) * (BADGE_H + PAD)
    box.w = max(inner_w, BADGE_W) + 2 * PAD
    box.h = HEAD + inner_h + PAD + strip + PAD
    box._strip = (per_row, HEAD + inner_h + 2 * PAD)  # type: ignore[attr-defined]


def _place(box: _Box, x: float, y: float) -> None:
    box.x, box.y = x, y
    if box.kind != "l3":
        cols, cw, chh = box._grid  # type: ignore[attr-defined]
        for i, ch in enumerate(box.children):
            r, c = divmod(i, cols)
            _place(ch, x + PAD + c * (cw + PAD), y + HEAD + r * (chh + PAD))


def draw_gpu_png(plan: Plan, title: str | None = None, dpi: int = 100) -> bytes:
    # matplotlib (~0.3 s to import) only in the functions that draw, after choosing Agg
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    tree = _tree(plan)
    y = 0.0
    for pkg in tree:
        _size(pkg)
        _place(pkg, 0.0, y)
        y += pkg.h + PAD
    width, height = max(p.w for p in tree), y - PAD
    scale = min(0.5, 20.0 / width)
    pt = scale * 72
    fig = plt.figure(figsize=(width * scale + 0.4, height * scale + 1.3))
    ax = fig.add_axes((0.01, 0.01, 0.98, (height * scale) / (height * scale + 1.3)))
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(height + 0.1, -0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    owner = {pu: r.rank for r in plan.ranks for pu in r.cpus}
    gpu_rank = {g.os: r.rank for r in plan.ranks for g in r.gpus}
    nic_ranks: dict[str, list[int]] = {}
    for r in plan.ranks:
        if r.nic is not None:
            nic_ranks.setdefault(r.nic.os, []).append(r.rank)
    style = {
        "package": ("black", 2.0, "#f4f4f4", "-"),
        "numa": ("#1f4e9e", 1.5, "#eaf1fb", "-"),
        "l3": ("#2a7a2a", 1.1, "#f3faf0", "--"),
    }

    def text(x: float, y: float, s: str, size: float, **kw: object) -> None:
        ax.text(x, y, s, ha="center", va="center", fontsize=max(3.5, size * pt), **kw)  # type: ignore[arg-type]

    def walk(box: _Box) -> None:
        ec, lw, fc, ls = style[box.kind]
        ax.add_patch(Rectangle((box.x, box.y), box.w, box.h, fc=fc, ec=ec, lw=lw, ls=ls))
        ax.text(
            box.x + 0.12, box.y + HEAD * 0.5, box.label, va="center", fontsize=0.3 * pt, color=ec
        )
        for i, core in enumerate(box.cores):
            r_, c_ = divmod(i, 4)
            cx, cy = box.x + PAD + c_ * (1 + PAD), box.y + HEAD + r_ * (1 + PAD)
            used = [owner[pu] for pu in core.pus if pu in owner]
            fill = rank_colour(used[0]) if used else "white"
            ink = rank_style(used[0]).ink if used else "#777777"
            ax.add_patch(Rectangle((cx, cy), 1, 1, fc=fill, ec="#555555", lw=0.5))
            text(cx + 0.5, cy + 0.3, f"PU {core.pus[0]}", 0.18, color=ink)
            text(
                cx + 0.5,
                cy + 0.68,
                f"r{used[0]}" if used else "-",
                0.26,
                color=ink,
                fontweight="bold",
            )
        per_row, top = box._strip  # type: ignore[attr-defined]
        for i, dev in enumerate(box.devices):
            r_, c_ = divmod(i, per_row)
            bx, by = box.x + PAD + c_ * (BADGE_W + PAD), box.y + top + r_ * (BADGE_H + PAD)
            if isinstance(dev, Gpu):
                rank = gpu_rank.get(dev.os)
                fill = rank_colour(rank) if rank is not None else "white"
                ink = rank_style(rank).ink if rank is not None else "#333333"
                who = f"-> r{rank}" if rank is not None else "unused"
                label = f"GPU {dev.os} [{dev.index}]\nbus {(dev.pci or '?')[5:7]} {who}"
                ax.add_patch(Rectangle((bx, by), BADGE_W, BADGE_H, fc=fill, ec="black", lw=1.2))
            else:
                users = nic_ranks.get(dev.os, [])
                ink = "white"
                label = f"NIC {dev.os}\n" + (",".join(f"r{u}" for u in users) or "unused")
                ax.add_patch(
                    Rectangle((bx, by), BADGE_W, BADGE_H, fc="#333333", ec="black", lw=1.2)
                )
            text(bx + BADGE_W / 2, by + BADGE_H / 2, label, 0.2, color=ink)
        for ch in box.children:
            walk(ch)

    for pkg in tree:
        walk(pkg)
    head = title or (
        f"{plan.layout}: {plan.nranks} ranks x {plan.threads} threads on "
        f"{plan.topology.hostname or plan.topology.source}"
    )
    fig.suptitle(head, fontsize=max(11.0, 0.4 * pt), y=0.985, va="top")
    key_size = max(7.0, 0.22 * pt)
    key = textwrap.fill(
        "cores: the rank using them (PU = first PU, OS index); GPU badges: runtime index "
        "[n], PCI bus and the rank they serve; NIC badges: the ranks using them",
        width=int(fig.get_figwidth() * 72 / (key_size * 0.55)),
    )
    fig.text(
        0.5,
        1 - 0.55 / fig.get_figheight(),
        key,
        ha="center",
        va="top",
        fontsize=key_size,
        color="#444444",
    )
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
