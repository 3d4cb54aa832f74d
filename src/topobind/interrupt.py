"""Ctrl-C and SIGTERM while topobind waits by itself (for instance for the samples of
``topobind run --verify-running``): the wait ends with :class:`~topobind.errors.Interrupted`,
so the caller's ``finally`` blocks clean up and the CLI prints one line (no traceback, no
scratch directory left behind). A launch in progress is covered by :mod:`topobind.runner`."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from topobind.errors import Interrupted


@contextmanager
def stop_on_signals(during: str) -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM raise :class:`Interrupted` saying ``during``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Interrupted(signum, signal.Signals(signum).name, during)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM wait; the first one that came is raised again as
    the block ends, under the handler in force before it. Around the start of a child that a
    Ctrl-C must stop: the signal acts once the child is known (a ``Popen`` returned)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        pending.append(signum)

    old = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if pending:
            signal.raise_signal(pending[0])
