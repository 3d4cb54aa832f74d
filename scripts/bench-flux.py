#!/usr/bin/env python3
"""Benchmark: what the Flux shell plugin (flux run -o topobind=LAYOUT) costs a task, and what
it adds to a job against a plain flux run.

Writes results/bench/flux.json, in one instance of the Flux 'make flux' built
(build/flux/bin/flux start --test-size=1), the plugin loaded from a folder of its own
(-Sconf.shell_pluginpath). The program prints its TOPOBIND_FLUX_US; 2 tasks a job (every CPU
of this machine).

- per task, time: the plugin's own clock: task.init in the shell (the second number of
  TOPOBIND_FLUX_US, the first being the node's planning) plus task.exec in the task (binding,
  memory policy, THP, read back: printed with TOPOBIND_FLUX_BENCH=1), over every task of
  REPEAT jobs;
- per job: the wall time of 'flux run -n2' with and without -o topobind (REPEAT of each,
  taking turns; medians): the difference is the planning once a node (topobind plan, a
  process) and the tasks' part.
Target: at most 1 ms a task.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary
from bench_timing import fs_calls, summary, task_calls  # scripts/: shared with bench-spank

REPO = Path(__file__).resolve().parents[1]
FLUX = REPO / "build" / "flux" / "bin" / "flux"
PLUGIN = REPO / "rankstep" / "bin" / "topobind_flux.so"
REPEAT = int(os.environ.get("BENCH_REPEAT", "15"))
TARGET_TASK_MS = 1.0
OUT = REPO / "results" / "bench" / "flux.json"

#: runs inside the instance: REPEAT jobs each way, taking turns; one JSON line a job
INNER = r"""
import json, subprocess, sys, time
repeat = int(sys.argv[1])
show = ["sh", "-c", 'echo "us $FLUX_TASK_LOCAL_ID $TOPOBIND_FLUX_US"']
for i in range(repeat):
    for plugin in (False, True):
        extra = ["-o", "topobind=spread", "--env=TOPOBIND_FLUX_BENCH=1"] if plugin else []
        t0 = time.perf_counter()
        done = subprocess.run(["flux", "run", "-n2", *extra, *show], capture_output=True,
                              text=True)
        ms = (time.perf_counter() - t0) * 1000
        if done.returncode:
            sys.exit(f"flux run failed: {done.stderr}")
        print(json.dumps({"plugin": plugin, "ms": ms, "out": done.stdout + done.stderr}))
# one job each way under strace -f of the broker (it forks the job shells, which fork tasks)
import os, shutil, signal
broker = subprocess.run(["flux", "getattr", "broker.pid"], capture_output=True,
                        text=True).stdout.strip()
if shutil.which("strace") and broker.isdigit():
    for plugin in (False, True):
        trace = f"strace-{int(plugin)}.txt"
        tracer = subprocess.Popen(["strace", "-f", "-qq", "-o", trace, "-p", broker])
        time.sleep(1.0)  # attached
        extra = ["-o", "topobind=spread"] if plugin else []
        subprocess.run(["flux", "run", "-n2", *extra, "/bin/true"], capture_output=True)
        time.sleep(0.5)
        tracer.send_signal(signal.SIGINT)
        tracer.wait()
        print(json.dumps({"trace": plugin, "file": os.path.abspath(trace)}))
"""


def syscalls(traces: dict[bool, list[list[str]]]) -> dict[str, object]:
    """Each task's calls with the plugin against without (medians), and what it adds."""
    if set(traces) != {False, True} or not traces[False] or not traces[True]:
        return {"measured": False, "why": "no strace, or no task traced"}
    from collections import Counter

    def med(tasks: list[list[str]], fs: bool) -> float:
        return statistics.median(fs_calls(t) if fs else len(t) for t in tasks)

    added = Counter(traces[True][0]) - Counter(traces[False][0])
    return {
        "measured": True,
        "all": {"plain": med(traces[False], False), "plugin": med(traces[True], False)},
        "file_system": {"plain": med(traces[False], True), "plugin": med(traces[True], True)},
        "added_by_plugin": dict(sorted(added.items())),
    }


def main() -> int:
    if not FLUX.exists() or not PLUGIN.exists():
        print("bench-flux: Flux or its plugin is not built: make flux", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tb-bench-flux-") as tmp:  # traces in it
        plugins = Path(tmp) / "plugins"
        plugins.mkdir()
        shutil.copy(PLUGIN, plugins / "topobind.so")
        venv_bin = REPO / ".venv" / "bin"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "FLUX_"))}
        env["PATH"] = f"{venv_bin}:{env.get('PATH', '')}"
        done = subprocess.run(
            [str(FLUX), "start", "--test-size=1", f"-Sconf.shell_pluginpath={plugins}",
             sys.executable, "-c", INNER, str(REPEAT)],
            capture_output=True, text=True, env=env, cwd=tmp, timeout=600,
        )  # fmt: skip
        if done.returncode:
            print(f"bench-flux: the instance failed:\n{done.stderr}", file=sys.stderr)
            return 1
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        traces = {
            t["trace"]: task_calls(Path(t["file"]).read_text(errors="replace").splitlines(),
                                   "/bin/true")
            for t in lines if "trace" in t
        }  # fmt: skip
    jobs = [j for j in lines if "plugin" in j]
    plan_us, init_us, exec_us, task_us = [], [], [], []
    for job in (j for j in jobs if j["plugin"]):
        init: dict[str, int] = {}
        execd: dict[str, int] = {}
        for line in job["out"].splitlines():
            words = line.split()
            if words[:1] == ["us"] and len(words) == 4:
                plan_us.append(int(words[2]))
                init[words[1]] = int(words[3])
            elif words[:1] == ["topobind-flux-exec-us"] and len(words) == 3:
                execd[words[1]] = int(words[2])
        for task, us in init.items():
            init_us.append(us)
            exec_us.append(execd[task])
            task_us.append(us + execd[task])
    plain = [j["ms"] for j in jobs if not j["plugin"]]
    placed = [j["ms"] for j in jobs if j["plugin"]]
    per_task_ms = statistics.median(task_us) / 1000
    doc = {
        "benchmark": "flux-plugin",
        "flux": subprocess.run([str(FLUX), "version"], capture_output=True, text=True)
        .stdout.split("\n")[0]
        .split()[-1],
        "repeat": REPEAT,
        "tasks_per_job": 2,
        "per_task_us": {
            "task_init": summary(init_us),
            "task_exec": summary(exec_us),
            "total": summary(task_us),
        },
        "planning_per_node_ms": summary([u / 1000 for u in plan_us]),
        "job_wall_ms": {"plain": summary(plain), "plugin": summary(placed)},
        "per_task_syscalls": syscalls(traces),
        "target_task_ms": TARGET_TASK_MS,
        "per_task_ms": round(per_task_ms, 4),
        "meets_target": per_task_ms <= TARGET_TASK_MS,
        "load_avg": os.getloadavg()[0],
    }
    add_summary(doc, [target("Flux shell plugin per task (median)", doc["per_task_ms"],
                             f"<= {TARGET_TASK_MS} ms", doc["meets_target"], "ms")])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = OUT.with_suffix(".json.tmp")
    tmp_out.write_text(json.dumps(doc, indent=2) + "\n")
    tmp_out.replace(OUT)
    print(json.dumps(doc, indent=2))
    return 0 if doc["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
