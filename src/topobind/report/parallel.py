"""Run independent chunks of report work on every CPU this process may use.

JSON decoding and matplotlib rendering are CPU-bound and hold the GIL, so threads do not
help; forked worker processes do (they inherit everything already read, nothing is sent
to them but an index). Falls back to a plain loop where fork is unavailable, on one CPU,
or for small inputs.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 8


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def fork_map(fn: Callable[[T], R], items: Sequence[T], min_items: int = 2) -> list[R]:
    """``[fn(x) for x in items]``, in order, spread over forked workers when worth it.

    An exception raised by ``fn`` for the earliest failing item is raised here, as in a loop
    (later items may already have run).
    """
    workers = min(MAX_WORKERS, usable_cpus(), len(items))
    if (
        workers < 2
        or len(items) < min_items
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        return [fn(x) for x in items]
    ctx = multiprocessing.get_context("fork")
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            return list(pool.map(fn, items))
    except (BrokenProcessPool, NotImplementedError, PermissionError):
        # no usable semaphores (some containers) or a worker died (e.g. killed for memory):
        # do the work here instead; errors of fn itself are not caught
        return [fn(x) for x in items]
