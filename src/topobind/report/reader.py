"""Reads the kernel result files of a fleet for the report, fast (forked workers from 2,000
files on).

Each document becomes a :class:`~topobind.measure.results.Result` (the one reader,
:func:`topobind.measure.results.result_from_document`: every field type-checked; the format is
defined in :mod:`topobind.measure.results`). A corrupt, truncated or foreign file stops the
report with one :class:`~topobind.errors.TopobindError` line that names the file (and line, for
JSON Lines).

Inputs are files or directories; directories are searched recursively for ``*.json``,
``*.jsonl`` and ``*.ndjson`` (hidden files and directories, whose names start with ``.``, are
skipped). A file holds one JSON document, or one document per line (JSON Lines, as
``whereami`` writes; recognised by the ``.jsonl``/``.ndjson`` suffix or by a ``.json`` file
holding several documents on separate lines).

A ReFrame output directory (``reframe -o DIR``: one directory per check holding
``rfm_job.sh``/``rfm_job.out``, or topobind's :data:`CHECK_FILE`) is read leniently: it also
holds JSON that is not a result (``plan.json``, ``verify.json``, ...), so such a file is
skipped and noted (:attr:`ReadResult.skipped`) instead of stopping the report. The results of a
check directory whose :data:`CHECK_FILE` names the check and its variant are grouped under
that variant (``layout`` := the variant, ``params.reframe_check`` := the check), so ReFrame
variants that ran the same layout (StreamCheck ``numa`` and ``compact``) are never merged.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topobind.errors import TopobindError
from topobind.measure.results import (  # noqa: F401 (MAX_FILE_BYTES: part of the reader's API)
    MAX_FILE_BYTES,
    RESULT_SUFFIXES,
    TOO_DEEP,
    Result,
    ResultError,
    read_bytes,
    result_from_document,
)
from topobind.report.parallel import fork_map

_LINES_SUFFIXES = (".jsonl", ".ndjson")
PARALLEL_MIN_FILES = 2000  # from this many files on, decode in forked workers
CHUNK_FILES = 500
#: written by every topobind ReFrame check into its stage (and kept in its output) directory:
#: {"check": "StreamCheck", "variant": "numa"}
CHECK_FILE = "topobind-check.json"
REFRAME_MARKERS = frozenset({"rfm_job.sh", "rfm_job.out", CHECK_FILE})


@dataclass(frozen=True)
class ReadResult:
    runs: list[Result]
    files: int
    inputs: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (file, why): ReFrame output directories only


def _loads(data: bytes, where: str, unit: str) -> object:
    """One JSON document of a result ``unit`` ("file" or "line") at ``where``; a defect is one
    TopobindError. A file whose document is followed by more on further lines (JSON Lines in
    a ``.json`` file) raises :class:`json.JSONDecodeError` for the caller to read it line by
    line."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and unit == "file" and data.count(b"\n") > 1:
            raise
        at = f"line {exc.lineno} column {exc.colno}" if unit == "file" else f"column {exc.colno}"
        raise TopobindError(
            f"{where}: not valid JSON ({exc.msg} at {at}); "
            "the file is corrupt or truncated: re-run the kernel or remove the file"
        ) from None
    except UnicodeDecodeError:
        raise TopobindError(f"{where}: not a JSON text {unit} (bad UTF-8)") from None
    except RecursionError:
        raise TopobindError(f"{where}: {TOO_DEEP}") from None


def _result(doc: object, where: str) -> Result:
    try:
        return result_from_document(doc, where)
    except ResultError as exc:
        raise TopobindError(f"{where}: {exc}") from None


def _decode_lines(path: str, data: bytes) -> list[Result]:
    out = []
    for lineno, line in enumerate(data.splitlines(), 1):
        if line.strip():
            where = f"{path}:{lineno}"
            out.append(_result(_loads(line, where, "line"), where))
    return out


def read_file(path: str | os.PathLike[str]) -> list[Result]:
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
        doc = _loads(data, name, "file")
    except json.JSONDecodeError:  # JSON Lines in a .json file
        return _decode_lines(name, data)
    return [_result(doc, name)]


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
    lenient: set[str] = set()
    for name in names:
        if os.path.isdir(name):
            found = find_result_files(name, exclude)
            if is_reframe_output(name):
                lenient.update(os.path.abspath(f) for f in found)
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
    if lenient:
        return _read_lenient(unique, lenient, names)
    if len(unique) >= PARALLEL_MIN_FILES:
        chunks = [unique[i : i + CHUNK_FILES] for i in range(0, len(unique), CHUNK_FILES)]
        runs = [r for part in fork_map(_read_chunk, chunks) for r in part]
    else:
        runs = _read_chunk(unique)
    return ReadResult(runs=runs, files=len(unique), inputs=names)


def _read_chunk(files: Sequence[str]) -> list[Result]:
    runs: list[Result] = []
    for f in files:
        found = read_file(f)
        if not found:
            raise TopobindError(f"{f}: holds no result (only blank lines); remove it")
        runs.extend(found)
    return runs


def is_reframe_output(root: str) -> bool:
    """Whether directory ``root`` is (or holds) a ReFrame output directory."""
    return any(REFRAME_MARKERS.intersection(names) for _d, _s, names in os.walk(root))


def check_label(directory: str) -> tuple[str, str] | None:
    """(check, variant) from ``directory``'s :data:`CHECK_FILE`, or None (absent or bad)."""
    try:
        doc = json.loads(read_bytes(os.path.join(directory, CHECK_FILE)))
    except (TopobindError, OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    check, variant = doc.get("check"), doc.get("variant")
    if not isinstance(check, str) or not isinstance(variant, str) or not check:
        return None
    return check[:100], variant[:100]


def _read_lenient(files: Sequence[str], lenient: set[str], names: tuple[str, ...]) -> ReadResult:
    """Read ``files``; those in ``lenient`` (inside a ReFrame output directory) that are not
    results are skipped with the reason, and results are labelled with their check's variant."""
    runs: list[Result] = []
    skipped: list[tuple[str, str]] = []
    labels: dict[str, tuple[str, str] | None] = {}
    for f in files:
        if os.path.basename(f) == CHECK_FILE:
            continue
        try:
            found = read_file(f)
        except TopobindError as exc:
            if os.path.abspath(f) not in lenient:
                raise
            skipped.append((f, str(exc).removeprefix(f"{f}: ")))
            continue
        d = os.path.dirname(f)
        if d not in labels:
            labels[d] = check_label(d)
        label = labels[d]
        if label is not None:
            check, variant = label
            found = [
                dataclasses.replace(r, layout=variant, params={**r.params, "reframe_check": check})
                for r in found
            ]
        runs.extend(found)
    read = sum(1 for f in files if os.path.basename(f) != CHECK_FILE)  # every file looked at
    return ReadResult(runs=runs, files=read, inputs=names, skipped=tuple(skipped))
