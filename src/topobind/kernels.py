"""Python side of the C kernels: find the binaries, run them, read and check their results.

The kernels (``kernels/``: stream, dgemm, latency, c2c, whereami, whereami-mpi and the
LD_PRELOAD shim libtbhugepages.so) write one JSON document per run in the format
``topobind.result/1`` (``schemas/result.schema.json``, ``docs/results-format.md``).

* :func:`find_kernel` / :func:`run_kernel` locate a binary (``TOPOBIND_KERNELS_DIR``, then
  ``kernels/bin`` of this repository, then ``PATH``) and run it with ``--json``.
* :func:`load_result` / :func:`load_results` parse and validate a result (file or text).
* :func:`hugepages_status` / :func:`reserve_hugepages` read and (as root) change the hugetlb
  page pools in ``/sys/kernel/mm/hugepages`` and ``/sys/devices/system/node/node*/hugepages``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError

RESULT_SCHEMA_ID = "topobind.result/1"
HUGEPAGE_SHIM = "libtbhugepages.so"

#: exit statuses of the kernels (kernels/common/tb_common.h)
EXIT_USAGE = 2
EXIT_PAGES = 3
EXIT_INVALID = 4

_REPO_KERNELS_BIN = Path(__file__).resolve().parents[2] / "kernels" / "bin"


# --------------------------------------------------------------------------- result model
@dataclass(frozen=True)
class Pages:
    """Page size requested and obtained (``kib`` read back from /proc/self/smaps)."""

    requested: str
    kib: int
    fallback: bool
    note: str
    method: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a thread ran: ``cpu``, ``affinity``: OS PU indexes; ``numa``: node OS index."""

    rank: int
    thread: int
    cpu: int
    numa: int
    affinity: tuple[int, ...] | None = None
    host: str | None = None


@dataclass(frozen=True)
class Metric:
    unit: str
    higher_is_better: bool
    trials: tuple[float, ...]
    best: float
    avg: float
    min: float
    max: float
    median: float | None = None
    warmup: int = 0


@dataclass(frozen=True)
class Headline:
    metric: str
    stat: str
    value: float
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class Matrix:
    unit: str
    rows: tuple[int | str, ...]
    cols: tuple[int | str, ...]
    row_kind: str
    col_kind: str
    values: tuple[tuple[float | None, ...], ...]

    def value(self, row: int | str, col: int | str) -> float | None:
        return self.values[self.rows.index(row)][self.cols.index(col)]


@dataclass(frozen=True)
class Result:
    """One kernel run (``topobind.result/1``)."""

    schema: str
    kernel: str
    host: str
    timestamp: str
    layout: str | None
    ranks: int
    threads: int
    params: dict[str, Any]
    pages: Pages | None
    placement: tuple[Placement, ...]
    metrics: dict[str, Metric]
    headline: Headline | None
    matrices: dict[str, Matrix]
    valid: bool
    validation: str
    rank: int | None = None
    source: str = "<text>"
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def headline_value(self) -> float | None:
        return None if self.headline is None else self.headline.value

    def cpus(self) -> list[int]:
        """CPU (OS index) of every placement entry, in order."""
        return [p.cpu for p in self.placement]


