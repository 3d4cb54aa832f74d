"""Helpers shared by tests/measure/test_kernels_*.py (imported, not a pytest conftest)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import REPO

from topobind.errors import TopobindError
from topobind.measure import hugepages

KIB_1G = 1048576
KIB_2M = 2048

_built = False


def ensure_built() -> None:
    """Build the kernels and the rank step (rankexec, the hugepage shim) once per session (a
    no-op when they are up to date)."""
    global _built
    if _built:
        return
    for folder in ("kernels", "rankstep"):
        proc = subprocess.run(
            ["make", "-s", "-C", str(REPO / folder)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, f"make -C {folder} failed:\n{proc.stdout}\n{proc.stderr}"
    _built = True


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to change /sys/kernel/mm/hugepages/*/nr_hugepages")


@contextlib.contextmanager
def reserved(size_kib: int, count: int) -> Iterator[hugepages.HugepageSize]:
    """reserve_hugepages, or skip the test with the reason when the kernel refuses."""
    require_root()
    try:
        cm = hugepages.reserve_hugepages(size_kib, count)
        status = cm.__enter__()
    except TopobindError as exc:
        pytest.skip(f"cannot reserve hugepages: {exc}")
    try:
        yield status
    finally:
        cm.__exit__(None, None, None)


def reserved_free(size_kib: int, count: int) -> contextlib.AbstractContextManager[object]:
    """:func:`reserved` with ``count`` pages free: the pool is the machine's, and pages another
    process holds (a test of another checkout) stay theirs (issue 47 item 4)."""
    pool = hugepages.hugepages_status().get(size_kib)
    in_use = pool.nr - pool.free + pool.resv if pool is not None else 0
    return reserved(size_kib, in_use + count)


def omp_env(threads: int = 2, places: str | None = None) -> dict[str, str | None]:
    env: dict[str, str | None] = {"OMP_NUM_THREADS": str(threads), "TOPOBIND_LAYOUT": None}
    if places is not None:
        env["OMP_PLACES"] = places
        env["OMP_PROC_BIND"] = "close"
    else:
        env["OMP_PLACES"] = None
        env["OMP_PROC_BIND"] = None
    return env


def thp_mode() -> str:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "never"
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else "never"
