"""Fast, strict reader of kernel result files (``topobind.result/1``) for the report.

It reads exactly the fields the report uses and checks their types; anything else in a
document is ignored. A corrupt, truncated or foreign file stops the report with one
:class:`~topobind.errors.TopobindError` line that names the file (and line, for JSON Lines).

Inputs are files or directories; directories are searched recursively for ``*.json``,
``*.jsonl`` and ``*.ndjson`` (hidden files and directories, whose names start with ``.``, are
skipped). A file holds one JSON document, or one document per line (JSON Lines, as
``whereami`` writes; recognised by the ``.jsonl``/``.ndjson`` suffix or by a ``.json`` file
holding several documents on separate lines).
"""

from __future__ import annotations

import json
import math
import os
import stat
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from topobind.errors import TopobindError
from topobind.report.parallel import fork_map

RESULT_SCHEMA = "topobind.result/1"
RESULT_SUFFIXES = (".json", ".jsonl", ".ndjson")
_LINES_SUFFIXES = (".jsonl", ".ndjson")
_NAN = math.nan
PARALLEL_MIN_FILES = 2000  # from this many files on, decode in forked workers
CHUNK_FILES = 500
MAX_FILE_BYTES = 64 * 2**20  # a result file is KiB to a few MiB (c2c of 512 PUs: ~3 MiB)


@dataclass(frozen=True, slots=True)
class Matrix:
    """A labelled matrix from a result (``c2c`` core-to-core latency, NUMA matrices).

    ``values`` is row-major, ``None`` in the file (e.g. the diagonal of c2c) becomes NaN.
    """

    name: str
    unit: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    row_kind: str
    col_kind: str
    values: array  # array('d'), len(rows) * len(cols)


PlacementEntry = tuple[int, int, int, int]
"""One thread of a result's ``placement``: (rank, thread, cpu, numa); cpu is the PU's OS
index (-1 unknown), numa the NUMA node's OS index (-1 when the result does not say)."""


@dataclass(frozen=True, slots=True)
class Run:
    """One kernel run: what the report needs from one result document."""

    source: str  # file name, plus ":LINE" for JSON Lines
    kernel: str
    host: str
    timestamp: datetime
    layout: str | None
    page_kib: int | None
    page_requested: str | None
    page_fallback: str | None  # e.g. "THP fallback from 1G"; None: the page size asked for
    metric: str | None  # headline metric; None when the kernel has no headline (whereami)
    stat: str | None
    value: float | None
    unit: str | None
    higher_is_better: bool | None
    valid: bool
    validation: str
    generated: bool
    matrices: tuple[Matrix, ...]
    # what the layout drawings need (read only for results that name a layout):
    ranks: int | None = None  # "ranks" of the job
    threads: int | None = None  # "threads" per rank
    placement: tuple[PlacementEntry, ...] | None = None  # None: absent or unreadable
    topology: str | None = None  # params.topology: hwloc synthetic description of the node


@dataclass(frozen=True)
class ReadResult:
    runs: list[Run]
    files: int
    inputs: tuple[str, ...]


class _Bad(Exception):
    """Internal: a field problem, turned into a TopobindError naming the file."""


def _field(doc: dict[str, object], key: str, kind: type | tuple[type, ...], what: str) -> object:
    if key not in doc:
        raise _Bad(f'missing "{key}" ({what})')
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _Bad(f'"{key}" must be {what}, got {json.dumps(value)[:60]}')
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"{where} must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def _parse_time(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise _Bad(f'"timestamp" {text!r} is not ISO 8601 (e.g. 2026-11-22T22:40:00Z)') from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


_LABELS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _interned(labels: tuple[str, ...]) -> tuple[str, ...]:
    """One shared tuple per distinct label list: less memory, cheaper to send between processes."""
    return _LABELS.setdefault(labels, labels)


