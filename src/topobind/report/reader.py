"""Reads the kernel result files of a fleet for the report, fast (forked workers from 2,000
files on).

Each document becomes a :class:`~topobind.kernels.results.Result` (the one reader,
:func:`topobind.kernels.results.result_from_document`: every field type-checked; the format is
defined in :mod:`topobind.kernels.results`). A corrupt, truncated or foreign file stops the
report with one :class:`~topobind.errors.TopobindError` line that names the file (and line, for
JSON Lines).

Inputs are files or directories; directories are searched recursively for ``*.json``,
``*.jsonl`` and ``*.ndjson`` (hidden files and directories, whose names start with ``.``, are
skipped). A file holds one JSON document, or one document per line (JSON Lines, as
``whereami`` writes; recognised by the ``.jsonl``/``.ndjson`` suffix or by a ``.json`` file
holding several documents on separate lines).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topobind.errors import TopobindError
from topobind.kernels.results import (  # noqa: F401 (MAX_FILE_BYTES: part of the reader's API)
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


@dataclass(frozen=True)
class ReadResult:
    runs: list[Result]
    files: int
    inputs: tuple[str, ...]


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
