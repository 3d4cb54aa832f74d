#!/usr/bin/env python3
"""Benchmark: a quick node acceptance of the local 3-node Slurm cluster (issue 30).

``topobind validate --site fleet --partition slurm --each-node --tags quick --confirm`` over
node1..node3 (root; the cluster is started in its own state directory and stopped after),
with the checks seeing a last-level cache of $BENCH_LLC (default 260M, through
$TOPOBIND_LLC_BYTES: the host of the issue), twice: without a fault (target: 'bad nodes: none'
in under 120 s) and with node3's slurmd in a cgroup of 25 % of one CPU (target: node3 named,
in under 180 s). Records the wall time of each, the LLC size and the bytes STREAM moved (its
stream-size.json files), in results/bench/acceptance.json. Run under
``flock /tmp/tb-slurm.lock`` (make bench-acceptance does).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / "build" / "local-slurm-bench"
LLC = os.environ.get("BENCH_LLC", "260M")
TOPOBIND = Path(sys.executable).parent / "topobind"
sys.path.insert(0, str(REPO / "scripts"))
from bench_summary import add_summary, target  # noqa: E402 (make bench's summary)
from fleet_faults import cpu_quota, fleet_sites  # noqa: E402

TARGETS = {"clean": 120.0, "throttled": 180.0}
#: $BENCH_KEEP=DIR: the run's sites, results and ReFrame reports go to a folder in DIR that is
#: kept (to see where the time went); by default a temporary folder, removed
KEEP = os.environ.get("BENCH_KEEP") or None


def sh(*argv: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"bench-acceptance: {' '.join(argv)} failed: {done.stderr[-800:]}")
    return done.stdout


def bytes_moved(results: Path, reports: list[Path]) -> tuple[int, int]:
    """(bytes STREAM moved, STREAM runs) of a validate run: its STREAM test cases that ran (in
    ``reports``, every rerun) x the bytes a run moves (``stream-size.json``: the same on every
    node, which see the same LLC)."""
    per_run = 0
    for f in results.rglob("stream-size.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            per_run = max(per_run, int(json.loads(f.read_text())["bytes_per_run"]))
    runs = 0
    for rep in reports:
        with contextlib.suppress(OSError, ValueError, KeyError):
            for run in json.loads(rep.read_text())["runs"]:
                runs += sum(1 for tc in run["testcases"] if tc["name"].startswith("StreamCheck")
                            and tc["result"] != "skip")  # fmt: skip
    return per_run * runs, runs


def jobs(reports: list[Path]) -> dict[str, int]:
    """Slurm jobs per node of a validate run (test cases that ran, every rerun, every report)."""
    out: dict[str, int] = {}
    for rep in reports:
        with contextlib.suppress(OSError, ValueError, KeyError):
            for run in json.loads(rep.read_text())["runs"]:
                for tc in run["testcases"]:
                    if tc["result"] != "skip":
                        node = tc["display_name"].rpartition("%.nid=")[2] or "?"
                        out[node] = out.get(node, 0) + 1
    return dict(sorted(out.items()))


def breakdown(reports: list[Path], took: float) -> dict[str, object]:
    """Where a validate run's time went: per ReFrame session (first pass, confirm) its
    wall time and, per node, the jobs, their seconds from submit to end (Slurm's start-up,
    the job's Python start-ups and the kernel) and the mean a job, by check; the rest of the
    run (topobind's start, sinfo, the conformance srun, the verdict) outside the sessions."""
    out: dict[str, object] = {}
    inside = 0.0
    for rep in reports:
        with contextlib.suppress(OSError, ValueError, KeyError):
            doc = json.loads(rep.read_text())
            label = rep.name.split("-fleet-")[0]
            label += "" if label not in out else f" {sum(k.startswith(label) for k in out) + 1}"
            elapsed = float(doc["session_info"]["time_elapsed"])
            inside += elapsed
            nodes: dict[str, dict[str, float]] = {}
            for run in doc["runs"]:
                for tc in run["testcases"]:
                    if tc["result"] == "skip" or tc.get("job_submit_time") is None:
                        continue
                    node = tc["display_name"].rpartition("%.nid=")[2] or "?"
                    check = tc["display_name"].split()[0]
                    job = float(tc["job_completion_time_unix"]) - float(tc["job_submit_time"])
                    n = nodes.setdefault(node, {"jobs": 0, "job_seconds": 0.0})
                    n["jobs"] += 1
                    n["job_seconds"] = round(n["job_seconds"] + job, 1)
                    n[f"{check} s/job"] = n.get(f"{check} s/job", 0.0) + job
                    n[f"{check} jobs"] = n.get(f"{check} jobs", 0) + 1
            for n in nodes.values():
                for k in [k for k in n if k.endswith(" s/job")]:
                    n[k] = round(n[k] / n[k.replace(" s/job", " jobs")], 1)
                    del n[k.replace(" s/job", " jobs")]
            out[label] = {"seconds": round(elapsed, 1), "nodes": dict(sorted(nodes.items()))}
    out["outside sessions"] = round(took - inside, 1)
    return out


def served(textdir: Path) -> list[str]:
    """The topobind_ lines the real node_exporter serves from ``textdir`` (textfile only)."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
         "--collector.disable-defaults", "--collector.textfile",
         f"--collector.textfile.directory={textdir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(50):
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
                return [ln for ln in text.splitlines() if ln.startswith("topobind_")]
            except OSError:
                time.sleep(0.2)
        return []
    finally:
        proc.terminate()
        proc.wait()


def validate(env: dict[str, str], results: Path, *extra: str) -> dict[str, object]:
    argv = [str(TOPOBIND), "validate", "--site", "fleet", "--partition", "slurm", "--each-node",
            "--tags", "quick", "--confirm", "--results", str(results), *extra]  # fmt: skip
    before = set((results / "reports").glob("*.json"))
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    took = time.monotonic() - t0
    lines = done.stdout.strip().splitlines()
    last = lines[-1] if lines else "(no output)"
    print(done.stdout[-3000:], flush=True)
    print(done.stderr[-1500:], file=sys.stderr, flush=True)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min average) at the end", flush=True)
    expected = next((ln for ln in lines if ln.startswith("expected run time")), "")
    reports = sorted(set((results / "reports").glob("*.json")) - before)
    moved, runs = bytes_moved(results, reports)
    per_node = jobs(reports)
    return {"seconds": round(took, 1), "exit": done.returncode, "bad_nodes_line": last,
            "expected": expected, "bytes_moved_stream": moved, "stream_runs": runs,
            "jobs_per_node": per_node, "loadavg_1min_after": round(os.getloadavg()[0], 2),
            "seconds_per_job": round(took / max(1, sum(per_node.values())), 1),
            "breakdown": breakdown(reports, took),
            "table": [ln for ln in lines
                      if ln.startswith(("node", "first pass", "weak:"))]}  # fmt: skip


def workdir() -> contextlib.AbstractContextManager[str]:
    """The run's folder: a temporary one, or one kept in $BENCH_KEEP."""
    if not KEEP:
        return tempfile.TemporaryDirectory(prefix="bench-acceptance-")
    Path(KEEP).mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(tempfile.mkdtemp(prefix="bench-acceptance-", dir=KEEP))


def main() -> int:
    if os.geteuid() != 0:
        print("bench-acceptance: needs root (the local Slurm cluster)", file=sys.stderr)
        return 2
    env = dict(os.environ, TOPOBIND_SLURM_DIR=str(STATE), TOPOBIND_SLURMD_TIMEOUT="300")
    env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    # the bytecode an installed package has: without it (PYTHONDONTWRITEBYTECODE=1) every
    # Python start-up in every job compiles topobind again, 0.2 s of CPU a start-up
    for tree in ("src", "reframe_tests"):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / tree)], check=True)
    sh(str(REPO / "scripts" / "local-slurm"), "start", "--nodes", "3", env=env)
    out: dict[str, object] = {"llc": LLC, "nodes": 3, "tags": "quick"}
    try:
        with workdir() as tmp:
            t = Path(tmp)
            venv = str(Path(sys.executable).parent)
            run_env = dict(env, SLURM_CONF=str(STATE / "slurm.conf"),
                           TOPOBIND_SITES_DIR=str(fleet_sites(t)), TOPOBIND_LLC_BYTES=LLC,
                           PATH=f"{venv}:{env.get('PATH', '')}")  # fmt: skip
            # one results directory: the second run's expected time is timed by the first
            out["clean"] = validate(run_env, t / "results")
            (t / "textfile").mkdir()
            with cpu_quota(STATE, "node3", 25, tag="topobind-bench"):
                out["throttled"] = validate(run_env, t / "results", "--metrics",
                                            str(t / "textfile" / "topobind.prom"))  # fmt: skip
            out["node_exporter"] = [ln for ln in served(t / "textfile")
                                    if "node_verdict{" in ln and ln.endswith(" 1")]  # fmt: skip
    finally:
        sh(str(REPO / "scripts" / "local-slurm"), "stop", env=env)
    clean, slow = out["clean"], out["throttled"]
    assert isinstance(clean, dict) and isinstance(slow, dict)
    out["ok"] = {
        "clean": clean["bad_nodes_line"] == "bad nodes: none" and clean["seconds"] < 120,
        "throttled": "node3" in str(slow["bad_nodes_line"]) and slow["seconds"] < 180,
    }
    add_summary(out, [
        target("clean run: bad nodes none", clean["seconds"], "'bad nodes: none' in < 120 s",
               bool(out["ok"]["clean"]), "s", note=str(clean["bad_nodes_line"])),
        target("node3 at 25 % CPU named", slow["seconds"], "node3 named in < 180 s",
               bool(out["ok"]["throttled"]), "s", note=str(slow["bad_nodes_line"])),
    ])  # fmt: skip
    dest = REPO / "results" / "bench" / "acceptance.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1) + "\n")
    for name in ("clean", "throttled"):
        r = out[name]
        assert isinstance(r, dict)
        print(f"{name}: {r['seconds']} s (target {TARGETS[name]:.0f} s), '{r['bad_nodes_line']}', "
              f"STREAM moved {int(r['bytes_moved_stream']) / 1e9:.1f} GB in {r['stream_runs']} "
              f"runs; LLC {LLC}; jobs per node {r['jobs_per_node']}, {r['seconds_per_job']} s "
              "a job (wall / jobs)")  # fmt: skip
        parts = r["breakdown"]
        assert isinstance(parts, dict)
        print(
            "  where it went: "
            + ", ".join(
                f"{k} {v['seconds'] if isinstance(v, dict) else v} s" for k, v in parts.items()
            )
        )
    print("node_exporter serves: " + "; ".join(map(str, out.get("node_exporter", []))))
    print(f"written: {dest}")
    return 0 if all(out["ok"].values()) else 1  # type: ignore[union-attr]


if __name__ == "__main__":
    sys.exit(main())
