"""The report as JSON (report.json, ``topobind.report/1``): every figure, machine-readable
(docs/report.md describes the fields)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from topobind import stats
from topobind.report.analysis import HostStats, Report
from topobind.report.picture import Picture

REPORT_SCHEMA = "topobind.report/1"


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
        "slow_hosts": _slow_hosts(report),
        "groups": _groups(report, pictures),
        "page_sizes": _page_sizes(report),
        "matrices": _matrices(report),
        "layouts": _layouts(report, pictures),
        "layouts_not_drawn": _layouts_not_drawn(report),
        "pictures": _pictures(pictures),
    }
    return _clean(doc)


def _slow_hosts(report: Report) -> list[dict[str, Any]]:
    return [
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
    ]


def _groups(report: Report, pictures: Sequence[Picture]) -> list[dict[str, Any]]:
    pics_by_slug: dict[str, list[str]] = {}
    for p in pictures:
        pics_by_slug.setdefault(p.filename.split("-", 1)[-1].removesuffix(".png"), []).append(
            p.filename
        )
    return [
        {
            "kernel": g.kernel,
            "layout": g.layout,
            "page_kib": g.page_kib,
            "pages": g.pages,
            "page_fallback": g.page_fallback,
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
    ]


def _page_sizes(report: Report) -> list[dict[str, Any]]:
    return [
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
    ]


def _matrices(report: Report) -> list[dict[str, Any]]:
    return [
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
    ]


def _layouts(report: Report, pictures: Sequence[Picture]) -> list[dict[str, Any]]:
    picture_files = {p.filename for p in pictures}
    return [
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
    ]


def _layouts_not_drawn(report: Report) -> list[dict[str, Any]]:
    return [
        {
            "layout": n.layout,
            "ranks": n.ranks,
            "threads": n.threads,
            "hosts": len(n.hosts),
            "host_names": list(n.hosts),
            "reason": n.reason,
        }
        for n in report.layouts.not_drawn
    ]


def _pictures(pictures: Sequence[Picture]) -> list[dict[str, Any]]:
    return [
        {"file": p.filename, "kind": p.kind, "title": p.title, "caption": p.caption}
        for p in pictures
    ]


def json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n").encode()
