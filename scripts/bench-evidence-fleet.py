#!/usr/bin/env python3
"""Benchmark: what the evidence around every run costs a whole smoke acceptance (issue 45's
target: smoke acceptance of 32 local nodes no more than 5 % slower than without it).

A local Slurm cluster of $BENCH_EVIDENCE_NODES nodes (default 32; scripts/local-slurm, its
state under build/), then ``topobind validate --site fleet --partition slurm --each-node
--tags smoke`` over all of them, $BENCH_REPEAT times each way (default 3), alternately with
the kernels' evidence off (``TOPOBIND_EVIDENCE=0``, exported into every job) and on (the
default): the wall time of each run, their medians and the added share. The nodes share this
machine's cores, so a run is N slurmd and N jobs on 2 CPUs: the share, not the seconds, is
the figure. Root; takes /tmp/tb-slurm.lock. Writes results/bench/evidence-fleet.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary
from bench_timing import cluster_env, local_slurm
from fleet_faults import fleet_sites

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(Path(sys.executable).parent / "topobind")
NODES = int(os.environ.get("BENCH_EVIDENCE_NODES", "32"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
TARGET_SHARE = 0.05
LOCK = Path("/tmp/tb-slurm.lock")


def smoke(env: dict[str, str], tmp: Path, evidence: bool, run: int) -> tuple[float, str]:
    """One smoke acceptance of every node: its wall seconds and its last line."""
    env = dict(env, TOPOBIND_EVIDENCE="1" if evidence else "0")
    results = tmp / f"results-{'on' if evidence else 'off'}-{run}"
    argv = [TOPOBIND, "validate", "--site", "fleet", "--partition", "slurm", "--each-node",
            "--tags", "smoke", "--results", str(results)]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - t0
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode != 0:
        raise SystemExit(f"smoke acceptance (evidence {'on' if evidence else 'off'}) exit "
                         f"{done.returncode}: {(done.stdout + done.stderr).strip()[-800:]}")  # fmt: skip
    return wall, last


def main() -> int:
    from topobind.fsutil import atomic_write_text

    state = REPO / "build" / "bench-evidence-slurm"
    env = cluster_env(state)
    LOCK.touch(exist_ok=True)
    walls: dict[str, list[float]] = {"off": [], "on": []}
    load = os.getloadavg()[0]
    with LOCK.open() as lock, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        env["TOPOBIND_SITES_DIR"] = str(fleet_sites(Path(tmp)))
        local_slurm(["start", "--nodes", str(NODES)], env)
        try:
            smoke(env, Path(tmp), True, -1)  # a first pass: binaries and caches warm
            for run in range(REPEAT):
                for evidence in ((False, True) if run % 2 == 0 else (True, False)):
                    wall, last = smoke(env, Path(tmp), evidence, run)
                    walls["on" if evidence else "off"].append(round(wall, 2))
                    print(f"evidence {'on ' if evidence else 'off'} run {run + 1}: {wall:.1f} s"
                          f"  ({last})", flush=True)  # fmt: skip
        finally:
            local_slurm(["stop"], env)
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    share = on / off - 1
    doc = {
        "bench": "evidence-fleet", "nodes": NODES, "repeat": REPEAT, "cpus": os.cpu_count(),
        "load_average": round(load, 2), "load_average_end": round(os.getloadavg()[0], 2),
        "walls_s": walls, "median_off_s": off, "median_on_s": on,
        "added_share": round(share, 4), "target_share": TARGET_SHARE,
        "meets_target": share <= TARGET_SHARE,
    }  # fmt: skip
    add_summary(doc, [target(f"evidence on a {NODES}-node smoke acceptance", round(share, 4),
                             f"<= {TARGET_SHARE}", share <= TARGET_SHARE)])  # fmt: skip
    print(f"{NODES} nodes, smoke acceptance: {off:.1f} s without evidence, {on:.1f} s with "
          f"(median of {REPEAT}): {share * 100:+.1f} % (target at most +{TARGET_SHARE * 100:g} %)")
    path = REPO / "results" / "bench" / "evidence-fleet.json"
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
