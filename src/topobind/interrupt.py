"""Ctrl-C and SIGTERM while topobind waits by itself (for instance for the samples of
``topobind run --verify-running``): the wait ends with :class:`~topobind.errors.Interrupted`,
so the caller's ``finally`` blocks clean up and the CLI prints one line (no traceback, no
scratch directory left behind). A launch in progress is covered by :mod:`topobind.runner`."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from topobind.errors import Interrupted


@contextmanager
def _handled(handler: Callable[[int, object], None]) -> Iterator[None]:
    """Inside the block ``handler`` takes SIGINT and SIGTERM (main thread only: elsewhere
    Python sets no handler); the handlers before it are back as the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def stop_on_signals(during: str) -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM raise :class:`Interrupted` saying ``during``."""

    def stop(signum: int, _frame: object) -> None:
        raise Interrupted(signum, signal.Signals(signum).name, during)

    with _handled(stop):
        yield


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM wait; the first one that came is raised again as
    the block ends, under the handler in force before it. Around the start of a child that a
    Ctrl-C must stop: the signal acts once the child is known (a ``Popen`` returned)."""
    pending: list[int] = []
    try:
        with _handled(lambda signum, _frame: pending.append(signum)):
            yield
    finally:
        if pending:
            signal.raise_signal(pending[0])
