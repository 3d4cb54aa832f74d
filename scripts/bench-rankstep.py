#!/usr/bin/env python3
"""Benchmark: the per-rank step of `topobind run` (rankstep/bin/rankexec) against a bare exec.

Writes results/bench/rankstep.json. For each way of starting a rank's program (/bin/true):
- wall time per rank: the program started REPEAT times, one after the other, each as a fresh
  process from this script (median and 90th percentile);
- file-system calls per rank: `strace -f -e trace=%file,%desc` of one start (every call on a
  path or a file descriptor: execve, openat, fstat, read, mmap, close, ...), counted by name.
Ways: `bare` (exec of the program), `rankexec` (the C step reading its prepared file, local
rank 1 of 2) and, when the git history has it (BEFORE_REV, default: the last commit with
`rank-exec` in src/topobind/launch/build.py), `python-rank-exec` (the Python step it replaced).
Targets: the step adds at most 2 ms and 30 file-system calls per rank. The projection to
128 ranks x 1,000 nodes multiplies the step's cost by 128,000 ranks.

Many variables on one line (issue 47: 10,000 / 20,000 / 40,000 took 0.5 / 1.7 / 7.1 s, a
setenv each): rankexec with lines of VARS_COUNTS variables, the median of VARS_REPEAT starts
each; target: linear, the cost a variable at 40,000 at most twice that at 10,000.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "300"))
TARGET_MS = 2.0
TARGET_CALLS = 30
RANKS = 128 * 1000
PROGRAM = shutil.which("true") or "/bin/true"
VARS_COUNTS = (10_000, 20_000, 40_000)
VARS_REPEAT = int(os.environ.get("BENCH_VARS_REPEAT", "7"))
VARS_TARGET_RATIO = 2.0
STEP = """topobind-rankexec 1
@*
0\tOMP_NUM_THREADS=2\tOMP_PLACES={0},{1}\tOMP_PROC_BIND=close\tTOPOBIND_LAYOUT=compact
1\tOMP_NUM_THREADS=2\tOMP_PLACES={2},{3}\tOMP_PROC_BIND=close\tTOPOBIND_LAYOUT=compact
"""


def wall_ms(argv: list[str], env: dict[str, str], repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, check=True)
        samples.append((time.perf_counter() - t0) * 1000.0)
    samples.sort()
    return {
        "median_ms": statistics.median(samples),
        "p90_ms": samples[int(0.9 * (len(samples) - 1))],
        "min_ms": samples[0],
    }


def fs_calls(argv: list[str], env: dict[str, str], tmp: Path) -> dict[str, object]:
    out = tmp / "strace.txt"
    cmd = ["strace", "-f", "-qq", "-e", "trace=%file,%desc", "-o", str(out), *argv]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    names: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        call = line.split(None, 1)[-1].split("(", 1)[0]
        if call and not call.startswith(("+++", "---", "<...")):
            names[call] += 1
    return {"total": sum(names.values()), "by_call": dict(sorted(names.items()))}


def before_rank_exec(tmp: Path) -> list[str] | None:
    """The Python step this replaced, from git (None when the history does not have it)."""
    rev = os.environ.get("BEFORE_REV") or subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%H", "-S", "rank_exec_prefix", "--",
         "src/topobind/launch/build.py"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    if not rev:
        return None
    old = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", f"{rev}^"], capture_output=True, text=True
    ).stdout.strip()
    src = tmp / "before"
    src.mkdir()
    arch = subprocess.run(["git", "-C", str(REPO), "archive", old, "src"], capture_output=True)
    if arch.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(src)], input=arch.stdout, check=True)
    plan = subprocess.run(
        [str(REPO / ".venv" / "bin" / "topobind"), "plan", "-t", "synthetic:pack:1 core:4 pu:1",
         "-l", "compact", "-r", "2", "-f", "json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (tmp / "plan.json").write_text(plan)
    py = str(REPO / ".venv" / "bin" / "python")
    return [py, "-c", f"import sys; sys.path.insert(0, {str(src / 'src')!r}); "
            "from topobind.cli.main import main; sys.exit(main())",
            "rank-exec", "--plan", str(tmp / "plan.json"), "--"]  # fmt: skip


def many_variables(rankexec: str, tmp: Path) -> dict[str, object]:
    """rankexec's wall time for one line of N variables, N in VARS_COUNTS."""
    ms: dict[str, float] = {}
    for n in VARS_COUNTS:
        step = tmp / f"vars-{n}.txt"
        step.write_text("topobind-rankexec 1\n@*\n0\t" + "\t".join(f"V{i}={i}" for i in range(n)))
        step.chmod(0o600)
        argv = [rankexec, str(step), "--", PROGRAM]
        ms[str(n)] = wall_ms(argv, {"PATH": os.environ["PATH"]}, VARS_REPEAT)["median_ms"]
        print(f"rankexec, one line of {n:,} variables: {ms[str(n)]:.1f} ms (median)")
    lo, hi = VARS_COUNTS[0], VARS_COUNTS[-1]
    ratio = (ms[str(hi)] / hi) / (ms[str(lo)] / lo)
    return {
        "repeat": VARS_REPEAT,
        "median_ms": ms,
        "per_variable_ratio": round(ratio, 2),
        "target_ratio": VARS_TARGET_RATIO,
        "meets_target": ratio <= VARS_TARGET_RATIO,
    }