def _matrices(raw: object) -> tuple[Matrix, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise _Bad('"matrices" must be an object of named matrices')
    out = []
    for name, m in raw.items():
        where = f'matrix "{name}"'
        if not isinstance(m, dict):
            raise _Bad(f"{where} must be an object")
        unit = _field(m, "unit", str, f"the {where} unit")
        rows = m.get("rows")
        cols = m.get("cols")
        values = m.get("values")
        if not isinstance(rows, list) or not isinstance(cols, list) or not rows or not cols:
            raise _Bad(f'{where}: "rows" and "cols" must be non-empty label lists')
        if not isinstance(values, list) or len(values) != len(rows):
            raise _Bad(f'{where}: "values" must have one list per row ({len(rows)} rows)')
        flat = array("d")
        for i, row in enumerate(values):
            if not isinstance(row, list) or len(row) != len(cols):
                raise _Bad(f"{where}: row {i} must have {len(cols)} values")
            start = len(flat)
            try:
                flat.extend(row)  # fast path: all numbers
            except TypeError:  # None (not measured, e.g. the c2c diagonal) or junk
                del flat[start:]  # extend() keeps what it appended before the failure
                try:
                    flat.extend([_NAN if v is None else v for v in row])
                except TypeError:
                    del flat[start:]
                    for v in row:
                        flat.append(_NAN if v is None else _number(v, f"{where} values"))
        out.append(
            Matrix(
                name=str(name),
                unit=str(unit),
                rows=_interned(tuple(str(r) for r in rows)),
                cols=_interned(tuple(str(c) for c in cols)),
                row_kind=str(m.get("row_kind", "")),
                col_kind=str(m.get("col_kind", "")),
                values=flat,
            )
        )
    return tuple(out)


_PLACEMENTS: dict[tuple[PlacementEntry, ...], tuple[PlacementEntry, ...]] = {}


def _placement(raw: object) -> tuple[PlacementEntry, ...] | None:
    """The ``placement`` array as (rank, thread, cpu, numa) tuples; None when it is missing
    or not as documented (the report then says it cannot draw that layout, nothing more)."""
    if not isinstance(raw, list) or not raw:
        return None
    out: list[PlacementEntry] = []
    for e in raw:
        if not isinstance(e, dict):
            return None
        rank, thread, cpu, numa = e.get("rank"), e.get("thread"), e.get("cpu"), e.get("numa")
        if type(rank) is not int or type(thread) is not int or type(cpu) is not int:
            return None
        out.append((rank, thread, cpu, numa if type(numa) is int else -1))
    key = tuple(out)
    return _PLACEMENTS.setdefault(key, key)  # runs of one layout share one tuple


_METHODS = {"thp": "THP ", "hugetlb-2M": "hugetlbfs ", "hugetlb-1G": "hugetlbfs ", "4k": "4 KiB "}


def fallback_text(requested: str | None, method: object) -> str:
    """What a page-size fallback was: ``THP fallback from 1G`` (the result's ``pages``
    ``requested`` and ``method``; ``auto`` tries 1G first)."""
    how = _METHODS.get(method, "") if isinstance(method, str) else ""
    asked = "1G (auto)" if requested == "auto" else (requested or "another size")
    return f"{how}fallback from {asked}"


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 1 else None


def parse_document(doc: object) -> Run:
    """Turn one decoded result document into a :class:`Run` (raises ``_Bad``)."""
    if not isinstance(doc, dict):
        raise _Bad(f"expected a JSON object (one result), got {type(doc).__name__}")
    schema = doc.get("schema")
    if schema != RESULT_SCHEMA:
        raise _Bad(
            f'not a topobind result: "schema" is {json.dumps(schema)}, expected "{RESULT_SCHEMA}"'
        )
    kernel = _field(doc, "kernel", str, "the kernel name")
    host = _field(doc, "host", str, "the host name")
    if not kernel or not host:
        raise _Bad('"kernel" and "host" must not be empty')
    timestamp = _parse_time(str(_field(doc, "timestamp", str, "an ISO 8601 UTC time")))
    layout = doc.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise _Bad('"layout" must be a string or null')
    pages = doc.get("pages")
    page_kib: int | None = None
    page_requested: str | None = None
    page_fallback: str | None = None
    if pages is not None:
        if not isinstance(pages, dict):
            raise _Bad('"pages" must be an object like {"requested": "2M", "kib": 2048, ...}')
        kib = pages.get("kib")
        if kib is not None and (isinstance(kib, bool) or not isinstance(kib, int) or kib <= 0):
            raise _Bad(f'"pages.kib" must be a positive integer (KiB), got {json.dumps(kib)}')
        page_kib = kib
        req = pages.get("requested")
        page_requested = req if isinstance(req, str) else None
        if pages.get("fallback") is True:
            page_fallback = fallback_text(page_requested, pages.get("method"))
    valid = _field(doc, "valid", bool, "true or false")
    validation = doc.get("validation")
    params = doc.get("params")
    generated = isinstance(params, dict) and params.get("generated") is True
    placement = None
    topology = None
    if layout is not None:  # only layouts are drawn: other results skip this work
        placement = _placement(doc.get("placement"))
        topo = params.get("topology") if isinstance(params, dict) else None
        topology = topo if isinstance(topo, str) and topo.strip() else None
    head = doc.get("headline")
    metric = stat = unit = None
    value: float | None = None
    hib: bool | None = None
    if head is not None:
        if not isinstance(head, dict):
            raise _Bad('"headline" must be an object or null')
        metric = str(_field(head, "metric", str, "the headline metric name"))
        unit = str(_field(head, "unit", str, "the headline unit"))
        hib = bool(_field(head, "higher_is_better", bool, "true or false"))
        value = _number(head.get("value"), '"headline.value"')
        if not (math.isfinite(value) and value > 0):
            raise _Bad(f'"headline.value" must be a positive finite number, got {value!r}')
        s = head.get("stat")
        stat = s if isinstance(s, str) else None
    return Run(
        source="",
        kernel=str(kernel),
        host=str(host),
        timestamp=timestamp,
        layout=layout,
        page_kib=page_kib,
        page_requested=page_requested,
        page_fallback=page_fallback,
        metric=metric,
        stat=stat,
        value=value,
        unit=unit,
        higher_is_better=hib,
        valid=bool(valid),
        validation=validation if isinstance(validation, str) else "",
        generated=generated,
        matrices=_matrices(doc.get("matrices")),
        ranks=_count(doc.get("ranks")),
        threads=_count(doc.get("threads")),
        placement=placement,
        topology=topology,
    )


def _with_source(run: Run, source: str) -> Run:
    # dataclasses.replace is slow-ish on 35,000 objects with slots; rebuild directly
    return Run(
        source,
        run.kernel,
        run.host,
        run.timestamp,
        run.layout,
        run.page_kib,
        run.page_requested,
        run.page_fallback,
        run.metric,
        run.stat,
        run.value,
        run.unit,
        run.higher_is_better,
        run.valid,
        run.validation,
        run.generated,
        run.matrices,
        run.ranks,
        run.threads,
        run.placement,
        run.topology,
    )


def _decode_lines(path: str, data: bytes) -> list[Run]:
    out = []
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TopobindError(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
                "the file is corrupt or truncated: re-run the kernel or remove the file"
            ) from None
        except UnicodeDecodeError:
            raise TopobindError(f"{where}: not a JSON text line (bad UTF-8)") from None
        try:
            out.append(_with_source(parse_document(doc), where))
        except _Bad as exc:
            raise TopobindError(f"{where}: {exc}") from None
    return out


def _kind(mode: int) -> str:
    for test, what in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def read_bytes(name: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``name``, at most ``limit``; TopobindError naming it for
    a special file (never opened blocking: a FIFO does not hang the report) or a bigger one."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TopobindError(f"{name}: cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TopobindError(
                f"{name}: {_kind(info.st_mode)}, not a result file: remove it or move it out "
                "of the results"
            )
        if info.st_size > limit:
            raise TopobindError(
                f"{name}: {info.st_size / 2**20:,.0f} MiB, larger than any kernel result "
                f"(limit {limit // 2**20} MiB): not a result file: remove it or move it out of "
                "the results"
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)  # the file may have grown since fstat
    except OSError as exc:
        raise TopobindError(f"{name}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TopobindError(
            f"{name}: larger than any kernel result (limit {limit // 2**20} MiB): not a result "
            "file: remove it or move it out of the results"
        )
    return data


def read_file(path: str | os.PathLike[str]) -> list[Run]:
    """All runs in one file (one JSON document, or JSON Lines)."""
    name = os.fspath(path)
    data = read_bytes(name)
    if not data.strip():
        raise TopobindError(
            f"{name}: empty file (truncated?): re-run the kernel or remove the file"
        )
    if name.endswith(_LINES_SUFFIXES):
        return _decode_lines(name, data)
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and data.count(b"\n") > 1:
            return _decode_lines(name, data)
        raise TopobindError(
            f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "the file is corrupt or truncated: re-run the kernel or remove the file"
        ) from None
    except UnicodeDecodeError:
        raise TopobindError(f"{name}: not a JSON text file (bad UTF-8)") from None
    try:
        return [_with_source(parse_document(doc), name)]
    except _Bad as exc:
        raise TopobindError(f"{name}: {exc}") from None


def find_result_files(
    root: str | os.PathLike[str], exclude: Sequence[str | os.PathLike[str]] = ()
) -> list[str]:
    """Result files under ``root``, sorted; hidden entries and ``exclude`` dirs skipped."""
    excluded = {os.path.realpath(p) for p in exclude}
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and os.path.realpath(os.path.join(dirpath, d)) not in excluded
        )
        for name in sorted(filenames):
            if not name.startswith(".") and name.endswith(RESULT_SUFFIXES):
                found.append(os.path.join(dirpath, name))
    return found


def read_results(
    inputs: Iterable[str | os.PathLike[str]], exclude: Sequence[str | os.PathLike[str]] = ()
) -> ReadResult:
    """Read every result under ``inputs`` (files or directories).

    Raises :class:`TopobindError` naming the file for the first bad one, the path for a
    missing input and the directory for one that holds no result files.
    """
    names = tuple(os.fspath(p) for p in inputs)
    if not names:
        raise TopobindError("no input: give result files or directories")
    files: list[str] = []
    for name in names:
        if os.path.isdir(name):
            found = find_result_files(name, exclude)
            if not found:
                raise TopobindError(
                    f"{name}: directory holds no result files "
                    "(*.json, *.jsonl searched recursively)"
                )
            files.extend(found)
        elif os.path.isfile(name):
            files.append(name)
        elif os.path.exists(name):
            raise TopobindError(f"{name}: not a regular file or directory")
        else:
            raise TopobindError(f"{name}: no such file or directory")
    unique: list[str] = []
    seen: set[str] = set()
    for f in files:
        key = os.path.abspath(f)
        if key not in seen:  # the same file given twice (e.g. a file and its directory)
            seen.add(key)
            unique.append(f)
    if len(unique) >= PARALLEL_MIN_FILES:
        chunks = [unique[i : i + CHUNK_FILES] for i in range(0, len(unique), CHUNK_FILES)]
        parts = fork_map(_read_chunk_tuples, chunks)
        runs = [_run_from_tuple(t) for part in parts for t in part]
    else:
        runs = _read_chunk(unique)
    return ReadResult(runs=runs, files=len(unique), inputs=names)


def _read_chunk(files: Sequence[str]) -> list[Run]:
    runs: list[Run] = []
    for f in files:
        found = read_file(f)
        if not found:
            raise TopobindError(f"{f}: holds no result (only blank lines); remove it")
        runs.extend(found)
    return runs


# Runs travel back from the worker processes as plain tuples (pickling slotted dataclasses
# costs several times more).
def _run_to_tuple(r: Run) -> tuple[object, ...]:
    mats = tuple(
        (m.name, m.unit, m.rows, m.cols, m.row_kind, m.col_kind, m.values) for m in r.matrices
    )
    return (
        r.source, r.kernel, r.host, r.timestamp, r.layout, r.page_kib, r.page_requested,
        r.page_fallback, r.metric, r.stat, r.value, r.unit, r.higher_is_better, r.valid,
        r.validation, r.generated, mats, r.ranks, r.threads, r.placement, r.topology,
    )  # fmt: skip


def _run_from_tuple(t: tuple[Any, ...]) -> Run:
    mats = tuple(Matrix(*m) for m in t[16])
    return Run(*t[:16], mats, *t[17:])  # type: ignore[call-arg]


def _read_chunk_tuples(files: Sequence[str]) -> list[tuple[object, ...]]:
    return [_run_to_tuple(r) for r in _read_chunk(files)]
