#!/usr/bin/env python3
"""Benchmark: node acceptance at scale on the local cluster (issue 39, item 6).

For each node count N of $BENCH_SCALE_NODES (default 8,16,32): a local Slurm cluster of N nodes
of its own (scripts/local-slurm, state directory under build/), then, side by side on that
cluster, with the same number of runs of each check ($BENCH_SCALE_REPEAT, default 3, as the
acceptance's verdict takes):

* ``topobind validate --each-node --tags smoke --repeat R`` (one job a node, the R runs inside
  it): wall time, Slurm submissions and RPCs (slurmctld's ``sdiag`` counters before and
  after), the CPU-seconds and peak resident memory of topobind's process tree (topobind and the
  sbatch/squeue/scontrol it waits for: getrusage of the children; the jobs run under slurmd,
  not in that tree), and the verdict line;
* for N in $BENCH_SCALE_REFRAME_NODES (default: every N), plain ReFrame ``--distribute=all``
  of the same checks at the same sizes with ``--reruns R-1`` (one job per check per node per
  run, the partition's max_jobs), on the same cluster: the same figures, and the ratios.

Targets (issue 39): on 32 nodes, under 6 minutes, at most 2 submissions a node, topobind's own
CPU at most 0.5 s a node; 10x fewer submissions and 3x less wall time than ReFrame. The load
average of the machine before and after each run is recorded (the machine is shared). Root;
takes /tmp/tb-slurm.lock for each size (not the whole run: the cluster tests of other
checkouts wait for one size at most). Writes results/bench/scale.json and scale.md (the table).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_summary import add_summary, target  # scripts/: make bench's summary
from bench_timing import cluster_env, local_slurm  # scripts/: the bench scripts' library

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
NODES = [int(n) for n in os.environ.get("BENCH_SCALE_NODES", "8,16,32").split(",") if n]
REFRAME_NODES = {int(n) for n in os.environ.get("BENCH_SCALE_REFRAME_NODES",
                 ",".join(map(str, NODES))).split(",") if n}  # fmt: skip
REPEAT = int(os.environ.get("BENCH_SCALE_REPEAT", "3"))
LOCK = Path("/tmp/tb-slurm.lock")
TARGET_WALL_S, TARGET_JOBS_PER_NODE, TARGET_CPU_PER_NODE = 360.0, 2.0, 0.5


def sdiag(env: dict[str, str]) -> dict[str, int]:
    """slurmctld's counters: jobs submitted, and the RPCs by message type (total)."""
    out = subprocess.run(["sdiag"], env=env, capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"Jobs submitted:\s+(\d+)", out)
    rpc_part = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    rpc_part = rpc_part.split("Remote Procedure Call statistics by user", 1)[0]
    rpcs = sum(int(c) for c in re.findall(r"count:(\d+)", rpc_part))
    return {"submitted": int(m.group(1)) if m else -1, "rpcs": rpcs}


def timed(argv: list[str], env: dict[str, str], log: Path) -> dict[str, object]:
    """Run ``argv``: wall time, the CPU and peak RSS of its process tree, exit, last line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = _machine_busy_s()
    t0 = time.monotonic()
    # GNU time's %M: this command's own peak (ru_maxrss of the children is the largest of all
    # children so far, an earlier ReFrame's included)
    argv = ["/usr/bin/time", "-f", "tb-peak-kib %M", *argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    busy = _machine_busy_s() - busy0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    lines = done.stdout.strip().splitlines() or ["(no output)"]
    return {"wall_s": round(wall, 1), "exit": done.returncode,
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "peak_rss_mib": _peak_mib(done.stderr), "last_line": lines[-1],
            "machine_busy_s": round(busy, 1),
            "log": str(log.relative_to(REPO))}  # fmt: skip


def _machine_busy_s() -> float:
    """The machine's busy CPU-seconds so far (/proc/stat: every process, the jobs under
    slurmd and slurmctld included, and any other work of the machine)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _peak_mib(stderr: str) -> float | None:
    m = re.findall(r"^tb-peak-kib (\d+)$", stderr, re.M)
    return round(int(m[-1]) / 1024, 1) if m else None


