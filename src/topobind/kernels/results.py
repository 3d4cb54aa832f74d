"""The kernel result format ``topobind.result/1``: its one definition in code.

The kernels (``kernels/``) write one JSON document per run (``schemas/result.schema.json``,
``docs/results-format.md``). Everything that reads one goes through this module:

* :func:`load_result` / :func:`load_results` / :func:`parse_result`: one result, validated
  against the schema and for what the schema cannot say (the headline names a metric with
  its unit; matrices are rows x columns), as a :class:`Result` (checks, ``topobind bench``).
* :class:`Matrix`: the one record of a labelled matrix (a result's, the report's medians).
* :func:`run_from_document`: the fleet view of a result, :class:`Run`: the fields the fleet
  report uses, each checked for its type, thousands of documents a second
  (:mod:`topobind.report.reader` reads the files).
* :func:`read_bytes`: the bytes of a result file: regular files only (a FIFO or a device
  named ``*.json`` is refused without a blocking open), at most :data:`MAX_FILE_BYTES`.
"""

from __future__ import annotations

import json
import math
import os
import stat
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from topobind.errors import TopobindError
from topobind.fsutil import package_schema
from topobind.json_records import pick, to_json
from topobind.kernels import registry as kernel_registry
from topobind.kernels import stats

RESULT_SCHEMA_ID = "topobind.result/1"
RESULT_SUFFIXES = (".json", ".jsonl", ".ndjson")
MAX_FILE_BYTES = 64 * 2**20  # a result file is KiB to a few MiB (c2c of 512 PUs: ~3 MiB)
_NAN = math.nan


# --------------------------------------------------------------------------- files
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


# --------------------------------------------------------------------------- result model (full)
_OMIT_NONE = {"json": "omit-none"}  # json_records.to_json leaves the field out when None


@dataclass(frozen=True)
class Pages:
    """Page size requested and obtained (``kib`` read back from /proc/self/smaps)."""

    requested: str
    kib: int
    fallback: bool
    note: str
    method: str | None = field(default=None, metadata=_OMIT_NONE)
    extra: dict[str, Any] = field(default_factory=dict, metadata={"json": "merge"})


@dataclass(frozen=True)
class Placement:
    """Where a thread ran: ``cpu``, ``affinity``: OS PU indexes; ``numa``: node OS index."""

    rank: int
    thread: int
    cpu: int
    numa: int
    affinity: tuple[int, ...] | None = field(default=None, metadata=_OMIT_NONE)
    host: str | None = field(default=None, metadata=_OMIT_NONE)


@dataclass(frozen=True)
class Metric:
    unit: str
    higher_is_better: bool
    trials: tuple[float, ...]
    best: float
    avg: float
    min: float
    max: float
    median: float | None = field(default=None, metadata=_OMIT_NONE)
    warmup: int = 0

    @classmethod
    def of_trials(
        cls, unit: str, higher_is_better: bool, trials: Sequence[float], warmup: int = 0
    ) -> Metric:
        """The statistics over ``trials[warmup:]`` as the kernels compute them
        (``tb_json_metric``: best = max if higher is better, else min)."""
        used = list(trials[warmup:]) or list(trials)
        lo, hi = min(used), max(used)
        return cls(
            unit=unit,
            higher_is_better=higher_is_better,
            trials=tuple(float(t) for t in trials),
            best=hi if higher_is_better else lo,
            avg=sum(used) / len(used),
            min=lo,
            max=hi,
            median=stats.median(used),
            warmup=warmup,
        )


@dataclass(frozen=True)
class Headline:
    metric: str
    stat: str
    value: float
    unit: str
    higher_is_better: bool


@dataclass(frozen=True, slots=True)
class Matrix:
    """A labelled matrix of a result (``matrices.NAME``: c2c core-to-core latency, NUMA
    matrices), and the fleet report's medians of one: the one matrix record.

    ``values`` is row-major; ``null`` in the file (not measured, e.g. the c2c diagonal) is NaN.
    """

    name: str
    unit: str
    rows: tuple[int | str, ...]
    cols: tuple[int | str, ...]
    row_kind: str
    col_kind: str
    values: array  # array('d'), len(rows) * len(cols)

    def value(self, row: int | str, col: int | str) -> float | None:
        """The value at labels (``row``, ``col``); None where not measured."""
        v = self.values[self.rows.index(row) * len(self.cols) + self.cols.index(col)]
        return None if math.isnan(v) else v

    def grid(self) -> list[list[float]]:
        """The values as rows of floats (NaN where not measured)."""
        n = len(self.cols)
        return [self.values[i * n : (i + 1) * n].tolist() for i in range(len(self.rows))]


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


