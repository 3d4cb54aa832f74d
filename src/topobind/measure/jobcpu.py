"""The CPU time of a Slurm job's processes on this node outside the measuring process's own
tree: every step's ``slurmstepd`` and its descendants, read from ``/proc`` in a thread while a
measurement runs (:class:`Sampler`). An ``srun`` step's tasks are children of the step's
``slurmstepd``, not of the process that ran ``srun``, so ``getrusage`` misses them and the
host's load rule (:mod:`topobind.measure.cpuload`) would count them as other work. Used by
each ReFrame check's ``load.json`` (:mod:`topobind.validation.load`) and by ``topobind tune``
inside a Slurm allocation. Light: a check's job imports it on its node (no dataclasses, json,
re, subprocess, typing or pathlib)."""

from __future__ import annotations

import os
import threading
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping

SAMPLE_PERIOD = 0.1  # s between two samples of /proc inside a Slurm job (a 3-trial STREAM
# step on a small node lasts well under a second)
FULL_EVERY = 20  # every 20th sample rereads every process (about 3 ms of CPU on 120 of them;
# the others read only the new pids, the job's and the harness's)


class Proc(namedtuple("Proc", "pid ppid start cpu reaped name", defaults=("",))):
    """One process as ``/proc/PID/stat`` shows it (times in clock ticks): start, its
    starttime (with the pid, the process's identity: pids are reused); cpu, utime + stime;
    reaped, cutime + cstime (its waited-for children's); name, its comm."""

    __slots__ = ()

    @property
    def key(self) -> tuple[int, int]:
        return self.pid, self.start

    @property
    def total(self) -> int:
        return self.cpu + self.reaped


def parse_stat(text: str) -> Proc | None:
    """A ``/proc/PID/stat`` line, or None when it is not one."""
    head, paren, rest = text.rpartition(")")
    pid, _, name = head.partition(" (")
    f = rest.split()
    if not paren or len(f) < 20 or not pid.strip().isdigit():
        return None
    try:
        ppid, utime, stime, cutime, cstime, start = (int(f[i]) for i in (1, 11, 12, 13, 14, 19))
    except ValueError:
        return None
    return Proc(int(pid), ppid, start, utime + stime, cutime + cstime, name)


def read_procs(root: str = "/proc", pids: Iterable[int] | None = None) -> dict[int, Proc]:
    """Every process ``root`` shows (or only ``pids``), by pid."""
    if pids is None:
        try:
            pids = [int(n) for n in os.listdir(root) if n.isdigit()]
        except OSError:
            pids = []
    out: dict[int, Proc] = {}
    for pid in pids:
        try:
            fd = os.open(f"{root}/{pid}/stat", os.O_RDONLY)
            try:
                text = os.read(fd, 4096).decode(errors="replace")
            finally:
                os.close(fd)
        except OSError:  # gone meanwhile
            continue
        p = parse_stat(text)
        if p is not None:
            out[p.pid] = p
    return out


def step_daemons(procs: Mapping[int, Proc], job_id: str, cmdline: Callable[[int], str]) -> set[int]:
    """The ``slurmstepd`` of every step of Slurm job ``job_id`` (its title: ``slurmstepd:
    [JOBID.STEP]``)."""
    tag = f"[{job_id}."
    return {p.pid for p in procs.values() if p.name == "slurmstepd" and tag in cmdline(p.pid)}


def descendants(procs: Mapping[int, Proc], roots: set[int], skip: int) -> set[int]:
    """``roots`` and every process below them, leaving out ``skip`` and its subtree."""
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out: set[int] = set()
    todo = [r for r in roots if r != skip]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(c for c in children.get(pid, ()) if c != skip)
    return out


class JobCpu:
    """The CPU time a set of processes used between the first sample and the last, from
    samples of ``/proc``: each member's ``total`` (its own and its reaped children's time)
    now, less at the first sample (0 for one started later). A member that exits between two
    samples is reaped by its parent, whose ``total`` then holds the whole of it: when that
    parent (or the nearest ancestor still there) is a member, the exited one's last-seen time
    is taken off, so nothing counts twice. Membership sticks: a member orphaned to init stays
    one."""

    def __init__(self, first: Mapping[int, Proc]) -> None:
        self._first = {p.key: p.total for p in first.values()}
        self._prev: Mapping[int, Proc] = first
        self._seen: dict[tuple[int, int], list[int]] = {}  # key -> [base, last total]
        self._twice = 0

    def add(self, procs: Mapping[int, Proc], members: set[int]) -> None:
        for p in procs.values():
            entry = self._seen.get(p.key)
            if entry is not None:
                entry[1] = p.total
            elif p.pid in members:
                self._seen[p.key] = [self._first.get(p.key, 0), p.total]
        for old in self._prev.values():
            now = procs.get(old.pid)
            if (now is not None and now.start == old.start) or old.key not in self._seen:
                continue
            reaper = self._reaper(old, procs)
            if reaper is not None and reaper.key in self._seen:
                self._twice += self._seen[old.key][1]
        self._prev = procs

    def _reaper(self, gone: Proc, procs: Mapping[int, Proc]) -> Proc | None:
        pid = gone.ppid
        for _ in range(64):
            was, now = self._prev.get(pid), procs.get(pid)
            if now is not None and (was is None or was.start == now.start):
                return now
            if was is None:
                return None
            pid = was.ppid
        return None

    def live(self) -> set[int]:
        """The members present at the last sample."""
        return {pid for pid, p in self._prev.items() if p.key in self._seen}

    def ticks(self) -> int:
        return max(0, sum(last - base for base, last in self._seen.values()) - self._twice)