def main() -> int:
    from topobind.fsutil import atomic_write_text
    from topobind.measure.programs import find_kernel

    rankexec = str(find_kernel("rankexec"))
    env = {**os.environ, "OMPI_COMM_WORLD_LOCAL_RANK": "1"}
    out: dict[str, object] = {
        "benchmark": "rankstep",
        "repeat": REPEAT,
        "program": PROGRAM,
        "cpus": os.cpu_count(),
        "loadavg_1min": os.getloadavg()[0],
        "target_ms": TARGET_MS,
        "target_fs_calls": TARGET_CALLS,
    }
    with tempfile.TemporaryDirectory(prefix="topobind-bench-rankstep-") as tmpdir:
        tmp = Path(tmpdir)
        step = tmp / "rankexec.txt"
        step.write_text(STEP)
        step.chmod(0o600)
        ways = {"bare": [PROGRAM], "rankexec": [rankexec, str(step), "--", PROGRAM]}
        before = before_rank_exec(tmp)
        if before is not None:
            ways["python-rank-exec"] = [*before, PROGRAM]
        results: dict[str, dict[str, object]] = {}
        for name, argv in ways.items():
            repeat = REPEAT if name != "python-rank-exec" else max(10, REPEAT // 20)
            results[name] = {
                "repeat": repeat,
                "wall": wall_ms(argv, env, repeat),
                "fs_calls": fs_calls(argv, env, tmp),
            }
            print(
                f"{name}: {results[name]['wall']['median_ms']:.3f} ms per rank (median), "  # type: ignore[index]
                f"{results[name]['fs_calls']['total']} file-system calls"  # type: ignore[index]
            )
        out["many_variables"] = many_variables(rankexec, tmp)
    bare, step_r = results["bare"], results["rankexec"]
    added_ms = step_r["wall"]["median_ms"] - bare["wall"]["median_ms"]  # type: ignore[index]
    added_calls = step_r["fs_calls"]["total"] - bare["fs_calls"]["total"]  # type: ignore[index]
    out["ways"] = results
    out["rankexec_added"] = {
        "ms_per_rank": round(added_ms, 4),
        "fs_calls_per_rank": added_calls,
        "meets_target": added_ms <= TARGET_MS and added_calls <= TARGET_CALLS,
        "projection_128x1000": {
            "ranks": RANKS,
            "cpu_seconds": round(added_ms * RANKS / 1000.0, 1),
            "fs_calls": added_calls * RANKS,
            "note": "the step's extra work over all ranks of a 128 ranks x 1,000 nodes job; "
            "each node's ranks start in parallel, so a node waits about 128 x ms / cores",
        },
    }
    if "python-rank-exec" in results:
        py = results["python-rank-exec"]
        py_ms = py["wall"]["median_ms"] - bare["wall"]["median_ms"]  # type: ignore[index]
        py_calls = py["fs_calls"]["total"] - bare["fs_calls"]["total"]  # type: ignore[index]
        out["python_rank_exec_added"] = {
            "ms_per_rank": round(py_ms, 3),
            "fs_calls_per_rank": py_calls,
            "projection_128x1000": {
                "cpu_seconds": round(py_ms * RANKS / 1000.0, 1),
                "fs_calls": py_calls * RANKS,
            },
        }
    print(f"rankexec adds {added_ms:.3f} ms and {added_calls} file-system calls per rank")
    add_summary(out, [
        target("rankexec added per rank", round(added_ms, 4), f"<= {TARGET_MS} ms",
               added_ms <= TARGET_MS, "ms"),
        target("rankexec file-system calls per rank", added_calls, f"<= {TARGET_CALLS}",
               added_calls <= TARGET_CALLS),
    ])  # fmt: skip
    path = REPO / "results" / "bench" / "rankstep.json"
    atomic_write_text(path, json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
