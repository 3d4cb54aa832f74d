"""The report as text (summary.txt, printed by ``topobind report``) and as markdown
(summary.md, for a CI comment)."""

from __future__ import annotations

from collections.abc import Sequence

from topobind.report import fmt
from topobind.report.analysis import FleetGroup, Report, kernel_and
from topobind.report.picture import Picture
from topobind.report.tables import (
    Row,
    Table,
    host_table,
    hosts_short,
    intro_lines,
    slow_hosts_table,
    what,
    where,
)
from topobind.topo.topology import format_list

TEXT_HOST_ROWS = 60  # up to this many hosts per group, the text lists every host
TEXT_WORST_ROWS = 20  # beyond it, the worst ones
TEXT_INVALID_ROWS = 20


# ----------------------------------------------------------------------------- text
def text_summary(report: Report, pictures: Sequence[Picture] = ()) -> str:
    out = ["topobind fleet report", "=" * 21, *intro_lines(report), ""]
    out += _slow_lines(report)
    out.append("")
    out += _fleet_lines(report)
    if report.pages:
        out += ["", *_page_lines(report)]
    if report.matrices:
        out += ["", *_matrix_lines(report)]
    out += ["", *cause_lines(report, pictures)]
    for g in report.groups:
        out += ["", *_host_section(report, g)]
    if report.layouts:
        out += ["", *_layout_lines(report, pictures)]
    if report.invalid:
        out += ["", *_invalid_lines(report)]
    if pictures:
        out += ["", f"pictures: {', '.join(p.filename for p in pictures)}"]
    return "\n".join(map(fmt.one_line, out)) + "\n"


def _slow_lines(report: Report) -> list[str]:
    if not report.slow:
        return ["SLOW HOSTS: none"]
    head = (
        f"SLOW HOSTS: {len(report.slow_host_names)} host(s), {len(report.slow)} finding(s), "
        "worst first"
    )
    return [head, *slow_hosts_table(report).text()]


def _fleet_lines(report: Report) -> list[str]:
    rows = []
    for g in report.groups:
        s = g.all_runs
        rows.append(
            (
                g.kernel, g.layout or "-", g.pages, what(g), g.unit,
                "higher" if g.higher_is_better else "lower", str(len(g.hosts)), str(s.n),
                fmt.value(g.fleet_median), fmt.value(g.fleet_mad), fmt.value(s.p50),
                fmt.value(s.p90), fmt.value(s.p99), fmt.value(s.best), fmt.value(s.worst),
                fmt.frac_pct(s.cv), fmt.frac_pct(s.max_slowdown), str(len(g.slow_hosts)),
            )
        )  # fmt: skip
    headers = (
        "kernel", "layout", "pages", "metric", "unit", "better", "hosts", "runs",
        "median", "MAD", "p50", "p90", "p99", "best", "worst", "CV", "max slowdown", "slow",
    )  # fmt: skip
    table = Table(headers, tuple(Row(r) for r in rows), frozenset(range(6, 18)))
    return [
        "FLEET: per kernel, layout and page size (fleet median = median of host medians; "
        "MAD scaled x1.4826; percentiles, CV and max slowdown over all runs)",
        *table.text(),
    ]


def _page_lines(report: Report) -> list[str]:
    out = ["PAGE SIZES: fleet medians by page size (vs the smallest page size; + = better)"]
    for pc in report.pages:
        parts = []
        for r in pc.rows:
            rel = "ref" if r is pc.rows[0] else fmt.pct(r.better_pct, True)
            parts.append(f"{r.pages} {fmt.value(r.fleet_median)} ({rel})")
        out.append(
            f"  {kernel_and(pc.kernel, pc.metric)} [{pc.unit}]{where(pc.layout)}: "
            + " | ".join(parts)
        )
    return out


def _matrix_lines(report: Report) -> list[str]:
    out = ["MATRICES (heatmaps in index.html)"]
    for m in report.matrices:
        worst = f"; slowest host {m.worst_host} shown beside" if m.worst_host else ""
        out.append(
            f"  {kernel_and(m.kernel, m.name)} [{m.unit}] {len(m.rows)}x{len(m.cols)} "
            f"{m.row_kind or '?'} x {m.col_kind or '?'}: median of {m.runs} runs on "
            f"{m.hosts} hosts{where(m.layout, m.page_kib, m.page_fallback)}{worst}"
        )
    return out


def cause_lines(report: Report, pictures: Sequence[Picture] = ()) -> list[str]:
    """CAUSES IN PICTURES: each signal a slow host's cause names (its ECDF beside the
    figure's), McCalpin's scatter of each group with counters, or why there is none."""
    cv = report.cause_views
    files = {p.filename for p in pictures}
    out = ["CAUSES IN PICTURES (index.html): the signals the slow hosts' causes name, and "
           "each run's figure against its L2 lines in (McCalpin)"]  # fmt: skip
    for v in cv.signals:
        g = report.groups[v.group]
        pic = f"signal-{g.slug}-{v.signal}.png"
        out.append(f"  {g.kernel}{where(g.layout, g.page_kib, g.page_fallback)}: {v.signal} "
                   f"({v.cause}) of {fmt.plural(len(v.values), 'run')}, "
                   f"{hosts_short(list(v.hosts))} marked -> "
                   f"{pic if pic in files else '(no picture)'}")  # fmt: skip
    for s in cv.scatters:
        g = report.groups[s.group]
        pic = f"scatter-{g.slug}.png"
        out.append(f"  {g.kernel}{where(g.layout, g.page_kib, g.page_fallback)}: figure against "
                   f"{s.counter} per {s.per}, {fmt.plural(s.runs, 'run')} -> "
                   f"{pic if pic in files else '(no picture)'}")  # fmt: skip
    if cv.no_counters:
        out.append(f"  {cv.no_counters}")
    if not cv.signals:
        out.append("  no slow host's cause names a signal: no signal picture")
    return out


