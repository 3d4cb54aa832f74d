#!/usr/bin/env python3
"""Benchmark: the cost of the evidence around a run (libtb's tb/evidence.h, issue 45).

Writes results/bench/evidence.json:
- per run: ``rankstep/bin/tb-evidence --loop N`` (begin + end + the JSON object, in one
  process: what a kernel pays), wall and CPU milliseconds per run, the median of LOOPS loops;
- on a STREAM run: ``kernels/bin/stream`` with and without (``TOPOBIND_EVIDENCE=0``), REPEAT
  pairs interleaved, each the process's wall time; the added share is the difference of the
  medians over the median without, and, steadier on a busy machine, the per-run cost over the
  median run time.
Targets: at most 5 ms a run and 1 % of a STREAM run. BENCH_REPEAT=N changes the pairs
(default 7), BENCH_EVIDENCE_ELEMENTS the STREAM size (default 20M: ~1 s here).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "7"))
ELEMENTS = os.environ.get("BENCH_EVIDENCE_ELEMENTS", "20M")
LOOPS, PER_LOOP = 5, 100
TARGET_MS, TARGET_SHARE = 5.0, 0.01
TB_EVIDENCE = REPO / "rankstep" / "bin" / "tb-evidence"
STREAM = REPO / "kernels" / "bin" / "stream"
LINE = re.compile(r"(\d+) runs, ([0-9.]+) ms per run, ([0-9.]+) ms of CPU")


def per_run() -> dict[str, float]:
    wall, cpu = [], []
    for _ in range(LOOPS):
        proc = subprocess.run([str(TB_EVIDENCE), "--loop", str(PER_LOOP)], capture_output=True,
                              text=True, check=True)  # fmt: skip
        m = LINE.search(proc.stderr)
        if not m:
            raise SystemExit(f"bench-evidence: unexpected output of tb-evidence: {proc.stderr}")
        wall.append(float(m.group(2)))
        cpu.append(float(m.group(3)))
    return {"wall_ms": statistics.median(wall), "cpu_ms": statistics.median(cpu),
            "wall_ms_min": min(wall), "loops": LOOPS, "runs_per_loop": PER_LOOP}  # fmt: skip


def stream_s(evidence: bool) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}
    env["TOPOBIND_EVIDENCE"] = "1" if evidence else "0"
    cmd = [str(STREAM), "--elements", ELEMENTS, "--trials", "10"]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    from topobind.fsutil import atomic_write_text

    cost = per_run()
    with_s, without_s = [], []
    for _ in range(REPEAT):  # interleaved: a load that comes and goes hits both
        without_s.append(stream_s(False))
        with_s.append(stream_s(True))
    med_with, med_without = statistics.median(with_s), statistics.median(without_s)
    ab_share = (med_with - med_without) / med_without
    cost_share = cost["wall_ms"] / 1000.0 / med_without
    load = os.getloadavg()
    out = {
        "per_run": cost,
        "stream": {"elements": ELEMENTS, "pairs": REPEAT, "with_s": with_s, "without_s": without_s,
                   "median_with_s": med_with, "median_without_s": med_without,
                   "added_share_ab": ab_share, "added_share_cost": cost_share},
        "loadavg": load,
        "cpus": len(os.sched_getaffinity(0)),
        "target_ms": TARGET_MS,
        "target_share": TARGET_SHARE,
        "meets_target": cost["wall_ms"] <= TARGET_MS and cost_share <= TARGET_SHARE,
    }  # fmt: skip
    print(f"evidence: {cost['wall_ms']:.2f} ms a run ({cost['cpu_ms']:.2f} ms of CPU; target "
          f"{TARGET_MS:g} ms); STREAM {ELEMENTS}: {med_without:.3f} s without, {med_with:.3f} s "
          f"with ({100 * ab_share:+.2f} % A/B, {100 * cost_share:.2f} % from the per-run cost; "
          f"target {100 * TARGET_SHARE:g} %); load average {load[0]:.1f} on "
          f"{out['cpus']} CPUs")  # fmt: skip
    path = REPO / "results" / "bench" / "evidence.json"
    atomic_write_text(path, json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0 if out["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
