"""The per-rank step's samples of a running program (``topobind run --verify-running``).

rankexec's sampler (rankstep/rankexec.c) writes one JSON line per rank: every thread of the
program it exec'd and of the program's descendants, each with its process (id, name) and
whether that process is a *wrapper*, one with children of its own (``/usr/bin/time``,
``perf stat``, a shell, ``taskset``...), and the CPUs the rank was started on. The planned
places are matched with the threads of the processes that are not wrappers: the real program,
wherever a wrapper put it. Every other thread, a wrapper's included, must stay where the rank
was put: on the rank's planned CPUs or on the CPUs it was started on. A program that forks a
helper and then moves itself has children, and is a MISMATCH all the same (:func:`moved_rows`).

:func:`explain` turns the comparison's rows (:func:`topobind.launch.verify.compare`) into what was
seen: a place no thread took in a program that ran fewer threads than planned is UNUSED (with
how many ran), not MISSING; a rank whose program had ended before its sample says so; a
mismatch names the process under its wrappers.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from topobind.errors import plural
from topobind.launch.verify import Observed, Row
from topobind.topo.topology import format_list

_MAX_FILE = 1 << 20  # a sample of 4096 threads is about 500 KB


@dataclass(frozen=True)
class SampledThread:
    observed: Observed
    pid: int
    process: str
    wrapper: bool  # its process has children: not the program itself


@dataclass(frozen=True)
class Sample:
    """One rank's sample: what its step saw ``after_ms`` (+ ``waited_ms``) after the start."""

    host: str
    rank: int
    after_ms: int
    waited_ms: int
    wanted: int  # OMP_NUM_THREADS of the rank (-1: not set)
    ended: bool  # the program was gone at the sampler's last look
    threads: tuple[SampledThread, ...]
    #: the program's memory (rankexec's sample_memory: numa_maps bytes by NUMA node and page
    #: size, THP, large mappings; topobind.launch.verify_memory); None: not read (it was gone)
    memory: dict[str, object] | None = None
    #: the CPUs the rank was started on (the launch's binding; empty: an older sampler)
    started_on: tuple[int, ...] = ()

    def judged(self) -> list[SampledThread]:
        """The program's threads: those of processes that are not wrappers."""
        own = [t for t in self.threads if not t.wrapper]
        return own or list(self.threads)

    def wrappers(self) -> list[str]:
        names: list[str] = []
        for t in self.threads:
            if t.wrapper and t.process not in names:
                names.append(t.process)
        return names


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"not an integer: {v!r}")
    return v


def _list(v: object) -> list[object]:
    if not isinstance(v, list):
        raise ValueError(f"not a list: {v!r}")
    return v


def _thread(p: object, host: str) -> SampledThread:
    if not isinstance(p, dict):
        raise ValueError("a placement entry is not an object")
    affinity = p.get("affinity", [])
    if not isinstance(affinity, list):
        raise ValueError("affinity is not a list")
    o = Observed(
        host=str(p.get("host", host)),
        rank=_int(p["rank"]),
        thread=_int(p["thread"]),
        cpu=_int(p["cpu"]),
        affinity=tuple(_int(x) for x in affinity),
    )
    return SampledThread(
        o, _int(p.get("pid", -1)), str(p.get("process", "?")), p.get("wrapper") is True
    )


def parse_sample(line: str) -> Sample | None:
    """One sample line; None when it is not a well-formed sample (a tampered or torn file)."""
    try:
        doc = json.loads(line)
        if not isinstance(doc, dict) or doc.get("kernel") != "whereami":
            return None
        host = str(doc.get("host", "?"))
        placement = doc.get("placement", [])
        if not isinstance(placement, list):
            return None
        return Sample(
            host=host,
            rank=_int(doc["rank"]),
            after_ms=_int(doc.get("after_ms", 0)),
            waited_ms=_int(doc.get("waited_ms", 0)),
            wanted=_int(doc.get("threads_wanted", -1)),
            ended=doc.get("ended") is True,
            threads=tuple(_thread(p, host) for p in placement),
            memory=memory if isinstance(memory := doc.get("memory"), dict) else None,
            started_on=tuple(_int(c) for c in _list(doc.get("started_on", []))),
        )
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def sample_files(where: str) -> list[str]:
    """The sample files the ranks' samplers wrote into the job directory ``where``, by name."""
    names = [n for n in os.listdir(where) if n.startswith("sample-") and n.endswith(".json")]
    return [os.path.join(where, n) for n in sorted(names)]


