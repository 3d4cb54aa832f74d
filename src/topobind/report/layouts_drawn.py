"""Pictures of layouts for the report: each layout of the results where its threads ran
(:func:`layout_picture`), and planned layouts added by a hook (:func:`layout_pictures_hook`),
both drawn with :func:`topobind.draw.png.draw_png`."""

from __future__ import annotations

import re

from topobind.draw.boxes import title as plan_title
from topobind.draw.png import draw_png
from topobind.errors import plural
from topobind.plan.model import Plan
from topobind.report.layouts_seen import LayoutSeen
from topobind.report.picture import Picture, PictureHook
from topobind.topo.topology import format_list

CAPTION = (
    "Packages, NUMA nodes (OS index), L3 domains and cores (hwloc logical index L# and the OS "
    "indexes of its PUs, SMT siblings included) as nested boxes; each rank in its own colour, "
    "r<rank>:<thread numbers> on the cores the threads run on; white cores are idle."
)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)


def layout_pictures_hook(plans: list[Plan]) -> PictureHook:
    """A report PictureHook that adds the drawings of ``plans`` (planned, not recorded) to a
    report; the report draws the layouts of its results by itself."""

    def hook(_report: object) -> list[Picture]:
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


def layout_picture(seen: LayoutSeen) -> Picture:
    """The report's picture of one layout as it ran: the placement recorded in the results."""
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
        png=draw_png(seen.plan, title=plan_title(seen.plan, where) + tag, note=note),
    )
