"""The report as one self-contained HTML page (index.html): pictures embedded, no network."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import UTC, datetime

from topobind.report import fmt, tables
from topobind.report.analysis import FleetGroup, Report, where_text
from topobind.report.picture import Picture
from topobind.report.tables import (
    escape as _e,
)

HTML_OPEN_HOSTS = 60  # per-host tables of up to this many hosts are shown unfolded
HTML_OPEN_SLOW_HOSTS = 200  # ... and up to this many when the group has slow hosts

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
                f"({_e(tables.hosts_short(n.hosts))}): {_e(n.reason)}</li>"
            )
        parts.append("</ul>")
    return parts


def html_page(
    report: Report, pictures: Sequence[Picture], title: str = "topobind fleet report"
) -> str:
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
        + "".join(
            f"<li>{_e(line)}</li>"
            for line in tables.intro_lines(report)
            if not line.startswith(("GENERATED DATA", "  e.g. "))
        )  # fmt: skip
        + "</ul>"
    )
    parts += _slow_section(report)
    parts += _fleet_section(report)
    if report.pages:
        parts += _pages_section(report)
    parts.append("<h2>Pictures</h2>")
    parts += _causes_note(report)
    parts += [_figure(p) for p in pictures if p.kind not in ("layout", "plan")]
    if report.layouts or any(p.kind in ("layout", "plan") for p in pictures):
        parts += _html_layouts(report, pictures)
    parts.append("<h2>Per host</h2>")
    parts += [_host_details(report, g) for g in report.groups]
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


def _causes_note(report: Report) -> list[str]:
    """What the cause pictures show, or why there is no scatter (one line each)."""
    cv = report.cause_views
    lines = []
    if cv.signals:
        lines.append(f"{len(cv.signals)} signal(s) named by slow hosts' causes: each drawn "
                     "beside its group's ECDF (signal-*.png).")  # fmt: skip
    if cv.scatters:
        lines.append("Each run's figure against its hardware counter (McCalpin's scatter, "
                     "scatter-*.png), slow hosts in red.")  # fmt: skip
    if cv.no_counters:
        lines.append(cv.no_counters[:1].upper() + cv.no_counters[1:] + ".")
    return [f'<p class="meta">{_e(line)}</p>' for line in lines]


def _slow_section(report: Report) -> list[str]:
    o = report.options
    if not report.slow:
        return [
            "<h2>Slow hosts</h2>",
            f'<p class="ok">No slow host: no host median is worse than the fleet median by more '
            f"than {o.slow_mads:g} MADs and {o.slow_pct:g}%.</p>",
        ]
    return [
        "<h2>Slow hosts</h2>",
        f'<p class="bad">{len(report.slow_host_names)} slow host(s): '
        f"{_e(', '.join(report.slow_host_names))}. A host is slow when its median is worse "
        f"than the fleet median by more than {o.slow_mads:g} MADs and more than "
        f"{o.slow_pct:g}%.</p>",
        tables.slow_hosts_table(report).html(),
    ]


def _fleet_section(report: Report) -> list[str]:
    rows = []
    for g in report.groups:
        s = g.all_runs
        rows.append(
            tables.Row(
                (
                    g.kernel, g.layout or "-", g.pages, f"{tables.what(g)} [{g.unit}]",
                    "higher" if g.higher_is_better else "lower", str(len(g.hosts)), str(s.n),
                    fmt.value(g.fleet_median), fmt.value(g.fleet_mad), fmt.value(s.p50),
                    fmt.value(s.p90), fmt.value(s.p99), fmt.value(s.best), fmt.value(s.worst),
                    fmt.frac_pct(s.cv), str(len(g.slow_hosts)),
                )
            )
        )  # fmt: skip
    headers = (
        "kernel", "layout", "pages", "metric", "better", "hosts", "runs", "fleet median",
        "MAD", "p50", "p90", "p99", "best", "worst", "CV", "slow hosts",
    )  # fmt: skip
    return [
        "<h2>Fleet summary</h2>",
        tables.Table(headers, tuple(rows), frozenset(range(5, 16))).html(),
        '<p class="meta">fleet median = median of the host medians; MAD = median absolute '
        "deviation of the host medians x 1.4826; p50/p90/p99, best, worst and CV over all "
        "runs.</p>",
    ]


def _pages_section(report: Report) -> list[str]:
    rows = []
    for pc in report.pages:
        for r in pc.rows:
            rel = "reference" if r is pc.rows[0] else fmt.pct(r.better_pct, True)
            rows.append(
                tables.Row(
                    (
                        pc.kernel, pc.layout or "-", r.pages, str(r.hosts), str(r.runs),
                        f"{fmt.value(r.fleet_median)} {pc.unit}", rel,
                    )
                )
            )  # fmt: skip
    headers = ("kernel", "layout", "pages", "hosts", "runs", "fleet median")
    table = tables.Table(
        (*headers, "vs smallest (+ = better)"), tuple(rows), frozenset({3, 4, 5, 6})
    )
    return ["<h2>Page sizes</h2>", table.html()]


def _host_details(report: Report, g: FleetGroup) -> str:
    n = len(g.hosts)
    unfold = n <= HTML_OPEN_HOSTS or bool(g.slow_hosts) and n <= HTML_OPEN_SLOW_HOSTS
    place = where_text(g.layout, g.page_kib, g.page_fallback) or "no layout or pages"
    return "\n".join(
        [
            f"<details{' open' if unfold else ''}><summary><b>{_e(g.kernel)} {_e(tables.what(g))} "
            f"[{_e(g.unit)}]</b> {_e(place)}: {n} hosts, "
            f"{len(g.slow_hosts)} slow (worst first)</summary>",
            tables.host_table(report, g, g.hosts).html(),
            "</details>",
        ]
    )