def ours(n: int, env: dict[str, str], results: Path) -> dict[str, object]:
    argv = [str(VENV_BIN / "topobind"), "validate", "--site", "local", "--partition", "slurm",
            "--each-node", "--tags", "smoke", "--repeat", str(REPEAT), "--quiet",
            "--results", str(results)]  # fmt: skip
    s0 = sdiag(env)
    got = timed(argv, env, results / f"topobind-{n}.log")
    s1 = sdiag(env)
    got["submissions"] = s1["submitted"] - s0["submitted"]
    got["rpcs"] = s1["rpcs"] - s0["rpcs"]
    return got


def plain_reframe(n: int, env: dict[str, str], results: Path) -> dict[str, object]:
    """ReFrame --distribute=all of the same checks at the same sizes (the old path)."""
    sys.path.insert(0, str(REPO / "src"))
    from topobind.validation import acceptance, node_jobs

    sets = acceptance.quick_setvars("quick", node_jobs.smoke_setvars({}))  # as _tier
    argv = [str(VENV_BIN / "reframe"), "-C", str(REPO / "site_configs" / "reframe_config.py"),
            "-c", str(REPO / "reframe_tests"), "--system", "local:slurm", "-t", "quick",
            "--distribute=all", "-x", "NodeCheck", *acceptance.quick_exclusions("quick", None),
            "--exec-policy", "async", "--nocolor",
            "--report-file", str(results / f"reframe-{n}.json")]  # fmt: skip
    for k, v in sets.items():
        argv += ["-S", f"{k}={v}"]
    if REPEAT > 1:  # the same runs of each check as topobind's --repeat (validation.py's path)
        argv += ["--reruns", str(REPEAT - 1)]
    argv.append("-r")
    renv = env | {"TOPOBIND_REFRAME_RESULTS": str(results), "TOPOBIND_SITE": "local",
                  "RFM_POLL_RATE_DECAY": "0.02"}  # fmt: skip
    s0 = sdiag(env)
    got = timed(argv, renv, results / f"reframe-{n}.log")
    s1 = sdiag(env)
    got["submissions"] = s1["submitted"] - s0["submitted"]
    got["rpcs"] = s1["rpcs"] - s0["rpcs"]
    return got


def _ratio(theirs: object, mine: object) -> float:
    return round(float(theirs) / max(0.01, float(mine)), 1)  # type: ignore[arg-type]


