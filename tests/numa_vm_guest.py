"""The batch the multi-NUMA guest runs for tests/launch/test_numa_vm.py (not a test module).

    python numa_vm_guest.py SPEC.json

SPEC: ``{"out": PATH, "jobs": N, "cases": [{"name", "argv", "env", "timeout", "alone"}, ...]}``.
Every case runs once, up to ``jobs`` at a time, in the spec's order; a case with ``alone`` true
waits until no other case runs and none starts beside it (what it measures is node-wide: the
numastat deltas of its evidence, a CPU hog on one NUMA node). The results go to ``out``
(atomically: a JSON object of ``name -> {status, stdout, stderr, seconds}``; status 124 for a
case stopped at its timeout) in a directory the host can read (scripts/numa-vm --rwdir).

A case whose argv starts with ``topobind`` runs ``topobind.cli.main.main(argv[1:])`` in a forked
child of this process, which imported topobind once: the same code as the console script,
without a fresh interpreter per case (about 12 s of imports each in the emulated guest). Any
other argv is executed as it is.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field

import topobind.cli.commands.run  # noqa: F401  (imported before the forks: once for every case)
import topobind.cli.main
import topobind.launch.run  # noqa: F401


@dataclass
class Case:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 600.0
    alone: bool = False  # nothing else runs beside it


@dataclass
class Running:
    case: Case
    pid: int
    out: int
    err: int
    start: float


def _child(case: Case, out: int, err: int) -> None:
    """In the forked child: own process group, output to the two files, run, exit."""
    try:
        os.setsid()
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.environ.update(case.env)
        if case.argv[0] == "topobind":
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            status = topobind.cli.main.main(case.argv[1:])
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
        os.execvp(case.argv[0], case.argv)
    except BaseException as exc:  # anything at all: report it as the case's failure
        os.write(2, f"numa_vm_guest: {case.name}: {exc!r}\n".encode())
        os._exit(127)


def start(case: Case) -> Running:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(case, out.fileno(), err.fileno())
        return Running(case, pid, os.dup(out.fileno()), os.dup(err.fileno()), time.monotonic())


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def finish(run: Running, status: int) -> dict[str, object]:
    return {
        "status": status,
        "stdout": _read(run.out),
        "stderr": _read(run.err),
        "seconds": round(time.monotonic() - run.start, 1),
    }


def _waits(case: Case, running: dict[int, Running]) -> bool:
    """Whether CASE must wait: it runs alone, or an alone case runs."""
    return bool(running) and (case.alone or any(r.case.alone for r in running.values()))


def run_all(cases: list[Case], jobs: int) -> dict[str, dict[str, object]]:
    todo, running, done = list(cases), {}, {}
    while todo or running:
        while todo and len(running) < jobs and not _waits(todo[0], running):
            r = start(todo.pop(0))
            running[r.pid] = r
        for pid, r in list(running.items()):
            got, wstatus = os.waitpid(pid, os.WNOHANG)
            if got:
                done[r.case.name] = finish(r, os.waitstatus_to_exitcode(wstatus))
                del running[pid]
            elif time.monotonic() - r.start > r.case.timeout:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                done[r.case.name] = finish(r, 124)
                del running[pid]
        time.sleep(0.2)
    return done


def main(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    cases = [Case(**c) for c in spec["cases"]]
    results = run_all(cases, int(spec.get("jobs", 1)))
    tmp = spec["out"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    os.replace(tmp, spec["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
