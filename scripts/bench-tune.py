#!/usr/bin/env python3
"""Benchmark: ``topobind tune`` (issues 41, 46). Writes results/bench/tune.json.

1. topobind's own cost per tune run: ``topobind tune --layouts compact --pages thp -- true``
   (a program that does nothing) timed whole; its cost beyond the program is the session's
   wall time less every run's own wall time (warm-ups and the baseline's included), divided
   by the runs: start-up, planning, the probe's verification, the statistics, the scratch
   directory, amortised over the session. Target: at most 50 ms a run. Also the per-run
   difference of the launch itself (compact through the per-rank step against the plain
   baseline), which a real program pays on every run whatever the tuner.
2. The statistics (issue 46): SESSIONS simulated sessions a condition (the real session
   logic, :func:`topobind.tune.session.run_session`, driven in-process by a simulated runner
   and clock: no subprocess a run) of three candidates (the baseline, compact, compact
   pages=2M), runs of about 1 s, the default budget (10 min) and --min-gain (3 %), at two
   noises: this machine's (NOISE_RUNS consecutive wall times of a short busy loop measured
   here, their ratios to their median kept in order; each session takes that sequence from
   a random start, so load that lasted several runs here does in the session too) and a
   heavy-tailed one (lognormal 5 % times 1 + 0.1 (Pareto(1.5) - 1): infinite variance).
   Identical candidates: a winner in at most 5 % and any drop in at most 5 % of sessions
   (the session-wide error rate); one 10 % faster: that one the winner in at least 80 %.
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

from topobind.tune import stats  # noqa: E402
from topobind.tune.session import Candidate, Measured, Settings, run_session  # noqa: E402

TOPOBIND = str(Path(sys.executable).with_name("topobind"))
NOISE_RUNS = int(os.environ.get("BENCH_NOISE_RUNS", "240"))
SESSIONS = int(os.environ.get("BENCH_TUNE_SESSIONS", "1000"))
BUSY = ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]
TARGETS = {"winner_max": 0.05, "drop_max": 0.05, "power_min": 0.80}


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


def heavy(rng: random.Random) -> float:
    """A heavy-tailed run time: lognormal 5 %, times 1 + 0.1 (Pareto(1.5) - 1)."""
    return rng.lognormvariate(0, 0.05) * (1 + 0.1 * (rng.paretovariate(1.5) - 1))


def sessions(residuals: list[float] | None, gain: float) -> dict[str, object]:
    """SESSIONS seeded sessions at this machine's noise (``residuals``, in their order from a
    random start, wrapping) or the heavy-tailed one (None); what they claimed."""
    winners = drops = found = runs = 0
    verdicts: dict[str, int] = {}
    t0 = time.process_time()
    for seed in range(SESSIONS):
        rng = random.Random(seed)
        clock = [0.0]
        at = [rng.randrange(len(residuals))] if residuals else [0]

        def measure(c: Candidate, rng: random.Random = rng, clock: list[float] = clock,
                    at: list[int] = at) -> Measured:  # fmt: skip
            at[0] += 1
            v = residuals[at[0] % len(residuals)] if residuals else heavy(rng)
            v /= 1 + gain if c.pages == "2M" else 1.0
            clock[0] += v
            return Measured(v, v)

        cands = [Candidate(None), Candidate("compact"), Candidate("compact", pages="2M")]
        out = run_session(cands, measure, Settings(seed=seed), lambda clock=clock: clock[0])
        winners += out.winner is not None
        found += out.winner is not None and out.winner.candidate.pages == "2M"
        drops += any(str(s.dropped).startswith("worse") for s in out.standings)
        runs += sum(s.runs for s in out.standings)
        verdicts[out.verdict] = verdicts.get(out.verdict, 0) + 1
    return {"sessions": SESSIONS, "winner_rate": winners / SESSIONS,
            "drop_rate": drops / SESSIONS, "found_rate": found / SESSIONS,
            "verdicts": verdicts, "mean_counted_runs": round(runs / SESSIONS, 1),
            "cpu_s": round(time.process_time() - t0, 1)}  # fmt: skip


def main() -> None:
    load = os.getloadavg()[0]
    cost = own_cost()
    res = noise()
    spread = sorted(res)
    stats_doc = {}
    for name, residuals in (("machine", res), ("heavy_tailed", None)):
        same, better = sessions(residuals, 0.0), sessions(residuals, 0.10)
        stats_doc[name] = {
            "identical": same, "gain_10pct": better,
            "ok": same["winner_rate"] <= TARGETS["winner_max"]
            and same["drop_rate"] <= TARGETS["drop_max"]
            and better["found_rate"] >= TARGETS["power_min"],
        }  # fmt: skip
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
        "targets": TARGETS,
        "statistics": stats_doc,
        "load_average_end": round(os.getloadavg()[0], 2),
    }
    rows = []  # make bench's summary (scripts/bench_summary.py)
    for name, got in stats_doc.items():
        same, better = got["identical"], got["gain_10pct"]
        rows += [
            target(f"tune {name} noise: winner rate", same["winner_rate"], "<= 0.05",
                   same["winner_rate"] <= TARGETS["winner_max"]),
            target(f"tune {name} noise: drop rate", same["drop_rate"], "<= 0.05",
                   same["drop_rate"] <= TARGETS["drop_max"]),
            target(f"tune {name} noise: 10 % gain found", better["found_rate"], ">= 0.80",
                   better["found_rate"] >= TARGETS["power_min"]),
        ]  # fmt: skip
    add_summary(doc, rows)
    out = REPO / "results" / "bench" / "tune.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