def one_size(n: int) -> dict[str, object]:
    state = REPO / "build" / f"bench-scale-{n}"
    results = REPO / "results" / "bench" / "scale" / f"n{n}"
    results.mkdir(parents=True, exist_ok=True)
    env = cluster_env(state)
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        t0 = time.monotonic()
        local_slurm(["start", "--nodes", str(n)], env)
        row: dict[str, object] = {"nodes": n, "repeat": REPEAT,
                                  "cluster_start_s": round(time.monotonic() - t0, 1)}  # fmt: skip
        try:
            row["load_before"] = os.getloadavg()[0]
            mine = ours(n, env, results)
            row["load_after"] = os.getloadavg()[0]
            row["topobind"] = mine
            row["jobs_per_node"] = round(int(mine["submissions"]) / n, 2)  # type: ignore[arg-type]
            row["cpu_s_per_node"] = round(float(mine["cpu_s"]) / n, 3)  # type: ignore[arg-type]
            if n in REFRAME_NODES:
                row["load_before_reframe"] = os.getloadavg()[0]
                rf = plain_reframe(n, env, results)
                row["load_after_reframe"] = os.getloadavg()[0]
                row["reframe"] = rf
                for key in ("submissions", "wall_s", "rpcs", "cpu_s"):
                    row[f"ratio_{key}"] = _ratio(rf[key], mine[key])
        finally:
            local_slurm(["stop"], env)
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict[str, object]]) -> str:
    """The side-by-side table (Markdown): one line a size and side, then the ratios."""
    head = (
        "| nodes | runs | side | wall s | submissions | a node | slurmctld RPCs | CPU s "
        "| CPU s a node | peak MiB | load before/after | last line |"
    )
    out = [head, "|" + "---|" * 12]
    for row in rows:
        n = int(row["nodes"])  # type: ignore[arg-type]
        for side, tag in (("topobind", ""), ("reframe", "_reframe")):
            got = row.get(side)
            if not isinstance(got, dict):
                continue
            out.append(f"| {n} | {row['repeat']} | {side} | {got['wall_s']} | {got['submissions']} "
                       f"| {int(got['submissions']) / n:.2f} | {got['rpcs']} | {got['cpu_s']} "
                       f"| {float(got['cpu_s']) / n:.3f} | {got['peak_rss_mib']} "
                       f"| {row.get('load_before' + tag)}/{row.get('load_after' + tag)} "
                       f"| {str(got['last_line'])[:60]} |")  # fmt: skip
    out += [
        "",
        "| nodes | submissions ReFrame/topobind | wall | RPCs | CPU |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if "ratio_wall_s" in row:
            out.append(f"| {row['nodes']} | {row['ratio_submissions']}x | {row['ratio_wall_s']}x "
                       f"| {row['ratio_rpcs']}x | {row['ratio_cpu_s']}x |")  # fmt: skip
    return "\n".join(out) + "\n"


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def summary_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """make bench's summary: the largest size's figures against the targets."""
    big = max(rows, key=lambda r: int(r["nodes"]))  # type: ignore[call-overload]
    n, mine = big["nodes"], big["topobind"]
    assert isinstance(mine, dict)
    wall = float(mine["wall_s"])
    jobs, cpu = float(big["jobs_per_node"]), float(big["cpu_s_per_node"])  # type: ignore[arg-type]
    out = [target(f"{n} nodes: acceptance wall", wall, f"<= {TARGET_WALL_S:g} s at 32",
                  wall <= TARGET_WALL_S if n == 32 else "not-run", "s"),
           target(f"{n} nodes: jobs per node", jobs, f"<= {TARGET_JOBS_PER_NODE:g}",
                  jobs <= TARGET_JOBS_PER_NODE),
           target(f"{n} nodes: CPU a node", cpu, f"<= {TARGET_CPU_PER_NODE:g} s",
                  cpu <= TARGET_CPU_PER_NODE, "s")]  # fmt: skip
    for key, goal in (("ratio_submissions", 10.0), ("ratio_wall_s", 3.0)):
        if key in big:
            got = float(big[key])  # type: ignore[arg-type]
            out.append(target(f"{n} nodes: ReFrame / topobind {key[6:]}", got, f">= {goal:g}x",
                              got >= goal, "x"))  # fmt: skip
    return out


def main() -> int:
    out = REPO / "results" / "bench" / "scale.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    # the bytecode an installed package has (as bench-acceptance and bench-reframe-ci): without
    # it (PYTHONDONTWRITEBYTECODE=1) every Python start-up in every job, on both sides,
    # compiles topobind again: 0.08 of topobind run's 0.2 CPU-s, 0.09 CPU-s a smoke case
    for tree in ("src", "reframe_tests"):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / tree)], check=True)
    for n in NODES:
        rows.append(one_size(n))
        doc = {"bench": "scale", "issue": 39, "machine": {"cpus": os.cpu_count(),
               "note": "shared with other work: see load_before/after"},
               "targets": {"wall_s_32": TARGET_WALL_S, "jobs_per_node": TARGET_JOBS_PER_NODE,
                           "cpu_s_per_node": TARGET_CPU_PER_NODE, "ratio_submissions": 10,
                           "ratio_wall_s": 3},
               "rows": rows}  # fmt: skip
        add_summary(doc, summary_rows(rows))
        _write(out, json.dumps(doc, indent=2) + "\n")  # after each size: a long run keeps its rows
        _write(out.with_suffix(".md"), table(rows))
    print(table(rows))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
