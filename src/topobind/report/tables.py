"""The report's tables as one model each, rendered as text, markdown and HTML.

A :class:`Table` holds headers, rows of cell strings (with a flag for the rows of slow
hosts) and which columns are numbers (right-aligned). The slow-host and per-host tables are
built once here and drawn by every output (:mod:`topobind.report.text`,
:mod:`topobind.report.html`), so the three can never disagree.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass

from topobind.measure import stats
from topobind.report import fmt
from topobind.report.analysis import FleetGroup, HostStats, Report, where_text


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    slow: bool = False


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[Row, ...]
    right: frozenset[int]  # columns of numbers: right-aligned
    code: frozenset[int] = frozenset()  # columns shown as code in markdown (host names)

    def text(self) -> list[str]:
        """Aligned columns, two spaces apart, indented by two."""
        widths = [len(h) for h in self.headers]
        for r in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, r.cells, strict=True)]

        def line(cells: Sequence[str]) -> str:
            out = [
                c.rjust(w) if i in self.right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ]
            return "  " + "  ".join(out).rstrip()

        return [line(self.headers), *[line(r.cells) for r in self.rows]]

    def markdown(self) -> list[str]:
        def cell(i: int, c: str) -> str:
            return f"`{c}`" if i in self.code else c

        align = ["--:" if i in self.right else "---" for i in range(len(self.headers))]
        return [
            "| " + " | ".join(self.headers) + " |",
            "|" + "|".join(align) + "|",
            *[
                "| " + " | ".join(cell(i, c) for i, c in enumerate(r.cells)) + " |"
                for r in self.rows
            ],
        ]

    def html(self) -> str:
        out = ["<table><thead><tr>", *[f"<th>{escape(h)}</th>" for h in self.headers]]
        out.append("</tr></thead><tbody>")
        for r in self.rows:
            out.append('<tr class="slow">' if r.slow else "<tr>")
            for i, c in enumerate(r.cells):
                out.append(
                    f'<td class="n">{escape(c)}</td>'
                    if i in self.right
                    else f"<td>{escape(c)}</td>"
                )
            out.append("</tr>")
        out.append("</tbody></table>")
        return "".join(out)


def escape(x: object) -> str:
    """Text for HTML (quotes too)."""
    return html.escape(str(x), quote=True)


# ----------------------------------------------------------------------------- words
def signed_worse(g: FleetGroup, h: HostStats) -> str:
    """'-11.5% below' style figure for humans: the sign follows the value, not 'worse'."""
    return fmt.pct(-h.worse_pct if g.higher_is_better else h.worse_pct, True)


def status(h: HostStats) -> str:
    return "SLOW" if h.slow else "ok"


def median_ci(s: stats.Summary) -> str:
    ci = s.median_ci
    return "-" if ci is None else f"{fmt.value(ci.low)}..{fmt.value(ci.high)}"


def where(layout: str | None, kib: int | None = None, fallback: str | None = None) -> str:
    """`` (layout per-l3, 2 MiB pages)``; what the results did not record is left out."""
    text = where_text(layout, kib, fallback)
    return f" ({text})" if text else ""


def what(g: FleetGroup) -> str:
    stat = f" ({g.stat})" if g.stat else ""
    return f"{g.metric}{stat}"


def hosts_short(hosts: Sequence[str], limit: int = 100) -> str:
    """The hosts in Slurm's hostlist notation, natural order, about ``limit`` characters."""
    from topobind.topo.hostlist import shown

    return shown(hosts, limit)


