#!/usr/bin/env python3
"""Benchmark: `topobind run --verify` across many nodes of the local cluster (issue 47 item 7).

A local Slurm cluster of $BENCH_VERIFY_NODES nodes (default 64; scripts/local-slurm, state
directory under build/), then in one allocation of all of them (salloc -N N --exclusive, one
rank a node): ``topobind run --layout compact --ranks 1 --verify -- true`` and the same without
``--verify``, each $BENCH_VERIFY_REPEAT times (default 3). Figures: the median wall time of
each, their difference (what the verification costs: the probe's launch, the comparison, the
report), and the report's size (lines, longest line: bounded whatever the node count).
Target: the verification of 64 nodes in at most 3 s (hpcat's figure: 256 nodes in under 3 s).
The nodes share this machine's cores, so the figure is a launch over N slurmd, not N machines.
Root; takes /tmp/tb-slurm.lock. Writes results/bench/verify-nodes.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_timing import cluster_env, local_slurm  # scripts/: the bench scripts' library

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
NODES = int(os.environ.get("BENCH_VERIFY_NODES", "64"))
REPEAT = int(os.environ.get("BENCH_VERIFY_REPEAT", "3"))
TARGET_S = 3.0
LOCK = Path("/tmp/tb-slurm.lock")


def timed_runs(verify: bool, env: dict[str, str]) -> tuple[list[float], str]:
    """Wall seconds of each run inside one allocation, and the last run's stderr."""
    flag = " --verify" if verify else ""
    run = f"{VENV_BIN / 'topobind'} run --layout compact --ranks 1{flag} -- true"
    loop = (f'for i in $(seq {REPEAT}); do s=$(date +%s.%N); {run} 2>err.txt || exit $?; '
            'echo "wall $(echo "$(date +%s.%N) - $s" | bc)"; done; cat err.txt >&2')  # fmt: skip
    done = subprocess.run(
        ["salloc", "-N", str(NODES), "--exclusive", "bash", "-c", loop], env=env,
        capture_output=True, text=True, timeout=1800, cwd=REPO / "build",
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"run{flag} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    walls = [float(ln.split()[1]) for ln in done.stdout.splitlines() if ln.startswith("wall ")]
    return walls, done.stderr


def main() -> int:
    from topobind.fsutil import atomic_write_text

    state = REPO / "build" / "bench-verify-slurm"
    env = cluster_env(state)
    LOCK.touch(exist_ok=True)
    with LOCK.open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        t0 = time.monotonic()
        local_slurm(["start", "--nodes", str(NODES)], env)
        started = time.monotonic() - t0
        try:
            plain, _ = timed_runs(False, env)
            verified, report = timed_runs(True, env)
        finally:
            local_slurm(["stop"], env)
    lines = [ln for ln in report.splitlines() if ln.startswith(("topobind", " ")) or ":" in ln]
    cost = statistics.median(verified) - statistics.median(plain)
    out = {
        "benchmark": "verify-nodes", "nodes": NODES, "repeat": REPEAT, "cpus": os.cpu_count(),
        "loadavg_1min": os.getloadavg()[0], "cluster_start_s": round(started, 1),
        "run_s": [round(w, 2) for w in plain], "run_verify_s": [round(w, 2) for w in verified],
        "verify_cost_s": round(cost, 2), "target_s": TARGET_S, "meets_target": cost <= TARGET_S,
        "report_lines": len(lines), "report_longest": max(map(len, lines), default=0),
        "report": lines[-12:],
    }  # fmt: skip
    print(f"{NODES} nodes: run {statistics.median(plain):.2f} s, run --verify "
          f"{statistics.median(verified):.2f} s (median of {REPEAT}): verification {cost:.2f} s "
          f"(target {TARGET_S} s); report {len(lines)} lines")  # fmt: skip
    print("\n".join(lines[-6:]))
    path = REPO / "results" / "bench" / "verify-nodes.json"
    atomic_write_text(path, json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