def result_document(r: Result) -> dict[str, Any]:
    """The ``topobind.result/1`` document of ``r``: the one writer in Python (HPL's results),
    the same envelope, in the same order, as the C kernels' ``kernels/common/tb_json.c``."""
    doc: dict[str, Any] = {
        "schema": RESULT_SCHEMA_ID,
        **pick(r, "kernel", "host", "timestamp", "layout", "ranks"),
    }
    if r.rank is not None:
        doc["rank"] = r.rank
    doc |= pick(r, "threads", "params", "pages", "placement", "metrics", "headline")
    if r.matrices:
        doc["matrices"] = {name: matrix_document(m) for name, m in r.matrices.items()}
    return doc | pick(r, "valid", "validation")


def matrix_document(m: Matrix) -> dict[str, Any]:
    """``matrices.NAME`` of a result: the labels, and the values as rows (null: not measured)."""
    return {**pick(m, "unit", "rows", "cols", "row_kind", "col_kind"), "values": to_json(m.grid())}


# --------------------------------------------------------------------------- schema + parsing
@lru_cache(maxsize=1)
def schema_file() -> dict[str, Any]:
    """``schemas/result.schema.json`` as published (its kernel names: tested against the
    kernel registry)."""
    doc: dict[str, Any] = package_schema("result.schema.json")
    return doc


def result_schema() -> dict[str, Any]:
    """The schema results are validated with: the file's, with the kernel names of the kernel
    registry (a new kernel is a row there, not an edit of the validator)."""
    doc = schema_file()
    names = [k.name for k in kernel_registry.KERNELS]
    props = {**doc["properties"], "kernel": {"enum": names}}
    return {**doc, "properties": props}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def validate_result_document(doc: Any, source: str = "<text>") -> None:
    """Raise TopobindError (one line, naming ``source``) unless ``doc`` is a valid result."""
    # jsonschema (~40 ms to import) only where a document is read back: launches load none
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
    matrices = {m.name: m for m in read_matrices(doc.get("matrices"), text_labels=False)}
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
    """(text, source name) from a path or from JSON text; a path is read with
    :func:`read_bytes` (regular files only, bounded)."""
    if isinstance(src, bytes):
        return src.decode("utf-8", errors="replace"), "<text>"
    if isinstance(src, str) and src.lstrip().startswith(("{", "[")):
        return src, "<text>"
    name = os.fspath(src)
    return read_bytes(name).decode("utf-8", errors="replace"), name


#: What a document nested deeper than Python's JSON decoder goes is (no result is).
TOO_DEEP = "JSON nested too deep to be a topobind result; re-run the kernel or remove the file"
#: Largest headline value read: no measurement is near it, and the statistics of values
#: near float's limit (1.7e308) overflow.
MAX_VALUE = 1e100


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
    except RecursionError:
        raise TopobindError(f"{source}: {TOO_DEEP}") from None


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
    except RecursionError:
        raise TopobindError(f"{source}: {TOO_DEEP}") from None
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


# --------------------------------------------------------------------------- fleet view
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


class ResultError(Exception):
    """A field of a result is not as documented; the reader turns it into a TopobindError
    naming the file (and line)."""


def _field(doc: dict[str, object], key: str, kind: type | tuple[type, ...], what: str) -> object:
    if key not in doc:
        raise ResultError(f'missing "{key}" ({what})')
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ResultError(f'"{key}" must be {what}, got {json.dumps(value)[:60]}')
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultError(f"{where} must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def _parse_time(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ResultError(
            f'"timestamp" {text!r} is not ISO 8601 (e.g. 2026-11-22T22:40:00Z)'
        ) from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


_LABELS: dict[tuple[int | str, ...], tuple[int | str, ...]] = {}


def _same(label: object) -> object:
    return label


def _interned(labels: tuple[Any, ...]) -> tuple[int | str, ...]:
    """One shared tuple per distinct label list: less memory, cheaper to send between processes."""
    return _LABELS.setdefault(labels, labels)


