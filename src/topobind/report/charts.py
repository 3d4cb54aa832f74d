"""The report's charts of the figures (matplotlib, Agg backend, PNG bytes): ECDF and
spread per host of every fleet group, page sizes compared, matrix heatmaps.

Every chart is titled, its axes carry units and the direction of "better", and charts made
from generated (synthetic) results say so in their title. The layout drawings are in
:mod:`topobind.report.layouts_drawn`; :mod:`topobind.report.gallery` draws them all.
"""

from __future__ import annotations

import io
import math
from typing import Any

from topobind.report import fmt
from topobind.report.analysis import (
    FleetGroup,
    HostStats,
    MatrixGroup,
    PageComparison,
    Report,
    kernel_and,
    metric_label,
    pages_slug,
    where_text,
)
from topobind.report.picture import Picture

SLOW_COLOUR = "#d62728"  # red
NORMAL_COLOUR = "#1f77b4"  # blue
FLEET_COLOUR = "#2ca02c"  # green
GREY = "#7f7f7f"
FLAT_COLOUR = "#c6dbef"  # light blue: a heatmap whose cells all hold one value
MAX_NAMED_SLOW = 15  # slow hosts named in one picture; the rest are in the tables
MAX_TICK_HOSTS = 40  # up to this many hosts, every host is named on the x axis
#: above this many hosts the per-host picture is the distribution of the host medians (one
#: point a host on an ECDF, the slow ones named), not a column a host: 1,000 or 5,000 columns
#: in 1,600 pixels are unreadable
MAX_HOST_COLUMNS = 200
MAX_ANNOTATED_CELLS = 100  # matrices up to 10 x 10 get their values written in the cells
DPI = 100


def matplotlib_pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with the report's defaults."""
    # matplotlib (~0.3 s to import) only in the functions that draw, after choosing Agg
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 10,
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "figure.dpi": DPI,
        }
    )
    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _tag(report: Report) -> str:
    return " [GENERATED DATA]" if report.generated else ""


def _value_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: fmt.tick(v))


def _axis_label(g: FleetGroup) -> str:
    stat = f" ({g.stat} of trials)" if g.stat else ""
    arrow = "higher is better →" if g.higher_is_better else "← lower is better"
    return f"{metric_label(g.kernel, g.metric)}{stat} [{g.unit}]   ({arrow})"


def _where(g: FleetGroup | MatrixGroup) -> str:
    """`` (layout per-l3, 2 MiB pages)``, or "" when the results record neither."""
    text = where_text(g.layout, g.page_kib, g.page_fallback)
    return f" ({text})" if text else ""


def _side_panel(ax: Any, fig: Any, lines: list[str], title: str, colour: str) -> None:
    """A text box to the right of the axes (never on top of data)."""
    if not lines:
        return
    ax.text(
        1.02,
        0.0,
        title + "\n" + "\n".join(lines),
        transform=ax.transAxes,
        va="bottom",
        ha="left",
        fontsize=9,
        family="monospace",
        color=colour,
        bbox={"boxstyle": "round,pad=0.4", "fc": "white", "ec": colour},
    )


