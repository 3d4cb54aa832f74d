"""The report as JSON (report.json, ``topobind.report/1``): every figure, machine-readable
(docs/report.md describes the fields)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from topobind.json_records import pick, to_json
from topobind.measure import stats
from topobind.report.analysis import HostStats, Report
from topobind.report.picture import Picture

REPORT_SCHEMA = "topobind.report/1"


_SUMMARY = (
    "n", "median", "mean", "min", "max", "best", "worst", "stdev", "cv", "mad", "mad_scaled",
    "p50", "p90", "p99", "max_slowdown", "frac_slower_5pct", "frac_slower_10pct",
)  # fmt: skip


def _summary_json(s: stats.Summary) -> dict[str, Any]:
    ci = s.median_ci
    return {
        **pick(s, *_SUMMARY),
        "median_ci": None if ci is None else pick(ci, "low", "high", "confidence", "coverage"),
    }


def _host_json(h: HostStats) -> dict[str, Any]:
    d = {"host": h.host, **_summary_json(h.summary)}
    d["runs"] = d.pop("n")
    d |= {
        "values": to_json(h.summary.values),
        "sources": [r.source for r in h.runs],
        "timestamps": [to_json(r.time) for r in h.runs],
        "warmup": [
            {"value": r.headline_value, "timestamp": to_json(r.time), "source": r.source}
            for r in h.warmup_runs
        ],
        **pick(h, "worse_pct"),
        "slowdown_vs_fleet": to_json(h.slowdown),
        **pick(h, "mads", "slow"),
    }
    return d


def report_json(report: Report, pictures: Sequence[Picture] = ()) -> dict[str, Any]:
    o = report.options
    doc = {
        "schema": REPORT_SCHEMA,
        "created": to_json(datetime.now(UTC)),
        "options": pick(o, "warmup", "slow_mads", "slow_pct", "confidence"),
        "inputs": {
            "paths": list(report.inputs),
            "files": report.files,
            "documents": report.documents,
            "runs_used": report.runs_used,
            "no_headline": report.no_headline,
            "generated": report.generated,
            "invalid": [pick(r, "source", "kernel", "host", "validation") for r in report.invalid],
            "skipped": [{"file": f, "why": why} for f, why in report.skipped],
            "not_judged": dict(report.not_judged),  # tier -> results left out (smoke)
        },
        "slow_found": bool(report.slow),
        "slow_host_names": report.slow_host_names,
        "slow_hosts": _slow_hosts(report),
        "groups": _groups(report, pictures),
        "page_sizes": _page_sizes(report),
        "matrices": _matrices(report),
        "layouts": _layouts(report, pictures),
        "layouts_not_drawn": _layouts_not_drawn(report),
        "causes": _causes(report, pictures),
        "pictures": _pictures(pictures),
    }
    return to_json(doc)


def _slow_hosts(report: Report) -> list[dict[str, Any]]:
    return [
        {
            "host": h.host,
            **pick(g, "kernel", "layout", "page_kib", "metric", "unit", "higher_is_better"),
            "host_median": to_json(h.summary.median),
            **pick(g, "fleet_median"),
            **pick(h, "worse_pct"),
            "slowdown_vs_fleet": to_json(h.slowdown),
            **pick(h, "mads", "cause"),
        }
        for g, h in report.slow
    ]


def _groups(report: Report, pictures: Sequence[Picture]) -> list[dict[str, Any]]:
    pics_by_slug: dict[str, list[str]] = {}
    for p in pictures:
        pics_by_slug.setdefault(p.filename.split("-", 1)[-1].removesuffix(".png"), []).append(
            p.filename
        )
    return [
        {
            **pick(g, "kernel", "layout", "page_kib", "pages", "page_fallback", "metric", "stat"),
            **pick(g, "unit", "higher_is_better"),
            "hosts": len(g.hosts),
            "runs": g.all_runs.n,
            **pick(g, "fleet_median", "fleet_mad"),
            "slow_threshold": to_json(g.threshold),
            "all_runs": _summary_json(g.all_runs),
            "slow_hosts": [h.host for h in g.slow_hosts],
            "only_warmup": list(g.only_warmup),
            "pictures": pics_by_slug.get(g.slug, []),
            "per_host": [_host_json(h) for h in g.hosts],
        }
        for g in report.groups
    ]


def _page_sizes(report: Report) -> list[dict[str, Any]]:
    return [
        {
            **pick(pc, "kernel", "layout", "metric", "unit", "higher_is_better", "reference_kib"),
            "rows": [
                pick(r, "page_kib", "pages", "hosts", "runs", "fleet_median", "better_pct")
                for r in pc.rows
            ],
        }
        for pc in report.pages
    ]


def _matrices(report: Report) -> list[dict[str, Any]]:
    return [
        {
            **pick(m, "kernel", "layout", "page_kib", "name", "unit", "lower_is_better"),
            **pick(m, "rows", "cols", "row_kind", "col_kind", "runs", "hosts"),
            "median": to_json(m.median.grid()),
            "worst_host": m.worst_host,
            "worst_host_median": None
            if m.worst_host_median is None
            else to_json(m.worst_host_median.grid()),
        }
        for m in report.matrices
    ]


def _layouts(report: Report, pictures: Sequence[Picture]) -> list[dict[str, Any]]:
    picture_files = {p.filename for p in pictures}
    return [
        {
            **pick(s, "layout", "ranks", "threads", "variant", "variants"),
            "hosts": len(s.hosts),
            "host_names": to_json(s.hosts),
            **pick(s, "kernels", "topology"),
            "smt": s.plan.smt,
            **pick(s, "shared_pus"),
            "placement": [
                {"rank": r.rank, "cpus": [p[0] for p in r.places], "cores": list(r.cores)}
                for r in s.plan.ranks
            ],
            "example_source": s.source,
            "picture": s.filename if s.filename in picture_files else None,
        }
        for s in report.layouts.seen
    ]


def _layouts_not_drawn(report: Report) -> list[dict[str, Any]]:
    return [
        {
            **pick(n, "layout", "ranks", "threads"),
            "hosts": len(n.hosts),
            "host_names": to_json(n.hosts),
            "reason": n.reason,
        }
        for n in report.layouts.not_drawn
    ]


def _causes(report: Report, pictures: Sequence[Picture]) -> dict[str, Any]:
    """The cause pictures (report/cause_views.py): the signals the slow hosts' causes name,
    McCalpin's scatters, and why there is none."""
    files = {p.filename for p in pictures}
    groups = report.groups

    def where(i: int) -> dict[str, Any]:
        return pick(groups[i], "kernel", "layout", "page_kib")

    def drawn(name: str) -> str | None:
        return name if name in files else None

    cv = report.cause_views
    return {
        "signals": [{**where(v.group), "signal": v.signal, "cause": v.cause,
                     "hosts": list(v.hosts), "runs": len(v.values),
                     "picture": drawn(f"signal-{groups[v.group].slug}-{v.signal}.png")}
                    for v in cv.signals],
        "scatters": [{**where(s.group), "counter": s.counter, "per": s.per, "runs": s.runs,
                      "hosts": s.hosts, "drawn": len(s.x),
                      "picture": drawn(f"scatter-{groups[s.group].slug}.png")}
                     for s in cv.scatters],
        "no_counters": cv.no_counters or None,
    }  # fmt: skip


def _pictures(pictures: Sequence[Picture]) -> list[dict[str, Any]]:
    return [{"file": p.filename, **pick(p, "kind", "title", "caption")} for p in pictures]


def json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n").encode()
