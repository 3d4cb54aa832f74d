"""The pictures of the report's causes (:mod:`topobind.report.cause_views`): the ECDF of a
signal a slow host's cause names, beside the figure's ECDF, and McCalpin's scatter of each
run's figure against its L2 lines in. Sizes do not grow with the fleet: an ECDF is drawn
through at most :data:`MAX_ECDF_STEPS` points, a scatter holds at most
:data:`topobind.report.cause_views.MAX_POINTS` runs. Each :class:`Picture` carries what it
drew in ``data`` (the tests read it, not the pixels).
"""

from __future__ import annotations

from topobind.measure import causes
from topobind.report import fmt
from topobind.report.analysis import FleetGroup, Report, metric_label, where_text
from topobind.report.cause_views import MAX_POINTS, ScatterView, SignalView
from topobind.report.charts import (
    GREY,
    NORMAL_COLOUR,
    SLOW_COLOUR,
    _png,
    _tag,
    _value_formatter,
    matplotlib_pyplot,
)
from topobind.report.picture import Picture

MAX_ECDF_STEPS = 1000  # points an ECDF is drawn through (the fleet's quantiles)
MAX_NAMED = 8  # hosts named in a picture's box


def _where(g: FleetGroup) -> str:
    text = where_text(g.layout, g.page_kib, g.page_fallback)
    return f" ({text})" if text else ""


def _share(key: str) -> bool:
    return "%" in causes.BY_KEY[key].text