def ecdf_picture(report: Report, g: FleetGroup) -> Picture:
    plt = matplotlib_pyplot()
    s = g.all_runs
    fig, ax = plt.subplots(figsize=(11, 5.2))
    xs = [p[0] for p in s.ecdf]
    ys = [p[1] * 100 for p in s.ecdf]
    ax.step([xs[0], *xs], [0.0, *ys], where="post", color=NORMAL_COLOUR, lw=2, label="all runs")
    slow_vals = [v for h in g.slow_hosts for v in h.summary.values]
    if slow_vals:
        ax.plot(
            slow_vals,
            [1.5] * len(slow_vals),
            "|",
            color=SLOW_COLOUR,
            ms=14,
            mew=2,
            label=(
                "runs of the slow host"
                if len(g.slow_hosts) == 1
                else f"runs of the {len(g.slow_hosts)} slow hosts"
            ),
        )
    marks = [("p50", s.p50), ("p90", s.p90), ("p99", s.p99), ("max", s.max)]
    if g.higher_is_better:
        marks.insert(0, ("min", s.min))
    for i, (name, v) in enumerate(marks):
        ax.axvline(v, color=GREY, ls="--", lw=1)
        ax.text(v, 101 + 3.2 * (i % 2), f" {name}", fontsize=9, color="black", va="bottom")
    ax.set_ylim(0, 108)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("runs at or below this value [%]")
    ax.set_xlabel(_axis_label(g))
    ax.xaxis.set_major_formatter(_value_formatter())
    ax.set_title(
        f"{g.kernel}: distribution of {fmt.plural(s.n, 'run')} on "
        f"{fmt.plural(len(g.hosts), 'host')}{_where(g)}{_tag(report)}",
        pad=22,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    width = max(len(fmt.value(v)) for _, v in marks)
    names = {"min": "min (worst)", "max": "max" if g.higher_is_better else "max (worst)"}
    rows = [f"{names.get(n, n):<12}{fmt.value(v):>{width}}" for n, v in marks]
    _side_panel(ax, fig, rows, f"runs [{g.unit}]", "black")
    return Picture(
        filename=f"ecdf-{g.slug}.png",
        title=f"{g.kernel}: distribution of all runs{_where(g)}",
        caption=(
            "Empirical CDF of every run's headline value across the fleet: a point (x, y) means "
            "y % of runs scored at most x. A steep curve is a uniform fleet; a long tail on the "
            + ("left" if g.higher_is_better else "right")
            + " is slow runs. Dashed lines mark percentiles (values in the box); red ticks "
            "are runs of slow hosts."
        ),
        kind="ecdf",
        png=_png(fig),
    )


def _host_runs(ax: Any, hosts: list[HostStats], many: bool) -> None:
    """Every run as a dot in its host's column (slow hosts red), every host's median a bar."""
    xs_n: list[int] = []
    ys_n: list[float] = []
    xs_s: list[int] = []
    ys_s: list[float] = []
    for i, h in enumerate(hosts):
        for v in h.summary.values:
            (xs_s if h.slow else xs_n).append(i)
            (ys_s if h.slow else ys_n).append(v)
    dot = 6 if many else 18
    ax.scatter(xs_n, ys_n, s=dot, color=NORMAL_COLOUR, alpha=0.45, lw=0, label="one run")
    if xs_s:
        ax.scatter(
            xs_s, ys_s, s=dot * 1.6, color=SLOW_COLOUR, alpha=0.8, lw=0, label="run of a slow host"
        )
    med_x = list(range(len(hosts)))
    med_y = [h.summary.median for h in hosts]
    med_c = [SLOW_COLOUR if h.slow else "black" for h in hosts]
    ax.scatter(med_x, med_y, marker="_", s=40 if many else 200, c=med_c, lw=2, label="host median")


def _fleet_lines(ax: Any, report: Report, g: FleetGroup) -> None:
    """The fleet median (green) and the slow threshold (dashed red; none for one host)."""
    side = "below" if g.higher_is_better else "above"
    ax.axhline(
        g.fleet_median,
        color=FLEET_COLOUR,
        lw=1.5,
        label=f"fleet median\n{fmt.value(g.fleet_median)} {g.unit}",
    )
    if g.threshold is not None:  # one host: nothing to compare it with, no threshold
        ax.axhline(
            g.threshold,
            color=SLOW_COLOUR,
            lw=1.2,
            ls="--",
            label=f"slow {side} {fmt.value(g.threshold)}\n(> {report.options.slow_mads:g} MADs "
            f"and\n > {report.options.slow_pct:g}% worse)",
        )


def _host_axis(
    ax: Any, g: FleetGroup, hosts: list[HostStats], named: list[HostStats], many: bool
) -> None:
    """Host names on the x axis (slow ones red); with too many hosts, the named slow hosts
    pointed at from labels stacked in the corner where the slow hosts are."""
    n = len(hosts)
    if not many:
        ax.set_xticks(list(range(n)))
        ax.set_xticklabels([h.host for h in hosts], rotation=90, fontsize=8)
        for tick, h in zip(ax.get_xticklabels(), hosts, strict=True):
            if h.slow:
                tick.set_color(SLOW_COLOUR)
                tick.set_fontweight("bold")
        ax.set_xlabel("host (sorted by median, worst at the right)")
        return
    index = {h.host: i for i, h in enumerate(hosts)}
    for k, h in enumerate(named):
        y = 0.05 + 0.065 * k if g.higher_is_better else 0.95 - 0.065 * k
        ax.annotate(
            h.host,
            xy=(index[h.host], h.summary.median),
            xytext=(0.84, y),
            textcoords="axes fraction",
            ha="right",
            va="center",
            fontsize=8.5,
            color=SLOW_COLOUR,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
            arrowprops={"arrowstyle": "-", "color": SLOW_COLOUR, "lw": 0.7, "alpha": 0.8},
        )
    ax.set_xticks([])
    ax.set_xlabel(f"{n} hosts sorted by median, worst at the right (slow hosts in red)")


def _slow_rows(g: FleetGroup, named: list[HostStats], slow: list[HostStats]) -> list[str]:
    rows = [
        f"{h.host} {fmt.pct(-h.worse_pct if g.higher_is_better else h.worse_pct, True)}"
        for h in named
    ]
    if len(slow) > len(named):
        rows.append(f"+{len(slow) - len(named)} more (tables)")
    return rows


def _runs_per_host(g: FleetGroup) -> str:
    runs = {h.summary.n for h in g.hosts}
    return f"{min(runs)}-{max(runs)}" if len(runs) > 1 else str(runs.pop())


def _hosts_frame(
    report: Report, g: FleetGroup, ax: Any, fig: Any, named: list[HostStats], slow: list[HostStats]
) -> None:
    """The title, legend and slow-host panel both per-host pictures share."""
    ax.set_title(
        f"{g.kernel} per host: {fmt.plural(len(g.hosts), 'host')} x {_runs_per_host(g)} runs, "
        f"{len(slow)} slow{_where(g)}{_tag(report)}"
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5)
    _side_panel(ax, fig, _slow_rows(g, named, slow), "slow hosts vs fleet:", SLOW_COLOUR)


def _hosts_done(g: FleetGroup, fig: Any, title: str, caption: str) -> Picture:
    """The per-host picture of ``g`` (either kind: one column a host, or the ECDF of a big
    fleet's host medians) as one file, ``hosts-SLUG.png``, titled ``KERNEL: title``."""
    return Picture(
        filename=f"hosts-{g.slug}.png",
        title=f"{g.kernel}: {title}{_where(g)}",
        caption=caption,
        kind="hosts",
        png=_png(fig),
    )


def host_medians_picture(report: Report, g: FleetGroup) -> Picture:
    """The per-host picture of a big fleet (more than :data:`MAX_HOST_COLUMNS` hosts): the
    ECDF of the host medians (one point a host), the fleet median and the slow threshold as
    vertical lines, the slow hosts red and named. Its size does not grow with the hosts."""
    plt = matplotlib_pyplot()
    n = len(g.hosts)
    order = sorted(g.hosts, key=lambda h: h.summary.median)
    points = {h.host: (h.summary.median, (i + 1) * 100.0 / n) for i, h in enumerate(order)}
    fig, ax = plt.subplots(figsize=(11, 5.6))
    xs = [h.summary.median for h in order]
    ys = [points[h.host][1] for h in order]
    ax.step([xs[0], *xs], [0.0, *ys], where="post", color=NORMAL_COLOUR, lw=1.8,
            label="host medians")  # fmt: skip
    slow = [h for h in g.hosts if h.slow]
    if slow:
        ax.scatter([points[h.host][0] for h in slow], [points[h.host][1] for h in slow],
                   s=30, color=SLOW_COLOUR, zorder=3, label="slow host")  # fmt: skip
    ax.axvline(g.fleet_median, color=FLEET_COLOUR, lw=1.5,
               label=f"fleet median\n{fmt.value(g.fleet_median)} {g.unit}")  # fmt: skip
    if g.threshold is not None:
        ax.axvline(g.threshold, color=SLOW_COLOUR, lw=1.2, ls="--",
                   label=f"slow threshold\n{fmt.value(g.threshold)} {g.unit}")  # fmt: skip
    named = sorted(slow, key=lambda h: -h.worse_pct)[:MAX_NAMED_SLOW]
    ax.set_ylim(0, 102)
    ax.set_ylabel("hosts whose median is at or below this value [%]")
    arrow = "higher is better →" if g.higher_is_better else "← lower is better"
    ax.set_xlabel(f"host median of {metric_label(g.kernel, g.metric)} [{g.unit}]   ({arrow})")
    ax.xaxis.set_major_formatter(_value_formatter())
    _hosts_frame(report, g, ax, fig, named, slow)
    return _hosts_done(
        g,
        fig,
        "host medians",
        f"{n} hosts, too many for a column each: the curve is the distribution of the host "
        "medians (a point (x, y) means y % of hosts have a median of at most x). Green: "
        "fleet median; dashed red: the slow threshold. Slow hosts are red dots, named in the "
        "box with how far their median is from the fleet median (all of them in the tables).",
    )


def hosts_picture(report: Report, g: FleetGroup) -> Picture:
    if len(g.hosts) > MAX_HOST_COLUMNS:
        return host_medians_picture(report, g)
    plt = matplotlib_pyplot()
    hosts = list(reversed(g.hosts))  # best first, worst (slow) at the right
    n = len(hosts)
    many = n > MAX_TICK_HOSTS
    fig, ax = plt.subplots(figsize=(max(11.0, min(16.0, 5 + 0.22 * n)), 5.6))
    _host_runs(ax, hosts, many)
    _fleet_lines(ax, report, g)
    slow = [h for h in hosts if h.slow]
    named = sorted(slow, key=lambda h: -h.worse_pct)[:MAX_NAMED_SLOW]
    _host_axis(ax, g, hosts, named, many)
    ax.set_xlim(-1, n + (n * 0.01 if many else 0.0))
    better = "higher" if g.higher_is_better else "lower"
    ax.set_ylabel(f"{metric_label(g.kernel, g.metric)} [{g.unit}]  ({better} is better)")
    ax.yaxis.set_major_formatter(_value_formatter())
    _hosts_frame(report, g, ax, fig, named, slow)
    lone = " One host only: nothing to compare it with, so no slow threshold."
    return _hosts_done(
        g,
        fig,
        "spread per host",
        "Each column is one host: dots are its runs, the bar its median. Hosts are sorted "
        "by median with the worst at the right. Green: fleet median (median of host "
        "medians); dashed red: the slow threshold. Slow hosts are red and listed with how "
        "far their median is from the fleet median." + (lone if g.threshold is None else ""),
    )


def _kind_label(kind: str, axis: str) -> str:
    """Axis label of a matrix. NUMA x NUMA matrices (latency --matrix/--bw-matrix) have the
    node the threads run on as rows and the node the memory is on as columns."""
    if kind == "numa":
        return f"{'threads' if axis == 'row' else 'memory'} on NUMA node (OS index)"
    if kind == "cpu":
        return "CPU (PU, OS index)"
    return kind or "index"


def matrix_picture(report: Report, m: MatrixGroup) -> Picture:
    plt = matplotlib_pyplot()
    import numpy as np

    fleet = f"fleet: median of {fmt.plural(m.runs, 'run')} on {fmt.plural(m.hosts, 'host')}"
    panels = [(fleet, m.median.grid())]
    if m.worst_host is not None and m.worst_host_median is not None:
        worst = f"slowest host by {m.kernel} headline: {m.worst_host}"
        panels.append((worst, m.worst_host_median.grid()))
    arrays = [np.asarray(p[1], dtype=float) for p in panels]
    finite = np.concatenate([a[np.isfinite(a)] for a in arrays]) if arrays else np.array([])
    vmin = float(finite.min()) if finite.size else 0.0
    vmax = float(finite.max()) if finite.size else 1.0
    cmap = plt.get_cmap("YlOrRd" if m.lower_is_better else "YlOrRd_r").with_extremes(bad="#dddddd")
    # one value (e.g. the two off-diagonal cells of a 2 x 2 c2c): nothing is better or worse
    flat = fmt.value(vmin) == fmt.value(vmax)
    if flat:
        from matplotlib.colors import ListedColormap

        cmap = ListedColormap([FLAT_COLOUR]).with_extremes(bad="#dddddd")
        vmax = vmin + 1.0
    nr, nc = len(m.rows), len(m.cols)
    cell = 0.3 if nr * nc > 64 else 0.9
    w = max(5.0, nc * cell + 2.2)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(w * len(panels) + 1.2, max(4.2, nr * cell + 1.8)),
        layout="constrained",
    )
    axes = np.atleast_1d(axes)
    im = None
    for ax, (subtitle, _), arr in zip(axes, panels, arrays, strict=True):
        im = ax.imshow(np.ma.masked_invalid(arr), cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_xticks(range(nc))
        ax.set_xticklabels(m.cols, fontsize=8, rotation=90 if nc > 12 else 0)
        ax.set_yticks(range(nr))
        ax.set_yticklabels(m.rows, fontsize=8)
        ax.set_xlabel(_kind_label(m.col_kind, "col"))
        ax.set_ylabel(_kind_label(m.row_kind, "row"))
        ax.set_title(subtitle, fontsize=10)
        ax.grid(False)
        if nr * nc <= MAX_ANNOTATED_CELLS:
            mid = (vmin + vmax) / 2
            for i in range(nr):
                for j in range(nc):
                    v = arr[i, j]
                    dark = not flat and ((v > mid) if m.lower_is_better else (v < mid))
                    ax.text(
                        j,
                        i,
                        "–" if not math.isfinite(v) else fmt.value(float(v)),
                        ha="center",
                        va="center",
                        fontsize=6.5 if nc > 8 else 9,
                        color="white" if math.isfinite(v) and dark else "black",
                    )
    better = "lower" if m.lower_is_better else "higher"
    if flat:
        fig.supxlabel(
            f"every measured cell is {fmt.value(vmin)} {m.unit}: one colour, no better or worse",
            fontsize=10,
        )
    else:
        cbar = fig.colorbar(im, ax=list(axes), shrink=0.85, format=_value_formatter())
        cbar.set_label(f"{m.name} [{m.unit}] ({better} is better; red = worse)")
    name = kernel_and(m.kernel, m.name)
    fig.suptitle(f"{name} [{m.unit}]{_where(m)}{_tag(report)}", fontsize=12)
    slug = f"{m.kernel}-{m.name}-{m.layout or 'nolayout'}"
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in slug)
    slug += "-" + pages_slug(m.page_kib, m.page_fallback)
    return Picture(
        filename=f"matrix-{slug}.png",
        title=f"{name} [{m.unit}]{_where(m)}",
        caption=(
            f"Row = {_kind_label(m.row_kind, 'row')}, column = {_kind_label(m.col_kind, 'col')}; "
            "each cell is "
            f"the median over runs; grey = not measured (e.g. a CPU with itself). "
            f"{better.capitalize()} is better; the colour scale is shared by the panels "
            "so a slow host's hot spots stand out against the fleet."
        ),
        kind="matrix",
        png=_png(fig),
    )


