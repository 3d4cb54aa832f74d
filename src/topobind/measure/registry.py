"""The benchmark kernels: one row each, the one table the rest is derived from or tested against.

A row says what a kernel is (its binary ``kernels/bin/NAME`` built from ``kernels/NAME.c``, or
an external program for HPL), which options ``topobind bench`` gives it, what its result holds
(metrics, headline, matrices: ``docs/results-format.md``) and which check families of the
catalogue (:data:`topobind.validation.sites.catalogue.CHECKS`) run it.

Derived from it: the kernels ``topobind bench`` runs and their options (:mod:`topobind.bench.runs`),
the kernels of ``topobind bench`` (``cli/main/commands/bench.py``). Tested against it
(``tests/measure/test_kernel_registry.py``): the programs ``kernels/Makefile`` builds (every
``kernels/*.c``; the per-rank step and the shim are in ``rankstep/``), the checks catalogue,
the headline table of ``docs/results-format.md`` and what the built kernels write. Adding a
kernel is one row here plus its C file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Kernel:
    """One benchmark kernel."""

    name: str
    summary: str  # one line for `topobind bench --help`
    metrics: tuple[str, ...]  # metric names of its result ("latency_*": one per size)
    headline: str | None  # "METRIC STAT" of its headline; None: the result has no headline
    big_buffer: bool  # takes --pages/--strict (its working set is one big allocation)
    local: bool = True  # built from kernels/NAME.c, run as one local process by `topobind bench`
    pins_own_threads: bool = False  # gets the plan's PUs as --cpus instead of an OpenMP binding
    matrices: tuple[str, ...] = ()  # matrix names it may write
    checks: tuple[str, ...] = ()  # check families (sites.catalogue.CHECKS) that run it
    quick_args: tuple[str, ...] = ()  # arguments for a run of well under a second (tests)

    @property
    def binary(self) -> str | None:
        """The file name in ``kernels/bin`` (None: an external program)."""
        return self.name if self.local else None


def _big_buffer(
    name: str,
    summary: str,
    metrics: tuple[str, ...],
    headline: str,
    quick: tuple[str, ...],
    matrices: tuple[str, ...] = (),
) -> Kernel:
    """A kernel whose working set is one big allocation (it takes --pages/--strict): the check
    family of its own name runs it, and its quick run asks for 4 KiB pages (every machine has
    them, a hugepage pool is not needed)."""
    return Kernel(
        name,
        summary,
        metrics,
        headline,
        big_buffer=True,
        matrices=matrices,
        checks=(name,),
        quick_args=(*quick, "--pages", "4k"),
    )


KERNELS: tuple[Kernel, ...] = (
    _big_buffer(
        "stream",
        "STREAM memory bandwidth (kernels/bin/stream), headline triad best MB/s",
        ("copy", "scale", "add", "triad", "copy_time", "scale_time", "add_time", "triad_time"),
        "triad best",
        quick=("--elements", "100000", "--trials", "2"),
    ),
    _big_buffer(
        "dgemm",
        "OpenBLAS DGEMM (kernels/bin/dgemm), headline median GFLOP/s",
        ("gflops", "seconds"),
        "gflops median",
        quick=("--n", "64", "--reps", "2"),
    ),
    _big_buffer(
        "latency",
        "pointer-chase load latency (kernels/bin/latency), ns at the largest size",
        ("latency_*",),
        "latency_* median",
        quick=("--sizes", "16K", "--trials", "1", "--min-time", "0.001"),
        matrices=("latency",),
    ),
    Kernel(
        "c2c",
        "core-to-core CAS ping-pong latency (kernels/bin/c2c), median ns over pairs",
        big_buffer=False,
        pins_own_threads=True,
        metrics=("c2c",),
        headline="c2c median",
        matrices=("c2c",),
        checks=("c2c",),
        quick_args=("--iters", "100", "--samples", "3"),
    ),
    Kernel(
        "whereami",
        "placement probe (kernels/bin/whereami): where every thread ran",
        big_buffer=False,
        metrics=(),
        headline=None,
    ),
    Kernel(
        "hpl",
        "HPL (Debian hpcc, or xhpl on PATH) under OpenMPI 4 mpirun, GFLOP/s",
        local=False,
        big_buffer=False,
        metrics=("gflops", "time"),
        headline="gflops best",
        checks=("hpl",),
    ),
)


def find(name: str) -> Kernel | None:
    """The row of kernel ``name`` (None: no such kernel)."""
    return next((k for k in KERNELS if k.name == name), None)


def local_kernels() -> tuple[Kernel, ...]:
    """The kernels ``topobind bench`` runs as one local process (``kernels/bin/NAME``)."""
    return tuple(k for k in KERNELS if k.local)


def metric_matches(pattern: str, name: str) -> bool:
    """``latency_*`` matches ``latency_1G``; any other pattern only itself."""
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern
