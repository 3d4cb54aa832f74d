"""The load a measurement ran under on this host: how much of the node's CPU time other
processes took meanwhile (``/proc/stat``'s busy time less the measuring process tree's own,
over the wall time). The one rule of ``topobind validate``, ``calibrate``
(:mod:`topobind.validation.load` adds a Slurm job's steps to the own time) and
``topobind tune`` (each run). A node is *busy* when other processes used more than
``BUSY_SHARE`` of its CPU time. Light: a ReFrame check's job imports it on its node (no
dataclasses, json, re, subprocess, typing or pathlib)."""

from __future__ import annotations

import os
import time
from collections import namedtuple

BUSY_SHARE = 0.25  # other processes' share of the CPU time above which a node is busy


def host_busy(stat: str = "/proc/stat") -> tuple[float, int] | None:
    """(CPU-seconds every CPU of the host spent busy, CPUs) from ``/proc/stat``, or None."""
    try:
        with open(stat, encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    head = next((ln.split() for ln in lines if ln.startswith("cpu ")), None)
    if head is None or len(head) < 8:
        return None
    ticks = [int(x) for x in head[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:].split(" ", 1)[0].isdigit())
    return busy / os.sysconf("SC_CLK_TCK"), max(cpus, 1)


class CpuSample(namedtuple("CpuSample", "wall busy own cpus loadavg")):
    """wall: time.monotonic(); busy: CPU-seconds every CPU of the host spent not idle
    (/proc/stat); own: CPU-seconds of this process and its waited-for descendants; cpus: the
    CPUs /proc/stat lists; loadavg: the 1-minute load average."""

    __slots__ = ()


def cpu_sample(stat: str = "/proc/stat") -> CpuSample | None:
    """The host's busy CPU time and this process tree's now, or None where /proc/stat cannot
    be read."""
    host = host_busy(stat)
    if host is None:
        return None
    import resource  # getrusage: microseconds (os.times rounds to clock ticks)

    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return CpuSample(
        wall=time.monotonic(),
        busy=host[0],
        own=me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
        cpus=host[1],
        loadavg=os.getloadavg()[0],
    )


class Load(namedtuple("Load", "cpus others_cpus seconds loadavg_1m")):
    """What other processes did to the node while it was measured: others_cpus, the CPUs
    other processes kept busy on average over ``seconds``; loadavg_1m at the start."""

    __slots__ = ()

    @property
    def share(self) -> float:
        return self.others_cpus / self.cpus

    @property
    def busy(self) -> bool:
        return self.share > BUSY_SHARE

    def text(self) -> str:
        return (
            f"other processes kept {self.others_cpus:.2f} of {self.cpus} CPUs busy "
            f"({100 * self.share:.0f} % of the CPU time; busy above {100 * BUSY_SHARE:.0f} %)"
        )

    def as_doc(self) -> dict[str, object]:
        return {
            "cpus": self.cpus,
            "others_cpus": round(self.others_cpus, 3),
            "share": round(self.share, 3),
            "busy": self.busy,
            "threshold": BUSY_SHARE,
            "seconds": round(self.seconds, 1),
            "loadavg_1m_at_start": round(self.loadavg_1m, 2),
        }


def load_between(
    start: CpuSample | None, end: CpuSample | None, also_own: float = 0.0
) -> Load | None:
    """The load between two samples; ``also_own``: CPU-seconds of the measurement outside
    this process tree (the job's other processes, the harness)."""
    if start is None or end is None or end.wall - start.wall <= 0:
        return None
    seconds = end.wall - start.wall
    own = (end.own - start.own) + also_own
    others = max(0.0, (end.busy - start.busy) - own) / seconds
    return Load(start.cpus, min(others, float(start.cpus)), seconds, start.loadavg)