# --------------------------------------------------------------------------- schema + parsing
@lru_cache(maxsize=1)
def result_schema() -> dict[str, Any]:
    text = resources.files("topobind").joinpath("schemas/result.schema.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def validate_result_document(doc: Any, source: str = "<text>") -> None:
    """Raise TopobindError (one line, naming ``source``) unless ``doc`` is a valid result."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(result_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise TopobindError(
            f"{source}: not a valid {RESULT_SCHEMA_ID} document: at {where}: "
            f"{_one_line(error.message)[:300]}"
        )
    # consistency the schema cannot express
    headline = doc.get("headline")
    if headline is not None:
        metric = doc["metrics"].get(headline["metric"])
        if metric is None:
            raise TopobindError(
                f"{source}: headline names metric {headline['metric']!r} "
                f"which is not in metrics ({', '.join(sorted(doc['metrics'])) or 'none'})"
            )
        if metric["unit"] != headline["unit"]:
            raise TopobindError(
                f"{source}: headline unit {headline['unit']!r} differs from metric "
                f"{headline['metric']!r} unit {metric['unit']!r}"
            )
    for name, mat in (doc.get("matrices") or {}).items():
        shape_ok = len(mat["values"]) == len(mat["rows"]) and all(
            len(row) == len(mat["cols"]) for row in mat["values"]
        )
        if not shape_ok:
            raise TopobindError(
                f"{source}: matrix {name!r} values are not {len(mat['rows'])} rows x "
                f"{len(mat['cols'])} columns"
            )


def _build(doc: dict[str, Any], source: str) -> Result:
    pages = None
    if doc["pages"] is not None:
        p = doc["pages"]
        known = {"requested", "kib", "fallback", "note", "method"}
        pages = Pages(
            requested=p["requested"],
            kib=p["kib"],
            fallback=p["fallback"],
            note=p["note"],
            method=p.get("method"),
            extra={k: v for k, v in p.items() if k not in known},
        )
    placement = tuple(
        Placement(
            rank=e["rank"],
            thread=e["thread"],
            cpu=e["cpu"],
            numa=e["numa"],
            affinity=tuple(e["affinity"]) if "affinity" in e else None,
            host=e.get("host"),
        )
        for e in doc["placement"]
    )
    metrics = {
        name: Metric(
            unit=m["unit"],
            higher_is_better=m["higher_is_better"],
            trials=tuple(float(x) for x in m["trials"]),
            best=float(m["best"]),
            avg=float(m["avg"]),
            min=float(m["min"]),
            max=float(m["max"]),
            median=float(m["median"]) if "median" in m else None,
            warmup=int(m.get("warmup", 0)),
        )
        for name, m in doc["metrics"].items()
    }
    h = doc["headline"]
    headline = (
        None
        if h is None
        else Headline(h["metric"], h["stat"], float(h["value"]), h["unit"], h["higher_is_better"])
    )
    matrices = {
        name: Matrix(
            unit=m["unit"],
            rows=tuple(m["rows"]),
            cols=tuple(m["cols"]),
            row_kind=m["row_kind"],
            col_kind=m["col_kind"],
            values=tuple(tuple(v) for v in m["values"]),
        )
        for name, m in (doc.get("matrices") or {}).items()
    }
    return Result(
        schema=doc["schema"],
        kernel=doc["kernel"],
        host=doc["host"],
        timestamp=doc["timestamp"],
        layout=doc["layout"],
        ranks=doc["ranks"],
        threads=doc["threads"],
        params=dict(doc["params"]),
        pages=pages,
        placement=placement,
        metrics=metrics,
        headline=headline,
        matrices=matrices,
        valid=doc["valid"],
        validation=doc["validation"],
        rank=doc.get("rank"),
        source=source,
        raw=doc,
    )


def _read_source(src: str | os.PathLike[str] | bytes) -> tuple[str, str]:
    """(text, source name) from a path or from JSON text."""
    if isinstance(src, bytes):
        return src.decode("utf-8", errors="replace"), "<text>"
    if isinstance(src, str) and src.lstrip().startswith(("{", "[")):
        return src, "<text>"
    path = Path(src)
    try:
        return path.read_text(encoding="utf-8", errors="replace"), str(path)
    except OSError as exc:
        raise TopobindError(f"{path}: cannot read kernel result: {exc.strerror}") from exc


def _parse_json(text: str, source: str) -> Any:
    if not text.strip():
        raise TopobindError(f"{source}: empty kernel result (the kernel wrote nothing)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopobindError(
            f"{source}: corrupt or truncated JSON at line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}"
        ) from None


def parse_result(doc: Any, source: str = "<text>") -> Result:
    """Validate an already-decoded document and build the :class:`Result`."""
    validate_result_document(doc, source)
    return _build(doc, source)


def load_result(src: str | os.PathLike[str] | bytes) -> Result:
    """Read ONE result from a file path or JSON text; TopobindError names the file on any defect."""
    text, source = _read_source(src)
    return parse_result(_parse_json(text, source), source)


def load_results(src: str | os.PathLike[str] | bytes) -> list[Result]:
    """Read one document, a JSON array of documents, or JSON Lines (one document per line)."""
    text, source = _read_source(src)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        docs = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                docs.append((_parse_json(line, f"{source}:{lineno}"), f"{source}:{lineno}"))
        if not docs:
            _parse_json(text, source)  # raises the empty/corrupt error
        return [parse_result(d, s) for d, s in docs]
    if isinstance(doc, list):
        return [parse_result(d, f"{source}[{i}]") for i, d in enumerate(doc)]
    return [parse_result(doc, source)]


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
    exe = find_kernel(name)
    argv = (*launcher, str(exe), *args)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            env=_merge_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise TopobindError(f"{name} did not finish within {timeout:g} s") from exc
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