def read_matrices(raw: object, text_labels: bool = True) -> tuple[Matrix, ...]:
    """The ``matrices`` object of a result as :class:`Matrix` records (raises ResultError);
    ``text_labels``: labels as strings (the fleet report's), else as in the file."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ResultError('"matrices" must be an object of named matrices')
    out = []
    for name, m in raw.items():
        where = f'matrix "{name}"'
        if not isinstance(m, dict):
            raise ResultError(f"{where} must be an object")
        unit = _field(m, "unit", str, f"the {where} unit")
        rows = m.get("rows")
        cols = m.get("cols")
        values = m.get("values")
        if not isinstance(rows, list) or not isinstance(cols, list) or not rows or not cols:
            raise ResultError(f'{where}: "rows" and "cols" must be non-empty label lists')
        if not isinstance(values, list) or len(values) != len(rows):
            raise ResultError(f'{where}: "values" must have one list per row ({len(rows)} rows)')
        flat = array("d")
        for i, row in enumerate(values):
            if not isinstance(row, list) or len(row) != len(cols):
                raise ResultError(f"{where}: row {i} must have {len(cols)} values")
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
        label = str if text_labels else _same
        out.append(
            Matrix(
                name=str(name),
                unit=str(unit),
                rows=_interned(tuple(label(r) for r in rows)),
                cols=_interned(tuple(label(c) for c in cols)),
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


def _check_metrics(metrics: object, head: object) -> None:
    """Every result has ``metrics`` (an object; whereami's is empty); a metric's ``trials``
    are numbers, not all NaN (a run with a headline measured something)."""
    if not isinstance(metrics, dict):
        got = "missing" if metrics is None else f"got {json.dumps(metrics)[:40]}"
        raise ResultError(f'"metrics" must be an object of named metrics ({got})')
    for name, metric in metrics.items():
        trials = metric.get("trials") if isinstance(metric, dict) else None
        if not isinstance(trials, list) or not trials:
            raise ResultError(f'metric "{name[:40]}" must have a non-empty "trials" list')
        if not any(type(t) in (int, float) and math.isfinite(t) for t in trials):
            raise ResultError(
                f'metric "{name[:40]}": no trial is a finite number (all NaN?); the run '
                "measured nothing: re-run the kernel or remove the file"
            )
    named = head.get("metric") if isinstance(head, dict) else None
    if isinstance(named, str) and metrics and named not in metrics:
        raise ResultError(
            f'"headline.metric" {json.dumps(named)[:40]} names no metric of "metrics"'
        )


def run_from_document(doc: object) -> Run:
    """Turn one decoded result document into a :class:`Run` (raises :class:`ResultError`)."""
    if not isinstance(doc, dict):
        raise ResultError(f"expected a JSON object (one result), got {type(doc).__name__}")
    schema = doc.get("schema")
    if schema != RESULT_SCHEMA_ID:
        raise ResultError(
            f'not a topobind result: "schema" is {json.dumps(schema)}, '
            f'expected "{RESULT_SCHEMA_ID}"'
        )
    kernel = _field(doc, "kernel", str, "the kernel name")
    host = _field(doc, "host", str, "the host name")
    if not kernel or not host:
        raise ResultError('"kernel" and "host" must not be empty')
    timestamp = _parse_time(str(_field(doc, "timestamp", str, "an ISO 8601 UTC time")))
    layout = doc.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise ResultError('"layout" must be a string or null')
    pages = doc.get("pages")
    page_kib: int | None = None
    page_requested: str | None = None
    page_fallback: str | None = None
    if pages is not None:
        if not isinstance(pages, dict):
            raise ResultError(
                '"pages" must be an object like {"requested": "2M", "kib": 2048, ...}'
            )
        kib = pages.get("kib")
        if kib is not None and (isinstance(kib, bool) or not isinstance(kib, int) or kib <= 0):
            raise ResultError(
                f'"pages.kib" must be a positive integer (KiB), got {json.dumps(kib)}'
            )
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
    _check_metrics(doc.get("metrics"), head := doc.get("headline"))
    metric = stat = unit = None
    value: float | None = None
    hib: bool | None = None
    if head is not None:
        if not isinstance(head, dict):
            raise ResultError('"headline" must be an object or null')
        metric = str(_field(head, "metric", str, "the headline metric name"))
        unit = str(_field(head, "unit", str, "the headline unit"))
        hib = bool(_field(head, "higher_is_better", bool, "true or false"))
        value = _number(head.get("value"), '"headline.value"')
        if not (math.isfinite(value) and 0 < value <= MAX_VALUE):
            raise ResultError(
                f'"headline.value" must be a positive finite number up to {MAX_VALUE:g}, got '
                f"{value!r}"
            )
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
        matrices=read_matrices(doc.get("matrices")),
        ranks=_count(doc.get("ranks")),
        threads=_count(doc.get("threads")),
        placement=placement,
        topology=topology,
    )