def harness_identity(pid: int | None = None, root: str = "/proc") -> str:
    """``PID:STARTTIME`` of process ``pid`` (this one by default), for
    ``$TOPOBIND_LOAD_HARNESS``; '' when /proc cannot tell."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"{root}/{pid}/stat") as fh:
            p = parse_stat(fh.read())
    except OSError:
        return ""
    return f"{p.pid}:{p.start}" if p else ""


def harness_key(text: str | None) -> tuple[int, int] | None:
    """(pid, starttime) of a ``PID:STARTTIME`` text, or None when it is not one (ASCII digits
    only: ``str.isdigit`` takes '²', which ``int`` refuses)."""
    pid, _, start = (text or "").partition(":")
    ok = all(t.isascii() and t.isdigit() and len(t) <= 20 for t in (pid, start))
    return (int(pid), int(start)) if ok else None


class Sampler:
    """Reads ``/proc`` every ``period`` seconds in a thread while a command runs: the CPU time
    of the Slurm job's processes outside process ``me``'s tree (:class:`JobCpu`), and the
    harness's own (``harness``: (pid, starttime), counted only when it runs on this host)."""

    def __init__(self, me: int, job_id: str, harness: tuple[int, int] | None,
                 root: str = "/proc", period: float = SAMPLE_PERIOD) -> None:  # fmt: skip
        self._me, self._job, self._harness = me, job_id, harness
        self._root, self._period = root, period
        self._cmdlines: dict[tuple[int, int], str] = {}
        self._stop = threading.Event()
        first = read_procs(root)
        self._last = first
        self._job_cpu = JobCpu(first)
        self._harness_ticks = [self._harness_cpu(first)] * 2
        self._add(first)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.error = ""  # why sampling stopped early, if it did

    def _cmdline(self, procs: Mapping[int, Proc], pid: int) -> str:
        key = procs[pid].key
        if key not in self._cmdlines:
            try:
                with open(f"{self._root}/{pid}/cmdline", "rb") as fh:
                    self._cmdlines[key] = fh.read(256).replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                return ""
        return self._cmdlines[key]

    def _harness_cpu(self, procs: Mapping[int, Proc]) -> int | None:
        if self._harness is None:
            return None
        p = procs.get(self._harness[0])
        return p.cpu if p is not None and p.start == self._harness[1] else None

    def _add(self, procs: Mapping[int, Proc]) -> None:
        members: set[int] = set()
        if self._job:
            roots = step_daemons(procs, self._job, lambda pid: self._cmdline(procs, pid))
            members = descendants(procs, roots, self._me)
        self._job_cpu.add(procs, members)
        cpu = self._harness_cpu(procs)
        if cpu is not None and self._harness_ticks[0] is not None:
            self._harness_ticks[1] = cpu

    def _loop(self) -> None:
        try:
            self._sample_until_stopped()
        except Exception as exc:  # a defect here must show in load.json, not end the check
            self.error = f"{type(exc).__name__}: {exc}"

    def _sample_until_stopped(self) -> None:
        n = 0
        while not self._stop.wait(self._period):
            n += 1
            self._add(self._read(full=n % FULL_EVERY == 0))

    def _read(self, full: bool) -> dict[int, Proc]:
        """/proc now: every process (``full``), or only the pids new since the last sample,
        the job's and the harness's, the others as last read (their times do not count)."""
        if full:
            procs = read_procs(self._root)
        else:
            try:
                pids = {int(n) for n in os.listdir(self._root) if n.isdigit()}
            except OSError:
                pids = set()
            fresh = (pids - self._last.keys()) | (pids & self._job_cpu.live())
            if self._harness is not None:
                fresh.add(self._harness[0])
            procs = {pid: p for pid, p in self._last.items() if pid in pids and pid not in fresh}
            procs.update(read_procs(self._root, fresh))
        self._last = procs
        return procs

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if not self.error:
            try:
                self._add(self._read(full=True))
            except Exception as exc:  # as in _loop
                self.error = f"{type(exc).__name__}: {exc}"

    def seconds(self) -> tuple[float, float]:
        """(the job's other processes', the harness's) CPU-seconds so far."""
        tick = os.sysconf("SC_CLK_TCK")
        h0, h1 = self._harness_ticks
        harness = (h1 - h0) if h0 is not None and h1 is not None else 0
        return self._job_cpu.ticks() / tick, max(0, harness) / tick
