"""What the plugin benchmarks share (scripts/bench-spank.py, the SPANK plugin;
scripts/bench-flux.py, the Flux shell plugin): the summary of a list of times, and each task's
system calls read from an ``strace -f`` file, up to its execve of the program."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

#: file-system and descriptor calls (strace's %file and %desc, the ones a task set-up makes)
FS_CALLS = frozenset(
    {
        "open",
        "openat",
        "stat",
        "fstat",
        "lstat",
        "newfstatat",
        "statx",
        "access",
        "faccessat",
        "faccessat2",
        "readlink",
        "readlinkat",
        "read",
        "write",
        "close",
        "pread64",
        "lseek",
        "getdents64",
        "dup2",
        "dup3",
        "fcntl",
        "pipe2",
        "ioctl",
        "poll",
        "unlink",
        "mmap",
    }
)


def summary(samples: list[float]) -> dict[str, float]:
    """Median, 90th percentile, extremes and count of ``samples`` (rounded to 3 places)."""
    s = sorted(samples)
    return {
        "median": round(statistics.median(s), 3),
        "p90": round(s[int(0.9 * (len(s) - 1))], 3),
        "min": round(s[0], 3),
        "max": round(s[-1], 3),
        "n": len(s),
    }


def task_calls(lines: Iterable[str], program: str) -> list[list[str]]:
    """The calls of each task in an ``strace -f -qq`` output: a process's calls from its
    first line to its execve of ``program`` (what the launcher and its plugin do in the
    task); a process that never execs it (a daemon, a shell) is left out."""
    execs = re.compile(r'^(\d+)\s+execve\("' + re.escape(program) + '"')
    call = re.compile(r"^(\d+)\s+(\w+)\(")
    calls: dict[str, list[str]] = {}
    out = []
    for line in lines:
        if m := execs.match(line):
            out.append(calls.pop(m.group(1), []))
        elif m := call.match(line):
            calls.setdefault(m.group(1), []).append(m.group(2))
    return out


def fs_calls(task: list[str]) -> int:
    """How many of a task's calls are file-system or descriptor calls."""
    return sum(1 for c in task if c in FS_CALLS)


#: the checkout and the venv's bin/ of the running bench script (scripts/ is beside src/)
REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def cluster_env(state: Path) -> dict[str, str]:
    """The environment of the local cluster in ``state`` (scripts/local-slurm): no outer
    SLURM_*, its slurm.conf, the venv's tools first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env |= {"TOPOBIND_SLURM_DIR": str(state), "SLURM_CONF": str(state / "slurm.conf"),
            "PATH": f"{VENV_BIN}:{env.get('PATH', '')}"}  # fmt: skip
    return env


def local_slurm(cmd: list[str], env: dict[str, str]) -> None:
    """scripts/local-slurm CMD (10 minutes at most); its error ends the bench in one line."""
    done = subprocess.run([str(REPO / "scripts" / "local-slurm"), *cmd], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"local-slurm {' '.join(cmd)}: {done.stderr.strip()[-500:]}")
