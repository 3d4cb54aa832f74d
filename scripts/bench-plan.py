#!/usr/bin/env python3
"""Benchmark: end-to-end time of `topobind plan --format json` vs `hwloc-distrib`, same input.

Writes results/bench/plan.json. Target (issue 23): `topobind plan` on the 384-PU XML
(192em64t-24n8c2t) within 100 ms (median wall time). Each command is run as a fresh process
(what a job script pays), REPEAT times, the two commands taking turns so that a change of load
hits both; the medians are reported, with min and max, and the load average the runs saw. On a
busy machine wall times mostly measure the load, so each case also counts the instructions each
command executes (valgrind --tool=callgrind, when installed): a figure the load does not move.
hwloc-distrib's time is the reference a reader compares with.

The 100 ms target was set on this machine on a day when hwloc-distrib ran in 12.0 ms on the
same input (REFERENCE_DISTRIB_MS); the machine's speed varies (~2.4x between quiet days, more
under load). So beside the absolute verdict (median <= 100 ms now) each targeted case has two
verdicts independent of the machine's speed and load: topobind's time as a multiple of
hwloc-distrib's measured in the same run (taking turns), and the same multiple in
instructions, each against 100 / 12.0 = 8.3x (the target at the reference speed). The
printed line and the JSON say which verdicts hold.

Issue 28 adds an instruction budget: at most 250 million instructions (bytecode compiled) for
`plan -f json`, `show -f json` and `env` on the 384-PU XML (INSTRUCTION_BUDGET), each counted
here beside hwloc-distrib's, with their median wall times from the same turns.

A synthetic description is expanded by hwloc's own lstopo, which topobind runs: that case
costs at least lstopo plus the Python interpreter, so its ratio is reported, not targeted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
REPEAT = int(os.environ.get("BENCH_REPEAT", "15"))
TARGET_MS = 100.0
#: hwloc-distrib's median on the 384-PU XML when the target was set (issue 23, this machine)
REFERENCE_DISTRIB_MS = 12.0
#: the target as a multiple of hwloc-distrib's time: 100 ms at the reference speed
TARGET_RATIO = TARGET_MS / REFERENCE_DISTRIB_MS
#: issue 28: millions of instructions each start-up command may take on the 384-PU XML
INSTRUCTION_BUDGET = 250.0
XML_384 = str(REPO / "topologies" / "192em64t-24n8c2t.xml")
#: the job-script commands held to the budget (besides plan -f json, timed above)
BUDGET_COMMANDS = {
    "show -f json": [TOPOBIND, "show", "-t", XML_384, "-f", "json"],
    "env": [TOPOBIND, "env", "-t", XML_384, "-l", "spread", "-r", "192"],
}

#: (name, topobind's --topology, hwloc-distrib's --input, layout, ranks, targeted)
CASES = [
    (
        "192em64t-24n8c2t (384 PUs)",
        str(REPO / "topologies" / "192em64t-24n8c2t.xml"),
        "192em64t-24n8c2t.xml",
        "spread",
        192,
        True,
    ),
    (
        "betzy-epyc7742 (256 PUs, synthetic)",
        "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)",
        "pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)",
        "every-other-core",
        64,
        False,
    ),
]


# As on a user's machine: Python's bytecode cache in use (some shells export
# PYTHONDONTWRITEBYTECODE=1, which makes every run recompile every module).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return (time.perf_counter() - t0) * 1000.0


def instructions(cmd: list[str]) -> float | None:
    """Millions of user-space instructions the command executes (callgrind), None without
    valgrind."""
    if not shutil.which("valgrind"):
        return None
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    m = re.search(r"Collected : (\d+)", proc.stderr)
    return int(m.group(1)) / 1e6 if m else None


def stats(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


def budget(first: dict) -> dict:
    """plan -f json (the first case), show and env on the 384-PU XML against
    INSTRUCTION_BUDGET, each with its median wall time taken in turns with hwloc-distrib's."""
    distrib_cmd = ["hwloc-distrib", "--input", XML_384, "--single", "192"]
    got: dict = {
        "budget_millions": INSTRUCTION_BUDGET,
        "plan -f json": {
            "instructions_millions": first.get("instructions_millions", {}).get(
                "topobind_plan_json"
            ),
            "median_ms": first["topobind_plan_json"]["median_ms"],
        },
    }
    for name, cmd in BUDGET_COMMANDS.items():
        ours: list[float] = []
        distrib: list[float] = []
        for _ in range(REPEAT):
            ours.append(timed(cmd))
            distrib.append(timed(distrib_cmd))
        got[name] = {
            "instructions_millions": instructions(cmd),
            "median_ms": statistics.median(ours),
            "hwloc_distrib_median_ms": statistics.median(distrib),
        }
    for name, case in got.items():
        if name == "budget_millions":
            continue
        ins = case["instructions_millions"]
        case["within_budget"] = None if ins is None else ins <= INSTRUCTION_BUDGET
        shown = "not counted (no valgrind)" if ins is None else f"{ins:.0f}M instructions"
        beside = case.get("hwloc_distrib_median_ms", first["hwloc_distrib"]["median_ms"])
        verdict = {True: "within", False: "OVER", None: "unknown"}[case["within_budget"]]
        print(
            f"budget {INSTRUCTION_BUDGET:.0f}M, 384-PU XML: topobind {name}: {shown} "
            f"({verdict}); {case['median_ms']:.1f} ms beside hwloc-distrib's {beside:.1f} ms"
        )
    return got


