"""The report as text (summary.txt), markdown (CI comments), JSON (report.json) and HTML."""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from topobind import stats
from topobind.report import fmt
from topobind.report.analysis import FleetGroup, HostStats, Report, kernel_and, where_text
from topobind.report.picture import Picture
from topobind.topology import format_list

REPORT_SCHEMA = "topobind.report/1"
TEXT_HOST_ROWS = 60  # up to this many hosts per group, the text lists every host
TEXT_WORST_ROWS = 20  # beyond it, the worst ones
HTML_OPEN_HOSTS = 60  # per-host tables of up to this many hosts are shown unfolded


# ----------------------------------------------------------------------------- helpers
def _signed_worse(g: FleetGroup, h: HostStats) -> str:
    """'-11.5% below' style figure for humans: the sign follows the value, not 'worse'."""
    return fmt.pct(-h.worse_pct if g.higher_is_better else h.worse_pct, True)


def _status(h: HostStats) -> str:
    return "SLOW" if h.slow else "ok"


def _ci(s: stats.Summary) -> str:
    ci = s.median_ci
    return "-" if ci is None else f"{fmt.value(ci.low)}..{fmt.value(ci.high)}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths, strict=True)):
            out.append(c.rjust(w) if i in right else c.ljust(w))
        return "  " + "  ".join(out).rstrip()

    return [line(headers), *[line(r) for r in rows]]


def _in(layout: str | None, kib: int | None = None, fallback: str | None = None) -> str:
    """`` (layout per-l3, 2 MiB pages)``; what the results did not record is left out."""
    text = where_text(layout, kib, fallback)
    return f" ({text})" if text else ""


def _what(g: FleetGroup) -> str:
    stat = f" ({g.stat})" if g.stat else ""
    return f"{g.metric}{stat}"


