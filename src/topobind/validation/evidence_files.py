"""The evidence of one check's run, from the files its job left in the stage directory:
the ``evidence`` section of the result document the kernel wrote (``topobind.result/1``,
docs/results-format.md), else one made of ``load.json`` (the load rule's share of other
processes, :mod:`topobind.validation.load`, as ``busy_share``). The ReFrame checks record it
per run as ``tb_evidence`` (reframe_tests/topobind_rfm), so ReFrame's report carries it and
``validate --each-node`` names causes from it (:mod:`topobind.measure.causes`).

Every read is bounded: at most :data:`MAX_FILES` JSON files, each a regular file of at most
:data:`MAX_BYTES` (a FIFO is never opened blocking); anything unreadable is left out, never
raised: a run without evidence is said so by the cause ("unknown (no evidence: ...)").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_FILES = 16  # JSON files looked at in one stage directory
MAX_BYTES = 8 * 2**20  # a result document with its evidence (c2c of 512 PUs: ~3 MiB)
#: the matrices recorded for validate's "where" (topobind.measure.where.KINDS), and the most
#: labels a side of one recorded (a NUMA matrix: one a node; a larger c2c is left out: the
#: ReFrame report holds every run's)
WHERE_MATRICES = ("read_bw", "latency", "c2c")
MAX_WHERE_LABELS = 64
RESULT_SCHEMA = "topobind.result/1"


def _read(path: Path) -> Any:
    from topobind.errors import TopobindError
    from topobind.measure.results import read_bytes

    try:
        return json.loads(read_bytes(str(path), MAX_BYTES))
    except (TopobindError, ValueError, RecursionError):
        return None


def _result_documents(d: Path, load_file: str) -> list[Path]:
    try:
        return sorted(p for p in d.glob("*.json") if p.name != load_file)[:MAX_FILES]
    except OSError:
        return []


def matrices_in(stagedir: str | Path, load_file: str = "load.json") -> dict[str, Any]:
    """``{"matrices": {NAME: matrix}}`` of the first result document in ``stagedir`` with one
    of :data:`WHERE_MATRICES` of at most :data:`MAX_WHERE_LABELS` labels a side (each checked
    by the one reader, results.read_matrices), else {}."""
    from topobind.measure.results import ResultError, matrix_document, read_matrices

    for path in _result_documents(Path(stagedir), load_file):
        doc = _read(path)
        if not isinstance(doc, dict) or doc.get("schema") != RESULT_SCHEMA:
            continue
        raw = doc.get("matrices")
        if not isinstance(raw, dict):
            continue
        kept = {}
        for name in WHERE_MATRICES:
            try:
                m = read_matrices({name: raw[name]})[name] if name in raw else None
            except (ResultError, ValueError, TypeError, OverflowError):
                m = None
            if m is not None and max(len(m.rows), len(m.cols)) <= MAX_WHERE_LABELS:
                kept[name] = matrix_document(m)
        if kept:
            return {"matrices": kept}
    return {}


def evidence_in(stagedir: str | Path, load_file: str = "load.json") -> dict[str, Any]:
    """The evidence section of the first result document in ``stagedir`` that has one, else
    one made of ``load_file``'s share, else {}."""
    d = Path(stagedir)
    for path in _result_documents(d, load_file):
        doc = _read(path)
        if isinstance(doc, dict) and doc.get("schema") == RESULT_SCHEMA and isinstance(
                doc.get("evidence"), dict):  # fmt: skip
            return doc["evidence"]
    load = _read(d / load_file)
    if not isinstance(load, dict):
        return {}
    share, seconds = load.get("others_share"), load.get("seconds")
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        return {}
    return {"version": 1, "window_s": seconds if isinstance(seconds, int | float) else 0.0,
            "signals": {"busy_share": float(share)}, "source": "load.json",
            "unavailable": {"*": "the kernel wrote no evidence section; busy_share is the "
                                 "load rule's share of the whole node (load.json)"}}  # fmt: skip
