"""Shared settings of the property-based tests (tests/test_fuzz_*.py, Hypothesis).

``make test`` runs them derandomized (the same examples every run, so CI is reproducible)
with a small number of examples each: a fixed budget. ``make fuzz`` sets
``TOPOBIND_FUZZ=long``: random examples, :data:`LONG_FACTOR` times as many.

The property every test checks for outside input: a correct result, or the module's error
type (:class:`topobind.errors.TopobindError` and its kinds) with one line, or, through a
command, one ``error:`` line and a non-zero exit; never another exception, a hang (the
:func:`bounded` alarm, the subprocess timeouts) or unbounded memory (the subprocesses run
under an address-space limit).
"""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings

LONG = os.environ.get("TOPOBIND_FUZZ") == "long"
LONG_FACTOR = 50
HANG_S = 30  # a hang detector, far above what any one example costs on a busy machine
MEMORY_BYTES = 3 << 30  # address space of a command under test (topobind + matplotlib < 1 GiB)

settings.register_profile(
    "topobind-ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "topobind-long",
    deadline=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
BASE = settings.get_profile("topobind-long" if LONG else "topobind-ci")

F = TypeVar("F", bound=Callable[..., Any])


def fuzz(examples: int) -> Callable[[F], F]:
    """``@fuzz(N)``: N examples under ``make test``, N x LONG_FACTOR under ``make fuzz``."""
    return settings(BASE, max_examples=examples * (LONG_FACTOR if LONG else 1))


class Hang(Exception):
    """An example ran past :data:`HANG_S`."""


@contextmanager
def bounded(seconds: float = HANG_S) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds`` (SIGALRM; main thread only)."""

    def alarm(_sig: int, _frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def limit_memory() -> None:
    """``preexec_fn`` of a command under test: at most :data:`MEMORY_BYTES` of address space
    (past it, an allocation fails: a MemoryError traceback, which the tests refuse)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def one_error_line(stderr: str, prefix: str = "topobind: error:") -> str:
    """The single error line of a refusal (no traceback, one line that starts with
    ``prefix``); AssertionError otherwise."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith(prefix)]
    assert len(errors) == 1, stderr
    return errors[0]