def _invalid_lines(report: Report) -> list[str]:
    out = [f"INVALID RESULTS left out ({len(report.invalid)}):"]
    for bad in report.invalid[:TEXT_INVALID_ROWS]:
        why = bad.validation or "valid=false"
        out.append(f"  {bad.source}: {bad.kernel} on {bad.host}: {why}")
    if len(report.invalid) > TEXT_INVALID_ROWS:
        out.append(f"  ... {len(report.invalid) - TEXT_INVALID_ROWS} more in report.json")
    return out


def _layout_lines(report: Report, pictures: Sequence[Picture]) -> list[str]:
    """LAYOUTS: each layout of the results, drawn from its recorded placement, or why not."""
    lay = report.layouts
    out = [
        "LAYOUTS: where the threads of each layout ran (the results' placement), drawn on the "
        "node topology (index.html, layout-*.png)"
    ]
    files = {p.filename for p in pictures}
    for s in lay.seen:
        variant = f" (placement {s.variant} of {s.variants})" if s.variants > 1 else ""
        shared = f"; PUs {format_list(s.shared_pus)} ran several threads" if s.shared_pus else ""
        pic = s.filename if s.filename in files else "(no picture)"
        out.append(
            f"  {s.what}{variant}: {fmt.plural(len(s.hosts), 'host')} "
            f"({hosts_short(s.hosts)}), kernels {', '.join(s.kernels)}; topology: "
            f"{s.topology}{shared} -> {pic}"
        )
    for n in lay.not_drawn:
        out.append(
            f"  not drawn: {n.what} on {fmt.plural(len(n.hosts), 'host')} "
            f"({hosts_short(n.hosts)}): {n.reason}"
        )
    return out


def _host_section(report: Report, g: FleetGroup) -> list[str]:
    n = len(g.hosts)
    shown = g.hosts if n <= TEXT_HOST_ROWS else g.hosts[:TEXT_WORST_ROWS]
    place = where(g.layout, g.page_kib, g.page_fallback)
    title = f"PER HOST: {g.kernel} {what(g)} [{g.unit}]{place}, worst first"
    if len(shown) < n:
        title += f": the {len(shown)} worst of {n} hosts"
    lines = [title, *host_table(report, g, shown).text()]
    if len(shown) < n:
        lines.append(f"  ... {n - len(shown)} more hosts in report.json and index.html")
    if g.only_warmup:
        lines.append(f"  hosts with only warm-up runs (left out): {', '.join(g.only_warmup)}")
    return lines


# ----------------------------------------------------------------------------- markdown
def markdown_summary(report: Report) -> str:
    o = report.options
    out = ["### topobind fleet report", ""]
    if report.generated:
        out += [
            f"> **Generated data**: {report.generated} of {report.documents} results are "
            "synthetic (tests/fleetgen.py); nothing was measured.",
            "",
        ]
    out.append(
        f"{fmt.count(report.runs_used)} runs from {fmt.count(report.files)} files, "
        f"{len(report.groups)} groups (kernel x layout x page size). Slow host: median worse "
        f"than the fleet median by more than {o.slow_mads:g} MADs and {o.slow_pct:g}%."
    )
    for tier, n in report.not_judged.items():
        out.append(f"Not judged ({tier} tier, which measures no performance): "
                   f"{fmt.count(n)} result(s).")  # fmt: skip
    out.append("")
    if report.slow:
        out.append(f"**{len(report.slow_host_names)} slow host(s)**, worst first:")
        out.append("")
        out += slow_hosts_table(report).markdown()
    else:
        out.append("**No slow hosts.**")
    out += ["", *_markdown_groups(report)]
    out += _markdown_causes(report)
    if report.layouts:
        drawn = ", ".join(f"`{s.what}`" for s in report.layouts.seen) or "none"
        out += ["", f"Layouts drawn from the recorded placement (index.html): {drawn}."]
        if report.layouts.not_drawn:
            out.append(
                f"{len(report.layouts.not_drawn)} layout(s) not drawn (see summary.txt): "
                + "; ".join(f"`{n.what}`: {n.reason}" for n in report.layouts.not_drawn[:3])
            )
    if report.invalid:
        out += ["", f"{len(report.invalid)} invalid result(s) left out (see report.json)."]
    return "\n".join(map(fmt.one_line, out)) + "\n"


def _markdown_causes(report: Report) -> list[str]:
    cv = report.cause_views
    items = [f"`{report.groups[v.group].kernel}` {v.signal} ({v.cause}: "
             f"{hosts_short(list(v.hosts))})" for v in cv.signals]  # fmt: skip
    items += [f"`{report.groups[s.group].kernel}` figure against {s.counter} per {s.per}"
              for s in cv.scatters]  # fmt: skip
    items += [cv.no_counters] if cv.no_counters else []
    return ["", "Causes in pictures (index.html): " + "; ".join(items) + "."] if items else []


def _markdown_groups(report: Report) -> list[str]:
    out = [
        "| kernel | layout | pages | metric | hosts | runs | fleet median | p90 | p99 | CV "
        "| slow |",
        "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for g in report.groups:
        s = g.all_runs
        out.append(
            f"| {g.kernel} | {g.layout or '-'} | {g.pages} | "
            f"{what(g)} [{g.unit}] | "
            f"{len(g.hosts)} | {s.n} | {fmt.value(g.fleet_median)} | {fmt.value(s.p90)} | "
            f"{fmt.value(s.p99)} | {fmt.frac_pct(s.cv)} | {len(g.slow_hosts)} |"
        )
    return out
