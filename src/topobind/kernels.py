"""Python side of the C kernels: find the binaries, run them, read and check their results.

The kernels (``kernels/``: stream, dgemm, latency, c2c, whereami, whereami-mpi and the
LD_PRELOAD shim libtbhugepages.so) write one JSON document per run in the format
``topobind.result/1`` (``schemas/result.schema.json``, ``docs/results-format.md``).

* :func:`find_kernel` / :func:`run_kernel` locate a binary (``TOPOBIND_KERNELS_DIR``, then
  ``kernels/bin`` of this repository, then ``PATH``) and run it with ``--json``.
* :func:`load_result` / :func:`load_results` parse and validate a result (file or text):
  :mod:`topobind.results`, re-exported here.
* :func:`hugepages_status` / :func:`reserve_hugepages` read and (as root) change the hugetlb
  page pools in ``/sys/kernel/mm/hugepages`` and ``/sys/devices/system/node/node*/hugepages``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from topobind.errors import TopobindError
from topobind.results import (  # noqa: F401 (re-exported: the result model of the kernels)
    RESULT_SCHEMA_ID,
    Headline,
    Matrix,
    Metric,
    Pages,
    Placement,
    Result,
    load_result,
    load_results,
    parse_result,
    result_schema,
    validate_result_document,
)

HUGEPAGE_SHIM = "libtbhugepages.so"

#: exit statuses of the kernels (kernels/common/tb_common.h)
EXIT_USAGE = 2
EXIT_PAGES = 3
EXIT_INVALID = 4

_REPO_KERNELS_BIN = Path(__file__).resolve().parents[2] / "kernels" / "bin"


# The result model and its parsing live in topobind.results (re-exported here).
# --------------------------------------------------------------------------- locating + running
def kernels_dir() -> Path | None:
    """Directory holding the built kernels, or None when only PATH can help."""
    env = os.environ.get("TOPOBIND_KERNELS_DIR")
    if env:
        return Path(env)
    if _REPO_KERNELS_BIN.is_dir():
        return _REPO_KERNELS_BIN
    return None


def find_kernel(name: str) -> Path:
    """Path of kernel binary ``name`` (or the shim ``libtbhugepages.so``).

    ``$TOPOBIND_KERNELS_DIR`` when set (and only there: an explicit choice is not second-
    guessed); otherwise ``kernels/bin`` of this repository, then ``PATH``.
    """
    env = os.environ.get("TOPOBIND_KERNELS_DIR")
    p = (Path(env) if env else _REPO_KERNELS_BIN) / name
    if p.is_file() and (name.endswith(".so") or os.access(p, os.X_OK)):
        return p
    found = None if env else shutil.which(name)
    if found and not name.endswith(".so"):
        return Path(found)
    where = f"$TOPOBIND_KERNELS_DIR={env}, " if env else ""
    raise TopobindError(
        f"kernel {name!r} not found in {where}{_REPO_KERNELS_BIN} or PATH; build it with "
        "'make kernels' (or set TOPOBIND_KERNELS_DIR)"
    )


class KernelError(TopobindError):
    """A kernel exited with a failure status; ``returncode`` and ``stderr`` are kept."""

    def __init__(self, message: str, returncode: int, stderr: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class KernelRun:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _merge_env(env: Mapping[str, str | None] | None) -> dict[str, str]:
    merged = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = str(v)
    return merged


def run_kernel_raw(
    name: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 600.0,
    launcher: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
) -> KernelRun:
    """Run a kernel (optionally behind ``launcher``, e.g. ``["mpirun", "-np", "2"]``) as is.

    ``env`` entries override the current environment; a value of None removes the variable.
    """
    from topobind.runner import run_process

    exe = find_kernel(name)
    argv = (*launcher, str(exe), *args)
    t0 = time.monotonic()
    proc = run_process(
        argv,
        env=_merge_env(env),
        capture=True,
        capture_stderr=True,
        timeout=timeout,
        cwd=cwd,
        what=name,
    )
    return KernelRun(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def run_kernel(
    name: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 600.0,
    json_path: str | os.PathLike[str] | None = None,
) -> Result:
    """Run kernel ``name`` with ``args`` plus ``--json FILE`` and return its validated result.

    A result that ran but does not validate (exit status 4) is returned with ``valid=False``;
    any other failure raises :class:`KernelError` carrying the kernel's one-line message.
    """
    with tempfile.TemporaryDirectory(prefix="topobind-kernel-") as tmp:
        out = Path(json_path) if json_path is not None else Path(tmp) / f"{name}.json"
        run = run_kernel_raw(name, [*args, "--json", str(out)], env=env, timeout=timeout)
        if run.returncode not in (0, EXIT_INVALID) or not out.exists():
            raise KernelError(
                f"{name} exited with status {run.returncode}: {_last_line(run.stderr)}",
                run.returncode,
                run.stderr,
            )
        return load_result(out)


# --------------------------------------------------------------------------- hugepages
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
