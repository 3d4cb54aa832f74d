"""The load a measurement ran under: how much of the node's CPU time other processes took
meanwhile. The one rule for ``topobind calibrate``, ``topobind validate`` and every ReFrame
check's ``load.json`` (``reframe_tests/topobind_rfm/probe.py load``).

others = the host's busy CPU time (``/proc/stat``: every CPU, neither idle nor iowait) minus
the measurement's own, over the wall time. The measurement's own CPU time is

- its process tree: the measuring process and its waited-for descendants (``getrusage``);
- inside a Slurm job, every other process of the same job: the ``slurmstepd`` of each of its
  steps and their descendants. An ``srun`` step's tasks (the kernel itself, under ``topobind
  run --launcher srun``) are children of the step's ``slurmstepd``, not of the job script, so
  without this their CPU time counted as other work (a check alone on a quiet node recorded
  30 to 92 %). They are read from ``/proc`` every ``SAMPLE_PERIOD`` while the command runs
  (the new pids, the job's and the harness's; every process every ``FULL_EVERY`` samples);
  a process that exits between two samples is counted through the parent that reaps it
  (``cutime``), and the last ``SAMPLE_PERIOD`` of a step whose ``slurmstepd`` is reaped outside
  the job is the only time lost (counted as other work: the error only ever warns more);
- the harness that submitted the job (ReFrame) when it runs on the same host (the local
  cluster, a local partition): its own CPU time only, not its children's (those include other
  checks' jobs), named by ``$TOPOBIND_LOAD_HARNESS`` (``PID:STARTTIME``, see
  ``harness_identity``).

Anything else is other work: another job (on this node or, on the local cluster, on a node
that shares the machine), a user's loop, daemons. A node is *busy* when other processes used
more than ``BUSY_SHARE`` of its CPU time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from topobind.measure.cpuload import (  # noqa: F401  (the one rule, re-exported)
    BUSY_SHARE,
    CpuSample,
    Load,
    cpu_sample,
    host_busy,
    load_between,
)

# the job's steps; harness_identity re-exported for the checks, beside HARNESS_VARIABLE
from topobind.measure.jobcpu import Sampler, harness_identity, harness_key  # noqa: F401

# Every ReFrame check's job starts this module (probe.py load) on its node, throttled or not:
# it imports no dataclasses, json, re, subprocess, typing or pathlib (0.05 s of CPU less a job)

HARNESS_VARIABLE = "TOPOBIND_LOAD_HARNESS"


# --------------------------------------------------------------------------- the host
# the host's rule lives in measure/cpuload.py (topobind tune judges its runs by it too):
# BUSY_SHARE, host_busy, CpuSample, cpu_sample, Load, load_between, re-exported here; the
# Slurm job's steps (Sampler and its parts) live in measure/jobcpu.py, which tune uses too


# --------------------------------------------------------------------------- the command
def _call(cmd: Sequence[str]) -> int:
    """Run ``cmd``; its exit status as a shell gives it: 128+N when signal N ended it, 127
    (not found) or 126 (cannot run) with one line on stderr when it cannot be started."""
    try:
        pid = os.posix_spawnp(cmd[0], list(cmd), os.environ)
    except OSError as exc:
        _say(f"{cmd[0]}: {exc.strerror or exc}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return 128 - code if code < 0 else code


def _say(line: str) -> None:
    os.write(2, f"topobind load: {line}\n".encode("utf-8", "replace"))


def _unwritable(out: str) -> str:
    """Why ``out`` cannot take the load document ('' when it can): the rule of every output of
    topobind (:mod:`topobind.fsutil`, not imported on this path): a path that exists and is not
    a regular file is never replaced; its directory must take a new file."""
    if out in ("", "-"):
        return f"{out!r} is no file name"
    if os.path.lexists(out):
        try:
            regular = (os.stat(out).st_mode & 0o170000) == 0o100000
        except OSError:
            regular = False
        if not regular:
            return f"{out} exists and is not a regular file (never replaced)"
    probe = os.path.join(os.path.dirname(os.path.abspath(out)), f".load-probe.{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write {out} ({exc.strerror or exc})"
    return ""


def _escape(c: str) -> str:
    n = ord(c)
    if n > 0xFFFF:  # a surrogate pair
        n -= 0x10000
        return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"
    return f"\\u{n:04x}"


def json_text(value: object) -> str:
    """``json.dumps`` of a load document (dicts, strings, numbers, booleans, None)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json_text(str(k))}: {json_text(v)}"
                               for k, v in value.items()) + "}"  # fmt: skip
    if isinstance(value, str):
        return '"' + "".join(c if " " <= c < "\x7f" and c not in '"\\' else _escape(c)
                             for c in value) + '"'  # fmt: skip
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float) and value == value and abs(value) != float("inf"):
        return repr(value)
    raise ValueError(f"not a load document value: {value!r}")


def run_measured(cmd: Sequence[str], out: str, env: Mapping[str, str] | None = None) -> int:
    """Run ``cmd``; write ``out`` (JSON): the load it ran under; return its exit status (a
    shell's: 127/126 when it cannot start, 128+N for signal N). An ``out`` that cannot be
    written is said in one line before the command runs (status 2, the command not run)."""
    env = os.environ if env is None else env
    why = _unwritable(out)
    if why:
        _say(f"{why}; give a writable load document path")
        return 2
    job, harness = env.get("SLURM_JOB_ID", ""), harness_key(env.get(HARNESS_VARIABLE))
    sampler, error = None, ""
    try:
        sampler = Sampler(os.getpid(), job, harness) if job or harness else None
    except Exception as exc:  # the command runs anyway; load.json says why it lacks the job
        error = f"{type(exc).__name__}: {exc}"
    start = cpu_sample()
    if sampler is not None:
        sampler.start()
    status = _call(cmd)
    if sampler is not None:
        sampler.stop()
    end = cpu_sample()
    job_s, harness_s = sampler.seconds() if sampler is not None else (0.0, 0.0)
    load = load_between(start, end, also_own=job_s + harness_s)
    if load is None or start is None or end is None:
        return status
    tree = end.own - start.own
    doc = {
        "cpus": load.cpus,
        "seconds": round(load.seconds, 3),
        "own_cpu_seconds": round(tree + job_s + harness_s, 3),
        # the measurement's own CPU time: its process tree, the job's other processes
        # (its steps), the harness's (ReFrame, on this host)
        "own_by": {"tree": round(tree, 3), "job": round(job_s, 3), "harness": round(harness_s, 3)},
        "others_cpus": round(load.others_cpus, 3),
        "others_share": round(load.share, 3),
        "busy": load.busy,
        "busy_share_limit": BUSY_SHARE,
        "loadavg_1m_at_start": round(load.loadavg_1m, 2),
    }
    error = error or (sampler.error if sampler is not None else "")
    if error:
        doc["sampling_error"] = error
    text = json_text(doc)  # before the file: a value it cannot hold leaves nothing behind
    with open(out + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(out + ".tmp", out)
    return status