def _intro(report: Report) -> list[str]:
    o = report.options
    lines = [
        f"inputs: {', '.join(report.inputs)}: {fmt.plural(report.files, 'file')}, "
        f"{fmt.plural(report.documents, 'result')}",
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


# ----------------------------------------------------------------------------- text
def text_summary(report: Report, pictures: Sequence[Picture] = ()) -> str:
    out = ["topobind fleet report", "=" * 21, *_intro(report), ""]
    slow = report.slow
    if slow:
        out.append(
            f"SLOW HOSTS: {len(report.slow_host_names)} host(s), {len(slow)} finding(s), "
            "worst first"
        )
        rows = [
            [
                h.host,
                g.kernel,
                g.layout or "-",
                g.pages,
                f"{fmt.value(h.summary.median)} {g.unit}",
                f"{fmt.value(g.fleet_median)} {g.unit}",
                _signed_worse(g, h),
                fmt.mads(h.mads),
            ]
            for g, h in slow
        ]
        out += _table(
            [
                "host",
                "kernel",
                "layout",
                "pages",
                "host median",
                "fleet median",
                "vs fleet",
                "MADs",
            ],
            rows,
            {4, 5, 6, 7},
        )
    else:
        out.append("SLOW HOSTS: none")
    out.append("")
    out.append(
        "FLEET: per kernel, layout and page size (fleet median = median of host medians; "
        "MAD scaled x1.4826; percentiles, CV and max slowdown over all runs)"
    )
    rows = []
    for g in report.groups:
        s = g.all_runs
        rows.append(
            [
                g.kernel,
                g.layout or "-",
                g.pages,
                _what(g),
                g.unit,
                "higher" if g.higher_is_better else "lower",
                str(len(g.hosts)),
                str(s.n),
                fmt.value(g.fleet_median),
                fmt.value(g.fleet_mad),
                fmt.value(s.p50),
                fmt.value(s.p90),
                fmt.value(s.p99),
                fmt.value(s.best),
                fmt.value(s.worst),
                fmt.frac_pct(s.cv),
                fmt.frac_pct(s.max_slowdown),
                str(len(g.slow_hosts)),
            ]
        )
    out += _table(
        [
            "kernel", "layout", "pages", "metric", "unit", "better", "hosts", "runs",
            "median", "MAD", "p50", "p90", "p99", "best", "worst", "CV", "max slowdown", "slow",
        ],
        rows,
        set(range(6, 18)),
    )  # fmt: skip
    if report.pages:
        out.append("")
        out.append("PAGE SIZES: fleet medians by page size (vs the smallest page size; + = better)")
        for pc in report.pages:
            parts = []
            for r in pc.rows:
                rel = "ref" if r is pc.rows[0] else fmt.pct(r.better_pct, True)
                parts.append(f"{r.pages} {fmt.value(r.fleet_median)} ({rel})")
            out.append(
                f"  {kernel_and(pc.kernel, pc.metric)} [{pc.unit}]{_in(pc.layout)}: "
                + " | ".join(parts)
            )
    if report.matrices:
        out.append("")
        out.append("MATRICES (heatmaps in index.html)")
        for m in report.matrices:
            worst = f"; slowest host {m.worst_host} shown beside" if m.worst_host else ""
            out.append(
                f"  {kernel_and(m.kernel, m.name)} [{m.unit}] {len(m.rows)}x{len(m.cols)} "
                f"{m.row_kind or '?'} x {m.col_kind or '?'}: median of {m.runs} runs on "
                f"{m.hosts} hosts{_in(m.layout, m.page_kib, m.page_fallback)}{worst}"
            )
    for g in report.groups:
        out.append("")
        out += _host_section(report, g)
    if report.layouts:
        out.append("")
        out += _layout_lines(report, pictures)
    if report.invalid:
        out.append("")
        out.append(f"INVALID RESULTS left out ({len(report.invalid)}):")
        for bad in report.invalid[:20]:
            why = bad.validation or "valid=false"
            out.append(f"  {bad.source}: {bad.kernel} on {bad.host}: {why}")
        if len(report.invalid) > 20:
            out.append(f"  ... {len(report.invalid) - 20} more in report.json")
    if pictures:
        out.append("")
        out.append(f"pictures: {', '.join(p.filename for p in pictures)}")
    return "\n".join(out) + "\n"


def _hosts_short(hosts: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(hosts[:limit])
    return shown + (f" and {len(hosts) - limit:,} more" if len(hosts) > limit else "")


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
            f"({_hosts_short(s.hosts)}), kernels {', '.join(s.kernels)}; topology: "
            f"{s.topology}{shared} -> {pic}"
        )
    for n in lay.not_drawn:
        out.append(
            f"  not drawn: {n.what} on {fmt.plural(len(n.hosts), 'host')} "
            f"({_hosts_short(n.hosts)}): {n.reason}"
        )
    return out


def _host_section(report: Report, g: FleetGroup) -> list[str]:
    n = len(g.hosts)
    shown = g.hosts if n <= TEXT_HOST_ROWS else g.hosts[:TEXT_WORST_ROWS]
    where = _in(g.layout, g.page_kib, g.page_fallback)
    title = f"PER HOST: {g.kernel} {_what(g)} [{g.unit}]{where}, worst first"
    if len(shown) < n:
        title += f": the {len(shown)} worst of {n} hosts"
    warm = report.options.warmup > 0
    headers = ["host", "runs", "median", "95% CI of median", "best", "worst", "CV"]
    headers += ["max slowdown", "vs fleet", "MADs", "status"]
    if warm:
        headers.append("warm-up run(s)")
    rows = []
    for h in shown:
        s = h.summary
        row = [
            h.host,
            str(s.n),
            fmt.value(s.median),
            _ci(s),
            fmt.value(s.best),
            fmt.value(s.worst),
            fmt.frac_pct(s.cv),
            fmt.frac_pct(s.max_slowdown),
            _signed_worse(g, h),
            fmt.mads(h.mads),
            _status(h),
        ]
        if warm:
            row.append(", ".join(fmt.value(r.value) for r in h.warmup_runs) or "-")
        rows.append(row)
    lines = [title, *_table(headers, rows, {1, 2, 4, 5, 6, 7, 8, 9})]
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
    out.append("")
    slow = report.slow
    if slow:
        out.append(f"**{len(report.slow_host_names)} slow host(s)**, worst first:")
        out.append("")
        out.append(
            "| host | kernel | layout | pages | host median | fleet median | vs fleet | MADs |"
        )
        out.append("|---|---|---|---|--:|--:|--:|--:|")
        for g, h in slow:
            out.append(
                f"| `{h.host}` | {g.kernel} | {g.layout or '-'} | {g.pages} | "
                f"{fmt.value(h.summary.median)} {g.unit} | {fmt.value(g.fleet_median)} {g.unit} | "
                f"{_signed_worse(g, h)} | {fmt.mads(h.mads)} |"
            )
    else:
        out.append("**No slow hosts.**")
    out += [
        "",
        "| kernel | layout | pages | metric | hosts | runs | fleet median | p90 | p99 | CV "
        "| slow |",
        "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for g in report.groups:
        s = g.all_runs
        out.append(
            f"| {g.kernel} | {g.layout or '-'} | {g.pages} | "
            f"{_what(g)} [{g.unit}] | "
            f"{len(g.hosts)} | {s.n} | {fmt.value(g.fleet_median)} | {fmt.value(s.p90)} | "
            f"{fmt.value(s.p99)} | {fmt.frac_pct(s.cv)} | {len(g.slow_hosts)} |"
        )
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
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- JSON
def _clean(x: Any) -> Any:
    """NaN/inf -> None, tuples -> lists (report.json is strict JSON)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    return x


def _summary_json(s: stats.Summary) -> dict[str, Any]:
    ci = s.median_ci
    return {
        "n": s.n,
        "median": s.median,
        "mean": s.mean,
        "min": s.min,
        "max": s.max,
        "best": s.best,
        "worst": s.worst,
        "stdev": s.stdev,
        "cv": s.cv,
        "mad": s.mad,
        "mad_scaled": s.mad_scaled,
        "p50": s.p50,
        "p90": s.p90,
        "p99": s.p99,
        "max_slowdown": s.max_slowdown,
        "frac_slower_5pct": s.frac_slower_5pct,
        "frac_slower_10pct": s.frac_slower_10pct,
        "median_ci": None
        if ci is None
        else {"low": ci.low, "high": ci.high, "confidence": ci.confidence, "coverage": ci.coverage},
    }


def _host_json(h: HostStats) -> dict[str, Any]:
    d = {"host": h.host, **_summary_json(h.summary)}
    d["runs"] = d.pop("n")
    d |= {
        "values": list(h.summary.values),
        "sources": [r.source for r in h.runs],
        "timestamps": [r.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ") for r in h.runs],
        "warmup": [
            {
                "value": r.value,
                "timestamp": r.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "source": r.source,
            }
            for r in h.warmup_runs
        ],
        "worse_pct": h.worse_pct,
        "slowdown_vs_fleet": h.slowdown,
        "mads": h.mads,
        "slow": h.slow,
    }
    return d


def report_json(report: Report, pictures: Sequence[Picture] = ()) -> dict[str, Any]:
    o = report.options
    picture_files = {p.filename for p in pictures}
    pics_by_slug: dict[str, list[str]] = {}
    for p in pictures:
        pics_by_slug.setdefault(p.filename.split("-", 1)[-1].removesuffix(".png"), []).append(
            p.filename
        )
    doc = {
        "schema": REPORT_SCHEMA,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "options": {
            "warmup": o.warmup,
            "slow_mads": o.slow_mads,
            "slow_pct": o.slow_pct,
            "confidence": o.confidence,
        },
        "inputs": {
            "paths": list(report.inputs),
            "files": report.files,
            "documents": report.documents,
            "runs_used": report.runs_used,
            "no_headline": report.no_headline,
            "generated": report.generated,
            "invalid": [
                {"source": r.source, "kernel": r.kernel, "host": r.host, "validation": r.validation}
                for r in report.invalid
            ],
        },
        "slow_found": bool(report.slow),
        "slow_host_names": report.slow_host_names,
        "slow_hosts": [
            {
                "host": h.host,
                "kernel": g.kernel,
                "layout": g.layout,
                "page_kib": g.page_kib,
                "metric": g.metric,
                "unit": g.unit,
                "higher_is_better": g.higher_is_better,
                "host_median": h.summary.median,
                "fleet_median": g.fleet_median,
                "worse_pct": h.worse_pct,
                "slowdown_vs_fleet": h.slowdown,
                "mads": h.mads,
            }
            for g, h in report.slow
        ],
        "groups": [
            {
                "kernel": g.kernel,
                "layout": g.layout,
                "page_kib": g.page_kib,
                "pages": g.pages,
                "metric": g.metric,
                "stat": g.stat,
                "unit": g.unit,
                "higher_is_better": g.higher_is_better,
                "hosts": len(g.hosts),
                "runs": g.all_runs.n,
                "fleet_median": g.fleet_median,
                "fleet_mad": g.fleet_mad,
                "slow_threshold": g.threshold,
                "all_runs": _summary_json(g.all_runs),
                "slow_hosts": [h.host for h in g.slow_hosts],
                "only_warmup": list(g.only_warmup),
                "pictures": pics_by_slug.get(g.slug, []),
                "per_host": [_host_json(h) for h in g.hosts],
            }
            for g in report.groups
        ],
        "page_sizes": [
            {
                "kernel": pc.kernel,
                "layout": pc.layout,
                "metric": pc.metric,
                "unit": pc.unit,
                "higher_is_better": pc.higher_is_better,
                "reference_kib": pc.reference_kib,
                "rows": [
                    {
                        "page_kib": r.page_kib,
                        "pages": r.pages,
                        "hosts": r.hosts,
                        "runs": r.runs,
                        "fleet_median": r.fleet_median,
                        "better_pct": r.better_pct,
                    }
                    for r in pc.rows
                ],
            }
            for pc in report.pages
        ],
        "matrices": [
            {
                "kernel": m.kernel,
                "layout": m.layout,
                "page_kib": m.page_kib,
                "name": m.name,
                "unit": m.unit,
                "lower_is_better": m.lower_is_better,
                "rows": list(m.rows),
                "cols": list(m.cols),
                "row_kind": m.row_kind,
                "col_kind": m.col_kind,
                "runs": m.runs,
                "hosts": m.hosts,
                "median": m.median,
                "worst_host": m.worst_host,
                "worst_host_median": m.worst_host_median,
            }
            for m in report.matrices
        ],
        "layouts": [
            {
                "layout": s.layout,
                "ranks": s.ranks,
                "threads": s.threads,
                "variant": s.variant,
                "variants": s.variants,
                "hosts": len(s.hosts),
                "host_names": list(s.hosts),
                "kernels": list(s.kernels),
                "topology": s.topology,
                "smt": s.plan.smt,
                "shared_pus": list(s.shared_pus),
                "placement": [
                    {"rank": r.rank, "cpus": [p[0] for p in r.places], "cores": list(r.cores)}
                    for r in s.plan.ranks
                ],
                "example_source": s.source,
                "picture": s.filename if s.filename in picture_files else None,
            }
            for s in report.layouts.seen
        ],
        "layouts_not_drawn": [
            {
                "layout": n.layout,
                "ranks": n.ranks,
                "threads": n.threads,
                "hosts": len(n.hosts),
                "host_names": list(n.hosts),
                "reason": n.reason,
            }
            for n in report.layouts.not_drawn
        ],
        "pictures": [
            {"file": p.filename, "kind": p.kind, "title": p.title, "caption": p.caption}
            for p in pictures
        ],
    }
    return _clean(doc)


def json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n").encode()


# ----------------------------------------------------------------------------- HTML
_CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:24px;margin-bottom:4px} h2{font-size:19px;margin-top:32px;border-bottom:1px solid #ccc}
h3{font-size:16px;margin-top:22px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f0f0} td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.slow td{background:#fde2e2;color:#8b0000;font-weight:bold}
.banner{background:#fff3cd;border:1px solid #e0c060;padding:8px 12px;margin:10px 0;font-weight:bold}
.ok{background:#e6f4ea;border:1px solid #8c8;padding:8px 12px}
.bad{background:#fde2e2;border:1px solid #d88;padding:8px 12px}
figure{margin:18px 0} figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:13px;color:#444;max-width:1100px}
.meta{color:#555;font-size:13px} code{background:#f4f4f4;padding:0 3px}
"""


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _html_table(
    headers: Sequence[str], rows: Sequence[tuple[bool, Sequence[str]]], num: set[int]
) -> str:
    out = ["<table><thead><tr>", *[f"<th>{_e(h)}</th>" for h in headers], "</tr></thead><tbody>"]
    for slow, cells in rows:
        out.append('<tr class="slow">' if slow else "<tr>")
        for i, c in enumerate(cells):
            out.append(f'<td class="n">{_e(c)}</td>' if i in num else f"<td>{_e(c)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _figure(p: Picture) -> str:
    data = base64.b64encode(p.png).decode("ascii")
    return (
        f'<figure id="{_e(p.filename)}"><h3>{_e(p.title)}</h3>'
        f'<img alt="{_e(p.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_e(p.caption)} <code>{_e(p.filename)}</code></figcaption></figure>"
    )


def _html_layouts(report: Report, pictures: Sequence[Picture]) -> list[str]:
    """The Layouts section: each layout as it ran (recorded placement), and what was not
    drawn and why."""
    parts = [
        '<h2 id="layouts">Layouts</h2>',
        '<p class="meta">Each layout named in the results (<code>layout</code>), drawn where '
        "its threads really ran: the PU of every thread from the results' "
        "<code>placement</code>, on the node topology (<code>--topology</code>, the results' "
        "<code>params.topology</code>, or this machine for results made here). Hosts with the "
        "same placement share a drawing; a layout that ran differently on some hosts has one "
        "drawing per placement.</p>",
    ]
    parts += [_figure(p) for p in pictures if p.kind == "layout"]
    planned = [p for p in pictures if p.kind == "plan"]
    if planned:
        parts.append(
            '<p class="meta">Planned layouts added to this report (drawn from a plan, not from '
            "the results):</p>"
        )
        parts += [_figure(p) for p in planned]
    if report.layouts.not_drawn:
        parts.append("<p><b>Not drawn:</b></p><ul>")
        for n in report.layouts.not_drawn:
            parts.append(
                f"<li>{_e(n.what)} on {len(n.hosts):,} host(s) "
                f"({_e(_hosts_short(n.hosts))}): {_e(n.reason)}</li>"
            )
        parts.append("</ul>")
    return parts


def html_page(
    report: Report, pictures: Sequence[Picture], title: str = "topobind fleet report"
) -> str:
    o = report.options
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">created {_e(datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))} '
        f"by <code>topobind report</code></p>",
    ]
    if report.generated:
        parts.append(
            f'<div class="banner">GENERATED DATA: {report.generated} of {report.documents} '
            "results are synthetic (params.generated=true, made by tests/fleetgen.py). "
            "Nothing on this page was measured.</div>"
        )
    parts.append(
        "<ul class='meta'>"
        + "".join(f"<li>{_e(line)}</li>" for line in _intro(report)[-3:])
        + "</ul>"
    )
    slow = report.slow
    parts.append("<h2>Slow hosts</h2>")
    if slow:
        parts.append(
            f'<p class="bad">{len(report.slow_host_names)} slow host(s): '
            f"{_e(', '.join(report.slow_host_names))}. A host is slow when its median is worse "
            f"than the fleet median by more than {o.slow_mads:g} MADs and more than "
            f"{o.slow_pct:g}%.</p>"
        )
        rows = [
            (
                True,
                [
                    h.host, g.kernel, g.layout or "-", g.pages,
                    f"{fmt.value(h.summary.median)} {g.unit}",
                    f"{fmt.value(g.fleet_median)} {g.unit}",
                    _signed_worse(g, h), fmt.mads(h.mads),
                ],
            )
            for g, h in slow
        ]  # fmt: skip
        parts.append(
            _html_table(
                [
                    "host",
                    "kernel",
                    "layout",
                    "pages",
                    "host median",
                    "fleet median",
                    "vs fleet",
                    "MADs",
                ],
                rows,
                {4, 5, 6, 7},
            )
        )
    else:
        parts.append(
            f'<p class="ok">No slow host: no host median is worse than the fleet median by more '
            f"than {o.slow_mads:g} MADs and {o.slow_pct:g}%.</p>"
        )
    parts.append("<h2>Fleet summary</h2>")
    rows2 = []
    for g in report.groups:
        s = g.all_runs
        rows2.append(
            (
                False,
                [
                    g.kernel, g.layout or "-", g.pages, f"{_what(g)} [{g.unit}]",
                    "higher" if g.higher_is_better else "lower", str(len(g.hosts)), str(s.n),
                    fmt.value(g.fleet_median), fmt.value(g.fleet_mad), fmt.value(s.p50),
                    fmt.value(s.p90), fmt.value(s.p99), fmt.value(s.best), fmt.value(s.worst),
                    fmt.frac_pct(s.cv), str(len(g.slow_hosts)),
                ],
            )
        )  # fmt: skip
    parts.append(
        _html_table(
            [
                "kernel", "layout", "pages", "metric", "better", "hosts", "runs", "fleet median",
                "MAD", "p50", "p90", "p99", "best", "worst", "CV", "slow hosts",
            ],
            rows2,
            set(range(5, 16)),
        )
    )  # fmt: skip
    parts.append(
        '<p class="meta">fleet median = median of the host medians; MAD = median absolute '
        "deviation of the host medians x 1.4826; p50/p90/p99, best, worst and CV over all runs.</p>"
    )
    if report.pages:
        parts.append("<h2>Page sizes</h2>")
        rows3 = []
        for pc in report.pages:
            for r in pc.rows:
                rel = "reference" if r is pc.rows[0] else fmt.pct(r.better_pct, True)
                rows3.append(
                    (
                        False,
                        [
                            pc.kernel, pc.layout or "-", r.pages, str(r.hosts),
                            str(r.runs), f"{fmt.value(r.fleet_median)} {pc.unit}", rel,
                        ],
                    )
                )  # fmt: skip
        parts.append(
            _html_table(
                [
                    "kernel",
                    "layout",
                    "pages",
                    "hosts",
                    "runs",
                    "fleet median",
                    "vs smallest (+ = better)",
                ],
                rows3,
                {3, 4, 5, 6},
            )
        )
    parts.append("<h2>Pictures</h2>")
    parts += [_figure(p) for p in pictures if p.kind not in ("layout", "plan")]
    if report.layouts or any(p.kind in ("layout", "plan") for p in pictures):
        parts += _html_layouts(report, pictures)
    parts.append("<h2>Per host</h2>")
    for g in report.groups:
        n = len(g.hosts)
        open_attr = " open" if n <= HTML_OPEN_HOSTS or g.slow_hosts and n <= 200 else ""
        parts.append(
            f"<details{open_attr}><summary><b>{_e(g.kernel)} {_e(_what(g))} [{_e(g.unit)}]</b> "
            f"{_e(where_text(g.layout, g.page_kib, g.page_fallback) or 'no layout or pages')}: "
            f"{n} hosts, "
            f"{len(g.slow_hosts)} slow (worst first)</summary>"
        )
        warm = o.warmup > 0
        headers = ["host", "runs", "median", "95% CI of median", "best", "worst", "CV"]
        headers += ["max slowdown", "vs fleet", "MADs", "status"] + (["warm-up"] if warm else [])
        hrows = []
        for h in g.hosts:
            s = h.summary
            cells = [
                h.host, str(s.n), fmt.value(s.median), _ci(s), fmt.value(s.best),
                fmt.value(s.worst), fmt.frac_pct(s.cv), fmt.frac_pct(s.max_slowdown),
                _signed_worse(g, h), fmt.mads(h.mads), _status(h),
            ]  # fmt: skip
            if warm:
                cells.append(", ".join(fmt.value(r.value) for r in h.warmup_runs) or "-")
            hrows.append((h.slow, cells))
        parts.append(_html_table(headers, hrows, {1, 2, 4, 5, 6, 7, 8, 9}))
        parts.append("</details>")
    if report.invalid:
        parts.append(f"<h2>Invalid results left out ({len(report.invalid)})</h2><ul>")
        parts += [
            f"<li><code>{_e(r.source)}</code>: {_e(r.kernel)} on {_e(r.host)}: "
            f"{_e(r.validation or 'valid=false')}</li>"
            for r in report.invalid
        ]
        parts.append("</ul>")
    parts.append(
        f'<p class="meta">Inputs: {_e(", ".join(report.inputs))}. Machine-readable figures: '
        "<code>report.json</code> beside this page; definitions: docs/report.md.</p>"
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