def read_sample_files(paths: Sequence[str]) -> list[Sample]:
    """The samples in ``paths`` (one line each); unreadable or malformed files are left out
    (their ranks are then MISSING)."""
    out: list[Sample] = []
    for path in paths:
        text = _read_sample(path)
        if text is None:
            continue
        for line in text.splitlines():
            sample = parse_sample(line) if line.strip() else None
            if sample is not None:
                out.append(sample)
    return out


def _read_sample(path: str) -> str | None:
    """A sample file's text (bounded, bad bytes replaced); None for one that is not a regular
    file (a FIFO put in the job directory never blocks the read) or cannot be read."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _MAX_FILE).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def judged_threads(samples: Sequence[Sample]) -> list[Observed]:
    """The threads the plan is compared with: every rank's program, without its wrappers."""
    return [t.observed for s in samples for t in s.judged()]


def _when(s: Sample) -> str:
    if s.waited_ms:
        return f"sampled {s.after_ms}..{s.after_ms + s.waited_ms} ms after start"
    return f"sampled {s.after_ms} ms after start"


def _explain_row(row: Row, s: Sample | None, planned: int) -> Row:
    if s is None:
        if row.status == "MISSING" and row.observed is None:
            why = "no sample from this rank: it never started, or its step failed"
            return dataclasses.replace(row, reason=why)
        return row
    ran = len(s.judged())
    if row.status == "MISSING" and ran and row.observed is None:
        why = f"the program ran {plural(ran, 'thread')} of the {planned} planned"
        if s.ended:
            why += " and ended"
        return dataclasses.replace(row, status="UNUSED", reason=f"{why}; {_when(s)}")
    if row.status == "MISSING" and not ran and s.ended:
        return dataclasses.replace(
            row,
            reason=f"the program had ended before its sample at {s.after_ms} ms, nothing "
            "observed; a process it left running is not followed",
        )
    if row.status == "MISMATCH" and row.observed is not None and s.wrappers():
        proc = next((t for t in s.threads if t.observed == row.observed), None)
        if proc is not None:
            under = ", ".join(s.wrappers())
            return dataclasses.replace(
                row, reason=f"{row.reason}; in {proc.process} (pid {proc.pid}) under {under}"
            )
    return row


def explain(rows: Sequence[Row], samples: Sequence[Sample]) -> list[Row]:
    """The rows of a comparison with what the samples say about each rank (see the module),
    and a MISMATCH row for each thread that moved off the rank's CPUs (:func:`moved_rows`)."""
    by_rank: dict[int, Sample] = {}
    for s in samples:
        by_rank.setdefault(s.rank, s)
    planned: dict[int, int] = {}
    for r in rows:
        if r.status != "UNPLANNED":
            planned[r.rank] = planned.get(r.rank, 0) + 1
    out = [_explain_row(r, by_rank.get(r.rank), planned.get(r.rank, 0)) for r in rows]
    out += moved_rows(rows, samples)
    out.sort(key=lambda r: (r.rank, r.thread))
    return out


def _moved(o: Observed, cpus: set[int], started: tuple[int, ...]) -> bool:
    """A thread whose mask is neither inside the rank's planned CPUs nor the one the rank was
    started on (an older sampler without it: not wider than the planned CPUs either)."""
    mask = set(o.affinity)
    if not mask or mask <= cpus:
        return False
    return mask != set(started) if started else not mask >= cpus


def moved_rows(rows: Sequence[Row], samples: Sequence[Sample]) -> list[Row]:
    """MISMATCH rows for the threads of a rank's processes, wrappers included, that the
    comparison did not judge (a wrapper's, an MPI library's) and that moved off the rank's
    CPUs (:func:`_moved`): a program that forks a helper and then moves itself has children,
    and is judged all the same. Numbered after the rank's planned threads."""
    cpus: dict[int, set[int]] = {}
    judged: set[Observed] = set()
    for r in rows:
        if r.status != "UNPLANNED":
            cpus.setdefault(r.rank, set()).update(r.planned)
        if r.observed is not None:
            judged.add(r.observed)
    out: list[Row] = []
    for s in samples:
        mine = cpus.get(s.rank)
        if not mine:
            continue
        number = sum(1 for r in rows if r.rank == s.rank)
        for t in s.threads:
            o = t.observed
            if o in judged or not _moved(o, mine, s.started_on):
                continue
            kind = "has children" if t.wrapper else "is not matched to a planned thread"
            why = (
                f"{t.process} (pid {t.pid}, which {kind}) moved off the rank's CPUs: ran on "
                f"{o.cpu}, affinity {format_list(o.affinity)}, planned {format_list(mine)}"
            )
            out.append(Row(s.rank, number, tuple(sorted(mine)), o, "MISMATCH", why))
            number += 1
    return out
