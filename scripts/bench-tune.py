#!/usr/bin/env python3
"""Benchmark: ``topobind tune`` (issue 41). Writes results/bench/tune.json.

1. topobind's own cost per tune run: ``topobind tune --layouts compact --pages thp -- true``
   (a program that does nothing) timed whole; its cost beyond the program is the session's
   wall time less every run's own wall time (warm-ups and the baseline's included), divided
   by the runs: start-up, planning, the probe's verification, the statistics, the scratch
   directory, amortised over the session. Target: at most 50 ms a run. Also the per-run
   difference of the launch itself (compact through the per-rank step against the plain
   baseline), which a real program pays on every run whatever the tuner.
2. The statistics at this machine's noise: NOISE_RUNS consecutive wall times of a short busy
   loop (``sh`` counting to 20,000, about 50 ms) measured here, their ratios to their median
   kept in order as the noise; then 200 seeded synthetic sessions of three candidates, each
   taking that sequence from a random start (so load that lasted several runs here does in
   the session too, which the test paired by round uses): identical (false positives: a
   winner at all; target at most 5 %) and one 10 % faster (power: that one the winner;
   target at least 90 %).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from bench_summary import add_summary, target  # noqa: E402 (scripts/)

from topobind.tune import session, stats  # noqa: E402
from topobind.tune.session import Candidate, Measured, Settings, run_session  # noqa: E402

TOPOBIND = str(Path(sys.executable).with_name("topobind"))
NOISE_RUNS = int(os.environ.get("BENCH_NOISE_RUNS", "240"))
SESSIONS = 200
BUSY = ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]


def own_cost() -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMP_"))}
    with tempfile.TemporaryDirectory() as state:
        env["TOPOBIND_STATE_DIR"] = state
        t0 = time.monotonic()
        done = subprocess.run([TOPOBIND, "tune", "--layouts", "compact", "--pages", "thp",
                               "--budget", "2m", "-f", "json", "--", "true"],
                              capture_output=True, text=True, env=env, check=True)  # fmt: skip
        total = time.monotonic() - t0
    doc = json.loads(done.stdout)
    walls = [w for c in doc["candidates"] for w in c["walls"]]
    by = {c["name"]: stats.median(c["runs"]) for c in doc["candidates"]}
    return {
        "session_s": round(total, 3),
        "runs": len(walls),
        "overhead_s": round(total - sum(walls), 3),  # start, plan, probe, statistics, scratch
        "per_run_ms": round((total - sum(walls)) / len(walls) * 1000, 2),
        "target_ms": 50.0,
        "program_median_ms": {k: round(v * 1000, 3) for k, v in by.items()},
        "launch_step_ms": round((by["compact"] - by["baseline"]) * 1000, 3),
    }


def noise() -> list[float]:
    walls = []
    for _ in range(NOISE_RUNS):
        t0 = time.monotonic()
        subprocess.run(BUSY, check=True)
        walls.append(time.monotonic() - t0)
    med = stats.median(walls)
    return [w / med for w in walls]


def sessions(residuals: list[float], gain: float) -> tuple[int, float]:
    """(sessions whose winner is the right one, or any winner when gain is 0; mean runs).
    Each session's runs take the measured residuals in their order, from a random start
    (wrapping): consecutive runs get consecutive real runs, so load that lasted a while here
    lasts as long in the session."""
    hits, runs = 0, 0
    for seed in range(SESSIONS):
        rng = random.Random(seed)
        clock = [0.0]
        at = [rng.randrange(len(residuals))]

        def measure(c: Candidate, clock: list[float] = clock, at: list[int] = at) -> Measured:
            at[0] += 1
            v = residuals[at[0] % len(residuals)] / (1 + gain if c.pages == "2M" else 1.0)
            clock[0] += v
            return Measured(v, v)

        cands = [Candidate(None), Candidate("compact"), Candidate("compact", pages="2M")]
        out = run_session(cands, measure, Settings(budget_s=600, seed=seed),
                          lambda clock=clock: clock[0])  # fmt: skip
        win = out.winner
        hits += win is not None and (gain == 0 or win.candidate.pages == "2M")
        runs += sum(s.runs for s in out.standings)
    return hits, runs / SESSIONS


def main() -> None:
    load = os.getloadavg()[0]
    cost = own_cost()
    res = noise()
    spread = sorted(res)
    fp, fp_runs = sessions(res, 0.0)
    power, power_runs = sessions(res, 0.10)
    paired_pairs = session.MIN_PAIRS
    session.MIN_PAIRS = 1 << 30  # the same sessions, every comparison unpaired (Mann-Whitney)
    ufp, _ = sessions(res, 0.0)
    upower, _ = sessions(res, 0.10)
    session.MIN_PAIRS = paired_pairs
    doc = {
        "bench": "tune",
        "load_average": round(load, 2),
        "own_cost": cost,
        "noise": {
            "runs": len(res),
            "p10": round(spread[len(res) // 10], 3),
            "p90": round(spread[9 * len(res) // 10], 3),
            "max": round(spread[-1], 3),
        },  # fmt: skip
        "false_positive": {
            "sessions": SESSIONS,
            "winners": fp,
            "rate": fp / SESSIONS,
            "target_max": 0.05,
            "mean_counted_runs": fp_runs,
        },  # fmt: skip
        "power_10pct": {
            "sessions": SESSIONS,
            "found": power,
            "rate": power / SESSIONS,
            "target_min": 0.90,
            "mean_counted_runs": power_runs,
        },  # fmt: skip
        "unpaired": {"false_positive_rate": ufp / SESSIONS, "power_10pct_rate": upower / SESSIONS},
    }
    add_summary(doc, [  # make bench's summary (scripts/bench_summary.py)
        target("tune false-positive rate", fp / SESSIONS, "<= 0.05", fp / SESSIONS <= 0.05),
        target("tune power at 10 %", power / SESSIONS, ">= 0.90", power / SESSIONS >= 0.90),
    ])  # fmt: skip
    out = REPO / "results" / "bench" / "tune.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