def intro_lines(report: Report) -> list[str]:
    """What was read and used, and the slow-host rule (the head of every summary)."""
    o = report.options
    lines = [
        f"inputs: {', '.join(report.inputs)}: {fmt.plural(report.files, 'file')}, "
        f"{fmt.plural(report.documents, 'result')}",
        *left_out_lines(report),
        f"used: {fmt.plural(report.runs_used, 'run')} in {fmt.plural(len(report.groups), 'group')} "
        f"(kernel x layout x page size); {fmt.plural(report.no_headline, 'result')} without a "
        f'headline (whereami) skipped; {len(report.invalid)} invalid ("valid": false) left out',
        f"slow host: median worse than the fleet median (median of host medians) by more than "
        f"{o.slow_mads:g} MADs and more than {o.slow_pct:g}%; warm-up runs dropped per host: "
        f"{o.warmup}",
    ]
    if report.generated:
        lines.insert(
            0,
            f"GENERATED DATA: {fmt.count(report.generated)} of {fmt.count(report.documents)} "
            "results are synthetic (params.generated=true, tests/fleetgen.py): "
            "nothing was measured",
        )
    return lines


def left_out_lines(report: Report, examples: int = 2) -> list[str]:
    """What was read and left out, in counts (a ReFrame output directory holds thousands of
    files that are not results): the tiers not judged, the files that are not results by
    name, a few examples; report.json lists every file."""
    out = [
        f"not judged ({tier} tier): {fmt.plural(n, 'result')}: the {tier} tier measures no "
        "performance, its figures are not compared"
        for tier, n in report.not_judged.items()
    ]
    if report.skipped:
        names: dict[str, int] = {}
        for f, _why in report.skipped:
            name = os.path.basename(f)
            names[name] = names.get(name, 0) + 1
        top = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{n} {fmt.count(c)}" for n, c in top[:4])
        more = f", {fmt.count(len(top) - 4)} other names" if len(top) > 4 else ""
        out.append(f"left out: {fmt.plural(len(report.skipped), 'file')} that are not results "
                   f"({shown}{more}; report.json lists them all)")  # fmt: skip
        out += [f"  e.g. {f}: {why}" for f, why in report.skipped[:examples]]
    return out


# ----------------------------------------------------------------------------- tables
def slow_hosts_table(report: Report) -> Table:
    """Every slow (host, group), the worst first."""
    rows = tuple(
        Row(
            (
                h.host,
                g.kernel,
                g.layout or "-",
                g.pages,
                f"{fmt.value(h.summary.median)} {g.unit}",
                f"{fmt.value(g.fleet_median)} {g.unit}",
                signed_worse(g, h),
                fmt.mads(h.mads),
                *strength(h),
                h.cause or "-",
            ),
            slow=True,
        )
        for g, h in report.slow
    )
    headers = ("host", "kernel", "layout", "pages", "host median", "fleet median", "vs fleet")
    return Table(
        (*headers, "MADs", "runs", "CV", "confidence", "strength", "cause"),
        rows,
        frozenset({4, 5, 6, 7, 8, 9, 10}),
        code=frozenset({0}),
    )


def strength(h: HostStats) -> tuple[str, str, str, str]:
    """(runs, CV, sign-test confidence, weak/strong) of a slow host's verdict."""
    return (
        str(h.summary.n),
        fmt.frac_pct(h.summary.cv),
        f"{100 * h.confidence:.0f}%",
        "weak" if h.weak else "strong",
    )


def host_table(report: Report, g: FleetGroup, hosts: Sequence[HostStats]) -> Table:
    """One row per host of a group (``hosts``, worst first): its runs and how it compares."""
    warm = report.options.warmup > 0
    headers = ["host", "runs", "median", "95% CI of median", "best", "worst", "CV"]
    headers += ["max slowdown", "vs fleet", "MADs", "status"]
    if warm:
        headers.append("warm-up run(s)")
    rows = []
    for h in hosts:
        s = h.summary
        cells = [
            h.host, str(s.n), fmt.value(s.median), median_ci(s), fmt.value(s.best),
            fmt.value(s.worst), fmt.frac_pct(s.cv), fmt.frac_pct(s.max_slowdown),
            signed_worse(g, h), fmt.mads(h.mads), status(h),
        ]  # fmt: skip
        if warm:
            cells.append(", ".join(fmt.value(r.headline_value) for r in h.warmup_runs) or "-")
        rows.append(Row(tuple(cells), slow=h.slow))
    return Table(tuple(headers), tuple(rows), frozenset({1, 2, 4, 5, 6, 7, 8, 9}))
