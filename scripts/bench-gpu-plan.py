#!/usr/bin/env python3
"""Benchmark: planning the per-gpu layout on the largest GPU nodes of topologies/gpu.

Writes results/bench/gpu-plan.json. For each node: `topobind plan --layout per-gpu -f json` as
a fresh process (what a job script pays; target under 100 ms, as for the CPU layouts), the
same plan in-process (XML parse + devices + plan, no interpreter start), and, for scale, one
`hwloc-calc os=<first GPU> -I core` (hwloc's own cost of one device locality query).
Median of BENCH_REPEAT runs (default 15), with min and max.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "topologies" / "gpu"
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
REPEAT = int(os.environ.get("BENCH_REPEAT", "15"))
TARGET_MS = 100.0
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

CASES = [
    (
        "mpibind-eas-tioga (EX235A: 128 PUs, 8 GCDs, 4 NICs), LUMI's binding",
        GPU / "mpibind-eas-tioga.xml",
        ["--ranks", "8", "--threads", "7", "--reserve", "first-core-per-l3", "--order", "gpu"],
        "rsmi0",
    ),
    (
        "mpibind-coral-lassen (POWER9: 160 PUs, 4 V100, 4 NICs), one rank per core",
        GPU / "mpibind-coral-lassen.xml",
        ["--ranks", "40"],
        "cuda0",
    ),
]


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return (time.perf_counter() - t0) * 1000.0


def stats(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


def in_process(xml: Path, args: list[str]) -> list[float]:
    sys.path.insert(0, str(REPO / "src"))
    import argparse

    from topobind.cli.commands.common import add_layout_args, add_topology_arg, plan_from

    parser = argparse.ArgumentParser()
    add_topology_arg(parser)
    add_layout_args(parser)
    ns = parser.parse_args(["-t", str(xml), "-l", "per-gpu", *args])
    out = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        plan_from(ns).to_dict()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def main() -> int:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True)
    out: dict[str, object] = {
        "benchmark": "gpu-plan",
        "repeat": REPEAT,
        "target_ms": TARGET_MS,
        "cpus": os.cpu_count(),
        "loadavg_1min_before": os.getloadavg()[0],  # other work on the machine slows every case
        "cases": [],
    }
    ok = True
    for name, xml, args, gpu in CASES:
        cli = [TOPOBIND, "plan", "-t", str(xml), "-l", "per-gpu", *args, "-f", "json"]
        fresh = [timed(cli) for _ in range(REPEAT)]
        calc = [
            timed(["hwloc-calc", "-i", str(xml), f"os={gpu}", "-I", "core"]) for _ in range(REPEAT)
        ]
        case = {
            "name": name,
            "args": args,
            "topobind_plan_json": stats(fresh),
            "in_process_plan": stats(in_process(xml, args)),
            "hwloc_calc_one_device": stats(calc),
        }
        case["meets_target"] = case["topobind_plan_json"]["median_ms"] < TARGET_MS
        ok &= bool(case["meets_target"])
        out["cases"].append(case)  # type: ignore[attr-defined]
        print(
            f"{name}: topobind plan {case['topobind_plan_json']['median_ms']:.1f} ms "
            f"(in-process {case['in_process_plan']['median_ms']:.1f} ms), hwloc-calc one device "
            f"{case['hwloc_calc_one_device']['median_ms']:.1f} ms (median of {REPEAT})"
        )
    out["meets_target"] = ok
    add_summary(out, [
        target(f"plan -l per-gpu -f json, {c['name']} (median)",
               c["topobind_plan_json"]["median_ms"], f"< {TARGET_MS} ms",
               bool(c["meets_target"]), "ms")
        for c in out["cases"]  # type: ignore[attr-defined]
    ])  # fmt: skip
    path = REPO / "results" / "bench" / "gpu-plan.json"
    from topobind.fsutil import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
