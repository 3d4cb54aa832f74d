"""Every picture of a report, in the order the HTML page shows them: the fleet charts
(:mod:`topobind.report.charts`), the layouts as they ran
(:mod:`topobind.report.layouts_drawn`), then the pictures of the hooks.

Extra pictures plug in as a :data:`~topobind.report.picture.PictureHook`: a callable
``Report -> list[Picture]`` passed to :func:`topobind.report.build.build_report` (or
registered in :data:`PICTURE_HOOKS`).
"""

from __future__ import annotations

from topobind.report.analysis import Report
from topobind.report.charts import (
    ecdf_picture,
    hosts_picture,
    matplotlib_pyplot,
    matrix_picture,
    pages_picture,
)
from topobind.report.layouts_drawn import layout_picture
from topobind.report.parallel import fork_map
from topobind.report.picture import Picture, PictureHook

PICTURE_HOOKS: list[PictureHook] = []
"""Hooks that every report runs after its own pictures (e.g. layout_pictures_hook)."""

_SHARED: list[Report] = []  # the report being drawn, inherited by forked workers


def _draw(task: tuple[str, int]) -> Picture:
    report = _SHARED[0]
    kind, i = task
    if kind == "hosts":
        return hosts_picture(report, report.groups[i])
    if kind == "ecdf":
        return ecdf_picture(report, report.groups[i])
    if kind == "pages":
        return pages_picture(report, report.pages[i])
    if kind == "layout":
        return layout_picture(report.layouts.seen[i])
    if kind in ("signal", "scatter"):
        from topobind.report import cause_charts

        pic = cause_charts.draw(report, kind, i)
        assert pic is not None
        return pic
    return matrix_picture(report, report.matrices[i])


def all_pictures(report: Report, hooks: list[PictureHook] | None = None) -> list[Picture]:
    """Every picture of the report, in the order the HTML page shows them.

    The report's own pictures are drawn in parallel (forked workers); hooks run here.
    """
    tasks: list[tuple[str, int]] = []
    from topobind.report.cause_charts import cause_pictures

    for i in range(len(report.groups)):
        tasks += [("hosts", i), ("ecdf", i), *cause_pictures(report, i)]
    tasks += [("pages", i) for i in range(len(report.pages))]
    # a 1 x 1 matrix (one NUMA node) is in the tables; a heatmap of one cell says nothing
    tasks += [("matrix", i) for i, m in enumerate(report.matrices) if len(m.rows) * len(m.cols) > 1]
    tasks += [("layout", i) for i in range(len(report.layouts.seen))]
    matplotlib_pyplot()  # import matplotlib once, before any fork
    _SHARED[:] = [report]
    try:
        pics = fork_map(_draw, tasks, min_items=4)
    finally:
        _SHARED.clear()
    for hook in [*PICTURE_HOOKS, *(hooks or [])]:
        pics.extend(hook(report))
    return pics
