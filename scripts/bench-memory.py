#!/usr/bin/env python3
"""The page size of a user's program, measured through ``topobind run --pages``.

Two plain programs topobind did not write (``userprogs/triad.c``: a STREAM-like triad with
OpenMP, 3 arrays of 128 MiB in one block; ``userprogs/chase.c``: a pointer chase through a
random cycle over a 1 GiB working set, 1023 MiB so that it fits one 1 GiB page with the
shim's header) run as ``topobind run --ranks 1 --threads T --pages P -- PROGRAM``
with P = 4k, 2M and 1G, the three taking turns run by run (interleaved). Each figure is the
median of the runs; the ratios are against 4k. The hugetlb pools are reserved at the start
(root) and given back at the end. This machine has one NUMA node: local against remote
memory cannot be measured here (docs/memory.md says where it can).

    .venv/bin/python scripts/bench-memory.py [-o results/bench/memory.json] [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from bench_summary import add_summary, target  # noqa: E402 (scripts/: make bench's summary)

from topobind.errors import TopobindError  # noqa: E402
from topobind.fsutil import atomic_write_text  # noqa: E402
from topobind.measure.hugepages import reserve_hugepages  # noqa: E402
from topobind.topo.memory_state import read_state, state_json  # noqa: E402

TOPOBIND = str(ROOT / ".venv" / "bin" / "topobind")
PAGES = ("4k", "2M", "1G")
#: the triad's one block of 3 arrays (384 MiB) and the chase's 1023 MiB each fit one 1 GiB
#: page with the shim's 64-byte header; 2 MiB pages: both with room to spare
WANT = {"2M": (2048, 800), "1G": (1 << 20, 1)}
PROGRAMS = {
    "triad": (["userprogs/bin/triad", str(1 << 24), "10"], 2, r"triad_best_MBps=([\d.]+)"),
    "chase": (["userprogs/bin/chase", "1023", "20000000"], 1, r"chase_ns_per_load=([\d.]+)"),
}


def run_once(program: str, pages: str) -> tuple[float | None, str]:
    argv, threads, pattern = PROGRAMS[program]
    cmd = [TOPOBIND, "run", "--launcher", "none", "--ranks", "1", "--threads", str(threads),
           "--pages", pages, "--", str(ROOT / argv[0]), *argv[1:]]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMP_"))}
    for _ in range(6):  # another process may hold the pool's pages for a moment: wait
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if done.returncode != 2 or "free" not in done.stderr:
            break
        time.sleep(10)
    m = re.search(pattern, done.stdout)
    tail = done.stderr.strip().splitlines()[-1:] if done.returncode else []
    return (float(m.group(1)) if m else None), " ".join(tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="results/bench/memory.json")
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("BENCH_REPEAT", "5")))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench-memory: reserving hugepages needs root", file=sys.stderr)
        return 2
    runs: dict[str, dict[str, list[float]]] = {p: {s: [] for s in PAGES} for p in PROGRAMS}
    failures: list[str] = []
    load = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        for kib, count in WANT.values():
            try:  # one spare page when the kernel has it (other processes share the pool)
                stack.enter_context(reserve_hugepages(kib, count + 1))
            except TopobindError:
                stack.enter_context(reserve_hugepages(kib, count))
        state = state_json(read_state())
        for i in range(args.repeat):
            for program in PROGRAMS:
                order = PAGES if i % 2 == 0 else tuple(reversed(PAGES))
                for pages in order:
                    value, why = run_once(program, pages)
                    if value is None:
                        failures.append(f"{program} --pages {pages}: {why}")
                    else:
                        runs[program][pages].append(value)
                    print(f"bench-memory: {program} {pages} run {i + 1}: {value}", flush=True)
    doc = summary(runs, args.repeat, load, state, failures)
    add_summary(doc, [target("topobind run --pages runs that failed", len(failures),
                             "0 (figures: no target)", not failures)])  # fmt: skip
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.output, json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["results"], indent=1))
    return 0 if not failures else 1


def summary(
    runs: dict[str, dict[str, list[float]]],
    repeat: int,
    load: float,
    state: dict[str, object],
    failures: list[str],
) -> dict[str, object]:
    results: dict[str, object] = {}
    for program, by_pages in runs.items():
        unit = "MB/s (best of 10 triads)" if program == "triad" else "ns per load"
        med = {p: statistics.median(v) for p, v in by_pages.items() if v}
        base = med.get("4k")
        results[program] = {
            "unit": unit,
            "median": med,
            "range": {p: [min(v), max(v)] for p, v in by_pages.items() if v},
            "runs": by_pages,
            "ratio_to_4k": {p: round(m / base, 3) for p, m in med.items() if base},
        }
    return {
        "bench": "memory",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "repeat": repeat,
        "load_average_at_start": round(load, 2),
        "how": "topobind run --launcher none --ranks 1 --threads T --pages P -- PROGRAM; "
        "4k, 2M, 1G interleaved run by run; medians",
        "numa": "one NUMA node here: local vs remote vs interleaved memory not measured",
        "memory_state": state,
        "results": results,
        "failures": failures,
    }


if __name__ == "__main__":
    sys.exit(main())
