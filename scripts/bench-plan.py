#!/usr/bin/env python3
"""Benchmark: end-to-end time of `topobind plan --format json` vs `hwloc-distrib`, same input.

Writes results/bench/plan.json. Target: under 100 ms per plan on 384 PUs (192em64t-24n8c2t).
Each command is run as a fresh process (what a job script pays), REPEAT times; the median
is reported, with min and max.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPOBIND_SHARED", REPO.parent / "shared"))
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
REPEAT = int(os.environ.get("BENCH_REPEAT", "15"))
TARGET_MS = 100.0

CASES = [
    (
        "192em64t-24n8c2t (384 PUs)",
        str(SHARED / "topologies" / "192em64t-24n8c2t.xml"),
        "192em64t-24n8c2t.xml",
        "spread",
        192,
    ),
    (
        "betzy-epyc7742 (256 PUs)",
        "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)",
        "pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)",
        "every-other-core",
        64,
    ),
]


# As on a user's machine: Python's bytecode cache in use (some shells export
# PYTHONDONTWRITEBYTECODE=1, which makes every run recompile every module).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
    return (time.perf_counter() - t0) * 1000.0


def stats(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


def main() -> int:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True)
    out = {"benchmark": "plan", "repeat": REPEAT, "target_ms": TARGET_MS, "cases": [],
           "bytecode_cache": True, "cpus": os.cpu_count()}
    ok = True
    for name, source, hwloc_input, layout, ranks in CASES:
        hw_input = hwloc_input if not hwloc_input.endswith(".xml") else source
        ours = [
            timed([TOPOBIND, "plan", "-t", source, "-l", layout, "-r", str(ranks), "-f", "json"])
            for _ in range(REPEAT)
        ]
        distrib = [
            timed(["hwloc-distrib", "--input", hw_input, "--single", str(ranks)])
            for _ in range(REPEAT)
        ]
        case = {
            "name": name,
            "layout": layout,
            "ranks": ranks,
            "topobind_plan_json": stats(ours),
            "hwloc_distrib": stats(distrib),
        }
        case["ratio_to_hwloc_distrib"] = (
            case["topobind_plan_json"]["median_ms"] / case["hwloc_distrib"]["median_ms"]
        )
        case["meets_target"] = case["topobind_plan_json"]["median_ms"] < TARGET_MS
        ok &= case["meets_target"]
        out["cases"].append(case)
        print(
            f"{name}: topobind plan {case['topobind_plan_json']['median_ms']:.1f} ms, "
            f"hwloc-distrib {case['hwloc_distrib']['median_ms']:.1f} ms (median of {REPEAT})"
        )
    out["meets_target"] = ok
    path = REPO / "results" / "bench" / "plan.json"
    sys.path.insert(0, str(REPO / "src"))
    from topobind.fsutil import atomic_write_text

    atomic_write_text(path, json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
