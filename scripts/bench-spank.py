#!/usr/bin/env python3
"""Benchmark: what the SPANK plugin (srun --topobind=LAYOUT) adds against a plain srun step.

Writes results/bench/spank.json, on a local cluster of 3 nodes with the plugin
(scripts/local-slurm start --nodes 3 --spank, in its own state directory; stopped at the end
if started here). The program is /bin/true, 2 tasks per node (every CPU of this machine).

- per task, time: the plugin's own clock in slurm_spank_task_init (it exports
  TOPOBIND_SPANK_US="PLAN_US TASK_US" to each task: the node's planning, this task's part),
  over every task of REPEAT steps;
- per task, system calls: `strace -f` of node1's slurmd during one plain step and one plugin
  step; the calls of each task process from its fork by slurmstepd to the execve of the
  program (Slurm's own task set-up, plus the plugin's task_init), file-system calls
  (trace=%file,%desc) and all calls, the plugin's step minus the plain one;
- per step: the wall time of `srun -N3 -n6` with and without --topobind (REPEAT of each,
  taking turns; medians): srun's check of the option (`topobind plan --check`, timed alone
  too) and the planning, once per node (the nodes plan at the same time).
Targets: at most 1 ms and a handful (<= 5) of file-system calls per task.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary
from bench_timing import fs_calls, summary, task_calls  # scripts/: shared with bench-flux

REPO = Path(__file__).resolve().parents[1]
REPEAT = int(os.environ.get("BENCH_REPEAT", "15"))
TARGET_TASK_MS = 1.0
TARGET_TASK_FS_CALLS = 5
STATE = REPO / "build" / "local-slurm-spank-bench"
PROGRAM = "/bin/true"
LAYOUT = "--topobind=spread"


def local_slurm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TOPOBIND_SLURM_DIR"] = str(STATE)
    return subprocess.run(
        [str(REPO / "scripts" / "local-slurm"), *args], env=env, capture_output=True, text=True
    )


def slurm_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "OMP_", "TOPOBIND_SPANK"))
    }
    env["SLURM_CONF"] = str(STATE / "slurm.conf")
    return env


def srun(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    out = subprocess.run(
        ["srun", *args], env=slurm_env(), capture_output=True, text=True, cwd="/tmp"
    )
    if out.returncode != 0:
        raise SystemExit(f"bench-spank: srun {' '.join(args)} failed:\n{out.stderr}")
    return (time.perf_counter() - t0) * 1000.0, out


def step_times() -> dict[str, object]:
    plain: list[float] = []
    placed: list[float] = []
    plan_us: list[float] = []
    task_us: list[float] = []
    shape = ["-N3", "-n6"]
    show = ["bash", "-c", 'echo "$TOPOBIND_SPANK_US"']
    for _ in range(REPEAT):
        ms, _ = srun([*shape, PROGRAM])
        plain.append(ms)
        ms, _ = srun([*shape, LAYOUT, PROGRAM])
        placed.append(ms)
    for _ in range(REPEAT):
        _, out = srun([*shape, LAYOUT, *show])
        for line in out.stdout.split("\n"):
            if line.strip():
                p, t = line.split()
                plan_us.append(float(p))
                task_us.append(float(t))
    check: list[float] = []
    topobind = str(REPO / ".venv" / "bin" / "topobind")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        subprocess.run([topobind, "plan", "--check", "--layout", "spread"], check=True)
        check.append((time.perf_counter() - t0) * 1000.0)
    return {
        "srun_check_ms": summary(check),
        "plain_step_ms": summary(plain),
        "plugin_step_ms": summary(placed),
        "added_per_step_ms": round(statistics.median(placed) - statistics.median(plain), 1),
        "plan_per_node_ms": summary([u / 1000 for u in plan_us]),
        "task_init_ms": summary([u / 1000 for u in task_us]),
    }


def traced_step(args: list[str], out: Path) -> dict[str, object]:
    """strace -f of node1's slurmd during one step of 2 tasks on node1; each task's calls
    from its fork to the execve of PROGRAM."""
    pid = (STATE / "slurmd-node1.pid").read_text().strip()
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-o", str(out), "-p", pid], stderr=subprocess.DEVNULL
    )
    time.sleep(1.0)  # attached
    srun(["-N1", "-w", "node1", "-n2", *args, PROGRAM])
    time.sleep(0.5)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    tasks = task_calls(out.read_text(errors="replace").splitlines(), PROGRAM)
    if len(tasks) != 2:
        raise SystemExit(f"bench-spank: found {len(tasks)} task execs of {PROGRAM} in {out}")
    calls = [len(t) for t in tasks]
    fs = [fs_calls(t) for t in tasks]
    by_call = Counter(c for t in tasks for c in t)
    return {
        "calls_per_task": statistics.median(calls),
        "fs_calls_per_task": statistics.median(fs),
        "by_call_2_tasks": dict(sorted(by_call.items())),
    }


def main() -> int:
    if os.geteuid() != 0:
        print("bench-spank: needs root (the local Slurm cluster)", file=sys.stderr)
        return 1
    so = REPO / "rankstep" / "bin" / "topobind_spank.so"
    if not so.exists():
        print("bench-spank: build the plugin first: make spank", file=sys.stderr)
        return 1
    running = local_slurm("status").returncode == 0
    start = local_slurm("start", "--nodes", "3", "--spank")
    if start.returncode != 0:
        print(f"bench-spank: local-slurm start failed:\n{start.stderr}", file=sys.stderr)
        return 1
    try:
        load = os.getloadavg()[0]
        times = step_times()
        STATE.joinpath("trace").mkdir(exist_ok=True)
        plain = traced_step([], STATE / "trace" / "plain.txt")
        placed = traced_step([LAYOUT], STATE / "trace" / "spank.txt")
    finally:
        if not running:
            local_slurm("stop")
    added_fs = placed["fs_calls_per_task"] - plain["fs_calls_per_task"]  # type: ignore[operator]
    added_calls = placed["calls_per_task"] - plain["calls_per_task"]  # type: ignore[operator]
    task_ms = times["task_init_ms"]["median"]  # type: ignore[index]
    result = {
        "benchmark": "spank",
        "program": PROGRAM,
        "layout": LAYOUT,
        "nodes": 3,
        "tasks_per_node": 2,
        "repeat": REPEAT,
        "load_average_at_start": round(load, 2),
        **times,
        "plain_task_syscalls": plain,
        "plugin_task_syscalls": placed,
        "added_per_task": {
            "ms": task_ms,
            "fs_calls": added_fs,
            "calls": added_calls,
        },
        "targets": {"task_ms": TARGET_TASK_MS, "task_fs_calls": TARGET_TASK_FS_CALLS},
        "meets_targets": task_ms <= TARGET_TASK_MS and added_fs <= TARGET_TASK_FS_CALLS,
    }
    add_summary(result, [
        target("SPANK plugin task init (median)", task_ms, f"<= {TARGET_TASK_MS} ms",
               task_ms <= TARGET_TASK_MS, "ms"),
        target("SPANK plugin added fs calls per task", added_fs, f"<= {TARGET_TASK_FS_CALLS}",
               added_fs <= TARGET_TASK_FS_CALLS),
    ])  # fmt: skip
    out = REPO / "results" / "bench" / "spank.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["added_per_task"]), "per task;", result["added_per_step_ms"],
          "ms per step; ->", out)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