def main() -> int:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True)
    out = {
        "benchmark": "plan",
        "repeat": REPEAT,
        "target_ms": TARGET_MS,
        "cases": [],
        "bytecode_cache": True,
        "cpus": os.cpu_count(),
        "target": "topobind plan on the 384-PU XML within 100 ms (median wall time)",
        "reference_hwloc_distrib_ms": REFERENCE_DISTRIB_MS,
        "target_ratio": TARGET_RATIO,
        "target_at_reference_speed": (
            f"topobind plan within {TARGET_RATIO:.1f}x hwloc-distrib's time in the same run "
            f"(100 ms when hwloc-distrib takes {REFERENCE_DISTRIB_MS} ms), in wall time and "
            "in instructions"
        ),
        "load_average_before": os.getloadavg()[0],
    }
    ok = True  # the absolute verdict: median within 100 ms on this machine now
    ok_ratio = True  # wall-time multiple of hwloc-distrib within TARGET_RATIO
    ok_instructions: bool | None = None  # instruction multiple within TARGET_RATIO (valgrind)
    for name, source, hwloc_input, layout, ranks, targeted in CASES:
        hw_input = hwloc_input if not hwloc_input.endswith(".xml") else source
        plan_cmd = [TOPOBIND, "plan", "-t", source, "-l", layout, "-r", str(ranks), "-f", "json"]
        distrib_cmd = ["hwloc-distrib", "--input", hw_input, "--single", str(ranks)]
        ours: list[float] = []
        distrib: list[float] = []
        for _ in range(REPEAT):  # taking turns: a change of load hits both
            ours.append(timed(plan_cmd))
            distrib.append(timed(distrib_cmd))
        ins_ours, ins_distrib = instructions(plan_cmd), instructions(distrib_cmd)
        case = {
            "name": name,
            "layout": layout,
            "ranks": ranks,
            "targeted": targeted,
            "topobind_plan_json": stats(ours),
            "hwloc_distrib": stats(distrib),
        }
        ratio = case["topobind_plan_json"]["median_ms"] / case["hwloc_distrib"]["median_ms"]
        case["ratio_to_hwloc_distrib"] = ratio
        if ins_ours and ins_distrib:
            case["instructions_millions"] = {"topobind_plan_json": ins_ours,
                                             "hwloc_distrib": ins_distrib}  # fmt: skip
            case["instructions_ratio"] = ins_ours / ins_distrib
        case["within_100_ms"] = case["topobind_plan_json"]["median_ms"] <= TARGET_MS
        case["within_target_ratio"] = ratio <= TARGET_RATIO
        if "instructions_ratio" in case:
            case["within_target_ratio_instructions"] = case["instructions_ratio"] <= TARGET_RATIO
        if targeted:
            ok &= case["within_100_ms"]
            ok_ratio &= case["within_target_ratio"]
            if "instructions_ratio" in case:
                held = case["within_target_ratio_instructions"]
                ok_instructions = held if ok_instructions is None else ok_instructions and held
        out["cases"].append(case)
        print(
            f"{name}: topobind plan {case['topobind_plan_json']['median_ms']:.1f} ms, "
            f"hwloc-distrib {case['hwloc_distrib']['median_ms']:.1f} ms (median of {REPEAT}), "
            f"{ratio:.2f}x"
            + (
                f"; instructions {ins_ours:.0f}M vs {ins_distrib:.0f}M, "
                f"{ins_ours / ins_distrib:.2f}x"
                if ins_ours and ins_distrib
                else ""
            )
            + ("" if targeted else " (not targeted: lstopo expands the description)")
        )
    out["instruction_budget"] = budget(out["cases"][0])
    out["load_average_after"] = os.getloadavg()[0]
    out["meets_target"] = ok
    out["meets_target_ratio"] = ok_ratio
    out["meets_target_ratio_instructions"] = ok_instructions
    out["meets_target_at_reference_speed"] = ok_ratio and ok_instructions is not False
    print(f"target: {out['target']}: {'met' if ok else 'NOT met'} (on this machine, now)")
    print(
        f"target at the reference speed ({TARGET_RATIO:.1f}x hwloc-distrib, i.e. 100 ms when "
        f"hwloc-distrib takes {REFERENCE_DISTRIB_MS} ms): wall-time ratio "
        f"{'met' if ok_ratio else 'NOT met'}; instruction ratio "
        + {True: "met", False: "NOT met", None: "not measured (no valgrind)"}[ok_instructions]
    )
    first = out["cases"][0]
    add_summary(out, [
        target(f"plan -f json, {first['name']} (median)", first["topobind_plan_json"]["median_ms"],
               f"<= {TARGET_MS} ms", ok, "ms"),
        target("multiple of hwloc-distrib's time", round(first["ratio_to_hwloc_distrib"], 2),
               f"<= {TARGET_RATIO:.1f}x", ok_ratio, "x"),
        target("multiple of hwloc-distrib's instructions", first.get("instructions_ratio"),
               f"<= {TARGET_RATIO:.1f}x",
               "not-run" if ok_instructions is None else ok_instructions, "x"),
    ])  # fmt: skip
    path = REPO / "results" / "bench" / "plan.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    tmp.replace(path)  # whole or not at all
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
