"""The kernel result format ``topobind.result/1``: its one definition in code.

The kernels (``kernels/``) write one JSON document per run (``schemas/result.schema.json``,
``docs/results-format.md``). Everything that reads one goes through this module, into one
model, :class:`Result` (with :class:`Pages`, :class:`Placement`, :class:`Metric`,
:class:`Headline` and :class:`Matrix`, the one record of a labelled matrix):

* :func:`result_from_document`: the one reader. A decoded document becomes a
  :class:`Result`, each field checked by hand for its type, with a one-line
  :class:`ResultError` for the first defect; thousands of documents a second (the fleet
  report, :mod:`topobind.report.reader`, reads through it).
* :func:`load_result` / :func:`load_results` / :func:`parse_result`: one file or text, first
  validated against the schema (the contract), then read by :func:`result_from_document`
  (checks, ``topobind bench``, ReFrame tests).
* :func:`result_document`: the one writer in Python (HPL's results).
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
from functools import cached_property, lru_cache
from typing import Any

from topobind.errors import TopobindError
from topobind.fsutil import package_schema
from topobind.json_records import pick, to_json
from topobind.measure import registry as kernel_registry
from topobind.measure import stats
from topobind.measure.evidence import Evidence, evidence_of

RESULT_SCHEMA_ID = "topobind.result/1"
RESULT_SUFFIXES = (".json", ".jsonl", ".ndjson")
MAX_FILE_BYTES = 64 * 2**20  # a result file is KiB to a few MiB (c2c of 512 PUs: ~3 MiB)
#: the tiers of the checks whose figures measure performance (``tier`` of a result); the smoke
#: tier runs the kernels at their smallest size to see that they run: no performance
PERFORMANCE_TIERS = frozenset({"quick", "full"})
MAX_TIER_CHARS = 32
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
    """One kernel run (``topobind.result/1``): the one model of a result, read by
    :func:`result_from_document` for the checks, ``topobind bench`` and the fleet report, and
    written by :func:`result_document` (HPL's results)."""

    schema: str
    kernel: str
    host: str
    timestamp: str  # ISO 8601 UTC as in the document; :attr:`time` is it parsed
    layout: str | None
    ranks: int | None  # None: not an integer >= 1 (the report then draws no layout)
    threads: int | None
    params: dict[str, Any]
    pages: Pages | None
    placement: tuple[Placement, ...]  # (): none, or not as documented (the report draws none)
    metrics: dict[str, Metric]
    headline: Headline | None
    matrices: dict[str, Matrix]
    valid: bool
    validation: str
    rank: int | None = None
    source: str = "<text>"  # file name, plus ":LINE" for JSON Lines or "[I]" in an array
    tier: str | None = None  # the check's tier (TOPOBIND_TIER); None: not run by a check
    # the ``evidence`` section as read (None: none); :attr:`evidence` reads it when asked
    evidence_document: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def evidence(self) -> Evidence | None:
        """What the node said around the run (measure/evidence.py), read on first use (a
        third of a result's reading time: the fleet report reads thousands and needs none);
        None when there is none or it is not as documented (``read_evidence`` says why)."""
        return None if self.evidence_document is None else evidence_of(self.evidence_document)

    @property
    def measures_performance(self) -> bool:
        """Whether its figures judge performance: a run outside the checks (``topobind
        bench``, a kernel by hand) or of a tier in :data:`PERFORMANCE_TIERS`."""
        return self.tier is None or self.tier in PERFORMANCE_TIERS

    @property
    def headline_value(self) -> float | None:
        return None if self.headline is None else self.headline.value

    @property
    def time(self) -> datetime:
        """:attr:`timestamp` as an aware UTC datetime (the reader has checked it parses)."""
        return _parse_time(self.timestamp)

    @property
    def page_kib(self) -> int | None:
        """The page size obtained (KiB); None when the result does not say (``pages`` null)."""
        return None if self.pages is None else self.pages.kib

    @property
    def page_fallback(self) -> str | None:
        """``THP fallback from 1G`` when the run did not get the page size it asked for."""
        p = self.pages
        return None if p is None or not p.fallback else fallback_text(p.requested, p.method)

    @property
    def generated(self) -> bool:
        """``params.generated``: a synthetic result (tests/fleetgen.py), not a measurement."""
        return self.params.get("generated") is True

    @property
    def topology(self) -> str | None:
        """``params.topology``: the hwloc synthetic description of the node, when recorded."""
        topo = self.params.get("topology")
        return topo if isinstance(topo, str) and topo.strip() else None

    def cpus(self) -> list[int]:
        """CPU (OS index) of every placement entry, in order."""
        return [p.cpu for p in self.placement]


def result_document(r: Result) -> dict[str, Any]:
    """The ``topobind.result/1`` document of ``r``: the one writer in Python (HPL's results),
    the same envelope, in the same order, as the C kernels' ``libtb/src/tb_envelope.c``."""
    doc: dict[str, Any] = {
        "schema": RESULT_SCHEMA_ID,
        **pick(r, "kernel", "host", "timestamp", "layout"),
    }
    if r.tier is not None:
        doc["tier"] = r.tier
    doc["ranks"] = r.ranks
    if r.rank is not None:
        doc["rank"] = r.rank
    doc |= pick(r, "threads", "params", "pages", "placement", "metrics", "headline")
    if r.matrices:
        doc["matrices"] = {name: matrix_document(m) for name, m in r.matrices.items()}
    if r.evidence_document is not None:
        doc["evidence"] = r.evidence_document
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


# --------------------------------------------------------------------------- the reader
class ResultError(Exception):
    """A field of a result is not as documented; the callers turn it into a TopobindError
    naming the file (and line)."""


def _field(
    doc: dict[str, object], key: str, kind: type | tuple[type, ...], what: str, owner: str = ""
) -> Any:
    """``doc[key]`` when it is a ``kind`` (a bool is no number); ``owner``: the path of
    ``doc`` in the result (``pages.``), for the message."""
    if key not in doc:
        raise ResultError(f'missing "{owner}{key}" ({what})')
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ResultError(f'"{owner}{key}" must be {what}, got {json.dumps(value)[:60]}')
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


def _labels(raw: object) -> tuple[int | str, ...] | None:
    """A matrix's ``rows`` or ``cols`` (integers or strings, not empty), one shared tuple per
    distinct list (less memory, cheaper to send between processes); None if not so."""
    if not isinstance(raw, list) or not raw:
        return None
    labels = tuple(raw)
    if not all(type(x) is int or type(x) is str for x in labels):
        return None
    return _LABELS.setdefault(labels, labels)


def read_matrices(raw: object) -> dict[str, Matrix]:
    """The ``matrices`` object of a result as :class:`Matrix` records by name (raises
    ResultError); labels as in the file."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ResultError('"matrices" must be an object of named matrices')
    out = {}
    for name, m in raw.items():
        where = f'matrix "{name[:40]}"'
        if not isinstance(m, dict):
            raise ResultError(f"{where} must be an object")
        unit = _field(m, "unit", str, f"the {where} unit")
        rows, cols = _labels(m.get("rows")), _labels(m.get("cols"))
        values = m.get("values")
        if rows is None or cols is None:
            raise ResultError(
                f'{where}: "rows" and "cols" must be non-empty lists of labels (integers or '
                "strings)"
            )
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
        out[name] = Matrix(
            name=name,
            unit=unit,
            rows=rows,
            cols=cols,
            row_kind=str(m.get("row_kind", "")),
            col_kind=str(m.get("col_kind", "")),
            values=flat,
        )
    return out


_PLACEMENTS: dict[tuple[tuple[Any, ...], ...], tuple[Placement, ...]] = {}


def _placement(raw: object) -> tuple[Placement, ...]:
    """The ``placement`` array; () when it is missing or not as documented (the report then
    says it cannot draw that layout, nothing more; the schema refuses it)."""
    if not isinstance(raw, list):
        return ()
    entries = []
    for e in raw:
        if not isinstance(e, dict):
            return ()
        rank, thread, cpu, numa = e.get("rank"), e.get("thread"), e.get("cpu"), e.get("numa")
        if type(rank) is not int or type(thread) is not int or type(cpu) is not int:
            return ()
        aff, host = e.get("affinity"), e.get("host")
        affinity = (
            tuple(aff) if isinstance(aff, list) and all(type(c) is int for c in aff) else None
        )
        numa = numa if type(numa) is int else -1
        entries.append((rank, thread, cpu, numa, affinity, host if isinstance(host, str) else None))
    key = tuple(entries)
    got = _PLACEMENTS.get(key)
    if got is None:  # runs of one layout share one tuple
        got = _PLACEMENTS[key] = tuple(Placement(*e) for e in key)
    return got


_METHODS = {"thp": "THP ", "hugetlb-2M": "hugetlbfs ", "hugetlb-1G": "hugetlbfs ", "4k": "4 KiB "}
_PAGES_FIELDS = frozenset(("requested", "kib", "fallback", "note", "method"))


def fallback_text(requested: str | None, method: object) -> str:
    """What a page-size fallback was: ``THP fallback from 1G`` (the result's ``pages``
    ``requested`` and ``method``; ``auto`` tries 1G first)."""
    how = _METHODS.get(method, "") if isinstance(method, str) else ""
    asked = "1G (auto)" if requested == "auto" else (requested or "another size")
    return f"{how}fallback from {asked}"


def _pages(raw: object) -> Pages | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ResultError('"pages" must be an object like {"requested": "2M", "kib": 2048, ...}')
    kib = raw.get("kib")
    if isinstance(kib, bool) or not isinstance(kib, int) or kib <= 0:
        got = "it is missing" if "kib" not in raw else f"got {json.dumps(kib)[:40]}"
        raise ResultError(f'"pages.kib" must be a positive integer (KiB), {got}')
    method = raw.get("method")
    if method is not None and not isinstance(method, str):
        raise ResultError(f'"pages.method" must be a string, got {json.dumps(method)[:40]}')
    return Pages(
        requested=_field(raw, "requested", str, "the page size asked for, e.g. 2M", "pages."),
        kib=kib,
        fallback=_field(raw, "fallback", bool, "true or false", "pages."),
        note=_field(raw, "note", str, "a string", "pages."),
        method=method,
        extra={k: v for k, v in raw.items() if k not in _PAGES_FIELDS},
    )


def _trials(raw: object, where: str) -> tuple[float, ...]:
    if not isinstance(raw, list) or not raw:
        raise ResultError(f'{where} must have a non-empty "trials" list')
    for t in raw:
        if type(t) is not float and type(t) is not int:
            raise ResultError(f'{where}: "trials" must be numbers, got {json.dumps(t)[:40]}')
    trials = tuple(map(float, raw))
    if not any(map(math.isfinite, trials)):
        raise ResultError(
            f"{where}: no trial is a finite number (all NaN?); the run measured nothing: "
            "re-run the kernel or remove the file"
        )
    return trials


def _metrics(raw: object) -> dict[str, Metric]:
    """Every result has ``metrics`` (an object; whereami's is empty); a metric's ``trials``
    are numbers, not all NaN (a run with a headline measured something)."""
    if not isinstance(raw, dict):
        got = "missing" if raw is None else f"got {json.dumps(raw)[:40]}"
        raise ResultError(f'"metrics" must be an object of named metrics ({got})')
    out = {}
    for name, m in raw.items():
        where = f'metric "{name[:40]}"'
        if not isinstance(m, dict):
            raise ResultError(f"{where} must be an object")
        trials = _trials(m.get("trials"), where)
        owner = f"metrics.{name[:40]}."
        median, warmup = m.get("median"), m.get("warmup", 0)
        if type(warmup) is not int or warmup < 0:
            raise ResultError(f'"{owner}warmup" must be an integer >= 0')
        out[name] = Metric(
            unit=_field(m, "unit", str, "the unit", owner),
            higher_is_better=_field(m, "higher_is_better", bool, "true or false", owner),
            trials=trials,
            best=_number(m.get("best"), f'"{owner}best"'),
            avg=_number(m.get("avg"), f'"{owner}avg"'),
            min=_number(m.get("min"), f'"{owner}min"'),
            max=_number(m.get("max"), f'"{owner}max"'),
            median=None if median is None else _number(median, f'"{owner}median"'),
            warmup=warmup,
        )
    return out


def _headline(raw: object, metrics: dict[str, Metric]) -> Headline | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ResultError('"headline" must be an object or null')
    metric = _field(raw, "metric", str, "the headline metric name", "headline.")
    if metric not in metrics:
        raise ResultError(
            f'"headline.metric" {json.dumps(metric)[:40]} names no metric of "metrics" '
            f"({', '.join(sorted(metrics))[:80] or 'none'})"
        )
    unit = _field(raw, "unit", str, "the headline unit", "headline.")
    if unit != metrics[metric].unit:
        raise ResultError(
            f'"headline.unit" {json.dumps(unit)[:40]} differs from the unit of metric '
            f"{json.dumps(metric)[:40]} ({json.dumps(metrics[metric].unit)[:40]})"
        )
    hib = _field(raw, "higher_is_better", bool, "true or false", "headline.")
    value = _number(raw.get("value"), '"headline.value"')
    if not (math.isfinite(value) and 0 < value <= MAX_VALUE):
        raise ResultError(
            f'"headline.value" must be a positive finite number up to {MAX_VALUE:g}, got {value!r}'
        )
    stat = _field(raw, "stat", str, "the statistic (best, median, avg, min or max)", "headline.")
    return Headline(metric, stat, value, unit, hib)


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 1 else None


def _result(doc: object, source: str) -> Result:
    if not isinstance(doc, dict):
        raise ResultError(f"expected a JSON object (one result), got {type(doc).__name__}")
    schema = doc.get("schema")
    if schema != RESULT_SCHEMA_ID:
        raise ResultError(
            f'not a topobind result: "schema" is {json.dumps(schema)[:60]}, '
            f'expected "{RESULT_SCHEMA_ID}"'
        )
    kernel = _field(doc, "kernel", str, "the kernel name")
    host = _field(doc, "host", str, "the host name")
    if not kernel or not host:
        raise ResultError('"kernel" and "host" must not be empty')
    timestamp = _field(doc, "timestamp", str, "an ISO 8601 UTC time")
    _parse_time(timestamp)
    layout = doc.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise ResultError('"layout" must be a string or null')
    tier = _tier(doc.get("tier"))
    pages = _pages(doc.get("pages"))
    valid = _field(doc, "valid", bool, "true or false")
    validation, params, rank = doc.get("validation"), doc.get("params"), doc.get("rank")
    metrics = _metrics(doc.get("metrics"))
    return Result(
        schema=RESULT_SCHEMA_ID,
        kernel=kernel,
        host=host,
        timestamp=timestamp,
        layout=layout,
        ranks=_count(doc.get("ranks")),
        threads=_count(doc.get("threads")),
        params=params if isinstance(params, dict) else {},
        pages=pages,
        placement=_placement(doc.get("placement")),
        metrics=metrics,
        headline=_headline(doc.get("headline"), metrics),
        matrices=read_matrices(doc.get("matrices")),
        valid=valid,
        validation=validation if isinstance(validation, str) else "",
        rank=rank if type(rank) is int and rank >= 0 else None,
        source=source,
        evidence_document=evidence if isinstance(evidence := doc.get("evidence"), dict) else None,
        tier=tier,
    )


def tier_from_environment() -> str | None:
    """``TOPOBIND_TIER`` as the C kernels write it (``tier``; None when unset or empty), for
    a result written in Python (HPL's); a value that is no tier name is one TopobindError."""
    value = os.environ.get("TOPOBIND_TIER") or None
    try:
        return _tier(value)
    except ResultError as exc:
        raise TopobindError(f"TOPOBIND_TIER: {exc}") from None


def _tier(value: object) -> str | None:
    """``tier``: absent, or a tier's name (lower-case letters, digits, '-', '_')."""
    if value is None:
        return None
    if (not isinstance(value, str) or not 0 < len(value) <= MAX_TIER_CHARS
            or not value[0].isalpha() or not value.isascii()
            or not all(c.islower() or c.isdigit() or c in "-_" for c in value)):  # fmt: skip
        shown = json.dumps(value)[:40] if isinstance(value, str) else type(value).__name__
        raise ResultError(f'"tier" must be a tier name such as "quick" (the checks set it), '
                          f"got {shown}")  # fmt: skip
    return value


def result_from_document(doc: object, source: str = "<text>") -> Result:
    """The one reader: a decoded result document as a :class:`Result`, every field the model
    holds checked for its type (raises :class:`ResultError`, one line; the caller names the
    file). Thousands of documents a second: the fleet report reads through it without the
    schema; where a layout cannot be drawn from (``placement``, ``ranks``, ``threads`` not as
    documented) the result is still read, with () or None there."""
    return _result(doc, source)


def parse_result(doc: Any, source: str = "<text>") -> Result:
    """Validate an already-decoded document against the schema and read it
    (:func:`result_from_document`); TopobindError naming ``source`` on any defect."""
    validate_result_document(doc, source)
    try:
        return _result(doc, source)
    except ResultError as exc:
        raise TopobindError(f"{source}: {exc}") from None
