"""The hugetlb page pools: what each size holds (``/sys/kernel/mm/hugepages``, per NUMA node
``/sys/devices/system/node/node*/hugepages``) and, as root, a reservation that is undone
afterwards (tests and benchmarks reserve 1 GiB / 2 MiB pages and give them back)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from topobind.errors import TopobindError


@dataclass(frozen=True)
class HugepageNode:
    node: int
    nr: int
    free: int
    surplus: int


@dataclass(frozen=True)
class HugepageSize:
    """One hugetlb pool (``size_kib`` = 2048 or 1048576 on x86-64)."""

    size_kib: int
    nr: int
    free: int
    resv: int
    surplus: int
    nodes: dict[int, HugepageNode]

    @property
    def label(self) -> str:
        return (
            "1G"
            if self.size_kib == 1048576
            else "2M"
            if self.size_kib == 2048
            else (f"{self.size_kib}kB")
        )


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


def hugepages_status(sysfs_root: str | os.PathLike[str] = "/sys") -> dict[int, HugepageSize]:
    """Hugetlb pools by page size in KiB: totals and per NUMA node (OS index)."""
    root = Path(sysfs_root)
    status: dict[int, HugepageSize] = {}
    for d in sorted((root / "kernel/mm/hugepages").glob("hugepages-*kB")):
        m = re.fullmatch(r"hugepages-(\d+)kB", d.name)
        if not m:
            continue
        kib = int(m.group(1))
        nodes: dict[int, HugepageNode] = {}
        for nd in sorted((root / "devices/system/node").glob("node[0-9]*")):
            hp = nd / "hugepages" / d.name
            if hp.is_dir():
                n = int(nd.name[4:])
                nodes[n] = HugepageNode(
                    n,
                    _read_int(hp / "nr_hugepages"),
                    _read_int(hp / "free_hugepages"),
                    _read_int(hp / "surplus_hugepages"),
                )
        status[kib] = HugepageSize(
            size_kib=kib,
            nr=_read_int(d / "nr_hugepages"),
            free=_read_int(d / "free_hugepages"),
            resv=_read_int(d / "resv_hugepages"),
            surplus=_read_int(d / "surplus_hugepages"),
            nodes=nodes,
        )
    return status


_lock_state = threading.local()
_LOCK_PATH = Path(tempfile.gettempdir()) / "topobind-hugepages.lock"


@contextlib.contextmanager
def _pool_lock(timeout: float = 900.0) -> Iterator[None]:
    """Serialise hugepage reservations between processes (re-entrant within a thread)."""
    depth = getattr(_lock_state, "depth", 0)
    if depth:
        _lock_state.depth = depth + 1
        try:
            yield
        finally:
            _lock_state.depth -= 1
        return
    with open(_LOCK_PATH, "a+") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TopobindError(
                        f"another process holds {_LOCK_PATH} (hugepage reservation) for more "
                        f"than {timeout:g} s"
                    ) from None
                time.sleep(0.2)
        _lock_state.depth = 1
        try:
            yield
        finally:
            _lock_state.depth = 0
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pool_file(size_kib: int, node: int | None, root: Path) -> Path:
    if node is None:
        return root / f"kernel/mm/hugepages/hugepages-{size_kib}kB/nr_hugepages"
    return root / f"devices/system/node/node{node}/hugepages/hugepages-{size_kib}kB/nr_hugepages"


def _write_pool(path: Path, value: int) -> None:
    try:
        path.write_text(f"{value}\n")
    except OSError as exc:
        raise TopobindError(f"cannot write {value} to {path}: {exc.strerror}") from exc


@contextlib.contextmanager
def reserve_hugepages(
    size_kib: int,
    count: int,
    *,
    node: int | None = None,
    sysfs_root: str | os.PathLike[str] = "/sys",
) -> Iterator[HugepageSize]:
    """Set the hugetlb pool of ``size_kib`` pages to ``count`` (as root), restore it afterwards.

    ``node`` (NUMA node OS index) changes only that node's pool. The pool is exactly ``count``
    inside the block (use 0 to make sure none are available). Raises TopobindError when not
    root, when the page size does not exist, or when the kernel gives fewer pages than asked
    (memory too fragmented; the previous value is restored first). Reservations of concurrent
    topobind processes are serialised with a lock file.
    """
    root = Path(sysfs_root)
    label = "1G" if size_kib == 1048576 else "2M" if size_kib == 2048 else f"{size_kib} kB"
    path = _pool_file(size_kib, node, root)
    if count < 0:
        raise TopobindError(f"hugepage count must be >= 0, got {count}")
    if not path.exists():
        raise TopobindError(f"{path} does not exist: this kernel has no {label} hugepage pool")
    if os.geteuid() != 0:
        raise TopobindError(
            f"reserving {label} hugepages needs root; as root run: echo {count} > {path}"
        )
    with _pool_lock():
        previous = _read_int(path)
        _write_pool(path, count)
        got = _read_int(path)
        compact = Path("/proc/sys/vm/compact_memory")
        if got < count and root == Path("/sys") and compact.exists():
            # free memory may just be fragmented: compact it once and ask again
            with contextlib.suppress(OSError):
                compact.write_text("1\n")
            _write_pool(path, count)
            got = _read_int(path)
        if got < count:
            _write_pool(path, previous)
            raise TopobindError(
                f"asked the kernel for {count} {label} hugepages, it gave {got} (free memory "
                f"too fragmented); reserve them at boot (hugepagesz={label} hugepages={count})"
            )
        try:
            yield hugepages_status(root)[size_kib]
        finally:
            _write_pool(path, previous)