def _layout(layout: str | None) -> str:
    return f" (layout {layout})" if layout else ""


def pages_picture(report: Report, pc: PageComparison) -> Picture:
    plt = matplotlib_pyplot()
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(7.0, 2.6 * len(pc.rows) + 2), 5.2))
    data = [list(r.values) for r in pc.rows]
    labels = [r.pages for r in pc.rows]
    ax.boxplot(data, widths=0.5, showfliers=False, medianprops={"color": "black", "lw": 2})
    rng = np.random.default_rng(0)
    for i, vals in enumerate(data, start=1):
        jitter = rng.uniform(-0.15, 0.15, len(vals))
        ax.scatter(i + jitter, vals, s=14, color=NORMAL_COLOUR, alpha=0.6, lw=0)
    ref = pc.reference
    for i, r in enumerate(pc.rows, start=1):
        txt = f"median {fmt.value(r.fleet_median)}"
        if r is not pc.rows[0]:
            txt += f"\n{fmt.pct(r.better_pct, True)} vs {ref}"
        ax.annotate(
            txt,
            xy=(i, r.fleet_median),
            xytext=(36, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": GREY, "alpha": 0.9},
        )
    ax.set_xticks(range(1, len(labels) + 1))
    ax.set_xticklabels(labels)
    ax.set_xlabel("page size backing the kernel's memory (pages.kib)")
    arrow = "higher is better" if pc.higher_is_better else "lower is better"
    ax.set_ylabel(f"{metric_label(pc.kernel, pc.metric)} [{pc.unit}],\nmedian per host ({arrow})")
    ax.yaxis.set_major_formatter(_value_formatter())
    ax.set_title(f"{pc.kernel} by page size{_layout(pc.layout)}: one dot per host{_tag(report)}")
    kernel = "".join(c if c.isalnum() else "_" for c in pc.kernel)
    lay = "".join(c if c.isalnum() or c in "-_" else "_" for c in (pc.layout or "nolayout"))
    return Picture(
        filename=f"pages-{kernel}-{lay}.png",
        title=f"{pc.kernel}: page sizes compared{_layout(pc.layout)}",
        caption=(
            f"Each dot is one host's median on that page size; boxes span the middle half of "
            f"the hosts. Percentages compare the fleet medians against {ref} pages "
            "(positive = better)."
        ),
        kind="pages",
        png=_png(fig),
    )