def ecdf_points(values: tuple[float, ...]) -> list[tuple[float, float]]:
    """(value, % of runs at or below it), through at most MAX_ECDF_STEPS quantiles."""
    xs = sorted(values)
    n = len(xs)
    step = max(1, -(-n // MAX_ECDF_STEPS))
    idx = sorted({*range(step - 1, n, step), n - 1})
    return [(xs[i], (i + 1) * 100.0 / n) for i in idx]


def signal_label(key: str) -> str:
    sig = causes.BY_KEY[key]
    unit = "share" if _share(key) else "a second" if sig.rate else "a run"
    return f"{key} ({unit}; higher is {'worse' if sig.higher_is_worse else 'better'})"


def signal_picture(report: Report, v: SignalView) -> Picture:
    plt = matplotlib_pyplot()
    g = report.groups[v.group]
    pts = ecdf_points(v.values)
    fig, ax = plt.subplots(figsize=(11, 4.6))
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    ax.step([xs[0], *xs], [0.0, *ys], where="post", color=NORMAL_COLOUR, lw=2,
            label=f"all {fmt.count(len(v.values))} runs")  # fmt: skip
    ax.plot(v.marked, [1.5] * len(v.marked), "|", color=SLOW_COLOUR, ms=14, mew=2,
            label=f"runs of {fmt.plural(len(v.hosts), 'slow host')} it names")  # fmt: skip
    ax.set_ylim(0, 104)
    ax.set_ylabel("runs at or below this value [%]")
    ax.set_xlabel(signal_label(v.signal))
    if _share(v.signal):
        from matplotlib.ticker import PercentFormatter

        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    else:
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:.3g}"))
    named = list(v.hosts[:MAX_NAMED]) + ([f"+{len(v.hosts) - MAX_NAMED} more (tables)"]
                                         if len(v.hosts) > MAX_NAMED else [])  # fmt: skip
    ax.text(1.02, 0.0, f"cause: {v.cause}\n" + "\n".join(named), transform=ax.transAxes,
            va="bottom", ha="left", fontsize=9, family="monospace", color=SLOW_COLOUR,
            bbox={"boxstyle": "round,pad=0.4", "fc": "white", "ec": SLOW_COLOUR})  # fmt: skip
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    ax.set_title(f"{g.kernel}: {v.signal} of every run, the cause {v.cause!r}{_where(g)}"
                 f"{_tag(report)}", pad=12)  # fmt: skip
    return Picture(
        filename=f"signal-{g.slug}-{v.signal}.png",
        title=f"{g.kernel}: {v.signal}, the signal of cause {v.cause}{_where(g)}",
        caption=(
            f"Empirical CDF of {v.signal} over the group's runs (the evidence section), beside "
            f"the figure's ECDF: red ticks are the runs of the slow hosts whose cause names "
            f"it ({', '.join(v.hosts[:MAX_NAMED])}). A cause is named only when the host's "
            "runs lie outside the fleet's by the noise rule that judges the figures."
        ),
        kind="signal",
        png=_png(fig),
        data={
            "group": g.slug,
            "signal": v.signal,
            "cause": v.cause,
            "hosts": list(v.hosts),
            "runs": len(v.values),
            "marked": list(v.marked),
            "ecdf": pts,
        },
    )


def scatter_picture(report: Report, v: ScatterView) -> Picture:
    plt = matplotlib_pyplot()
    g = report.groups[v.group]
    fig, ax = plt.subplots(figsize=(11, 5.2))
    fast = [i for i, s in enumerate(v.slow) if not s]
    slow = [i for i, s in enumerate(v.slow) if s]
    dot = 6 if len(v.x) > 2000 else 16
    ax.scatter([v.x[i] for i in fast], [v.y[i] for i in fast], s=dot, color=NORMAL_COLOUR,
               alpha=0.45, lw=0, label="run")  # fmt: skip
    if slow:
        ax.scatter([v.x[i] for i in slow], [v.y[i] for i in slow], s=dot * 1.8,
                   color=SLOW_COLOUR, alpha=0.85, lw=0, label="run of a slow host")  # fmt: skip
    ax.axhline(g.fleet_median, color=GREY, ls="--", lw=1, label="fleet median")
    what = "L2 lines in" if v.counter == "l2_lines_in" else "DRAM bytes (read + write)"
    ax.set_xlabel(f"{what} per {v.per}   (evidence.counters; more is more traffic)")
    arrow = "higher is better" if g.higher_is_better else "lower is better"
    ax.set_ylabel(f"{metric_label(g.kernel, g.metric)} [{g.unit}] ({arrow})")
    ax.xaxis.set_major_formatter(_value_formatter())
    ax.yaxis.set_major_formatter(_value_formatter())
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    thinned = (f"; {fmt.count(len(v.x))} of {fmt.count(v.runs)} runs drawn (every slow "
               "host's)" if len(v.x) < v.runs else "")  # fmt: skip
    ax.set_title(f"{g.kernel}: each run's figure against its {what} (McCalpin){_where(g)}"
                 f"{_tag(report)}", pad=12)  # fmt: skip
    return Picture(
        filename=f"scatter-{g.slug}.png",
        title=f"{g.kernel}: figure against {what} per {v.per}{_where(g)}",
        caption=(
            f"Each dot is one run: its {metric_label(g.kernel, g.metric)} against its {what} "
            f"per {v.per}, {fmt.plural(v.runs, 'run')} on {fmt.plural(v.hosts, 'host')}"
            f"{thinned}; slow hosts in red. McCalpin's study of 500 Xeon nodes found the slow "
            "runs at 1.5-2x the L2 fills of the fast ones: red dots to the right of the cloud "
            "are that signature (memory traffic), red dots inside it are slow for another "
            f"reason. At most {fmt.count(MAX_POINTS)} runs are drawn."
        ),
        kind="scatter",
        png=_png(fig),
        data={
            "group": g.slug,
            "counter": v.counter,
            "per": v.per,
            "runs": v.runs,
            "x": list(v.x),
            "y": list(v.y),
            "slow": list(v.slow),
        },
    )


def cause_pictures(report: Report, group: int) -> list[tuple[str, int]]:
    """The gallery's tasks for the cause pictures of ``group`` (drawn after its ECDF)."""
    cv = report.cause_views
    tasks = [("signal", i) for i, v in enumerate(cv.signals) if v.group == group]
    return tasks + [("scatter", i) for i, v in enumerate(cv.scatters) if v.group == group]


def draw(report: Report, kind: str, i: int) -> Picture | None:
    """The cause picture of a gallery task, None for another kind."""
    if kind == "signal":
        return signal_picture(report, report.cause_views.signals[i])
    if kind == "scatter":
        return scatter_picture(report, report.cause_views.scatters[i])
    return None
