"""'topobind bench' prints one evidence line after its figure and keeps the evidence in each
saved result (bench/runs.py ``evidence_summary``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_topobind
from paths import DATA

from topobind.bench.runs import evidence_summary
from topobind.measure.results import load_result, result_from_document


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_bench_prints_the_evidence_line_and_saves_the_section(tmp_path: Path) -> None:
    proc = run_topobind("bench", "stream", "--repeat", "2", "--results", "res", "--",
                        "--elements", "1M", "--trials", "3", cwd=tmp_path, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("stream triad ")
    # after the figure (and its cache caveat, where 1M elements fit in this node's cache)
    [evidence] = [ln for ln in lines[1:3] if ln.startswith("evidence")]
    assert evidence.startswith("evidence (most taken of 2 runs): busy ")
    assert ", counters: " in evidence
    files = sorted((tmp_path / "res").glob("*/stream/*.json"))
    assert len(files) == 2
    for f in files:
        ev = load_result(f).evidence  # the schema, then the reader
        assert ev is not None and ev.signal("busy_share") is not None
        assert json.loads(f.read_text())["evidence"]["version"] == 1


def test_the_line_is_the_most_taken_run_and_says_when_a_kernel_wrote_none() -> None:
    doc = json.loads((DATA / "result_evidence_x86.json").read_text())
    quiet = result_from_document(doc)
    doc["evidence"]["signals"]["steal_share"] = 0.3
    stolen = result_from_document(doc)
    del doc["evidence"]
    none = result_from_document(doc)
    assert "steal 30 %" in evidence_summary([quiet, stolen, none])
    assert evidence_summary([none]) == (
        "evidence: none (the kernel wrote none: rebuild it (make kernels))"
    )
