"""ReFrame reports carry each run's evidence: the checks' ``tb_evidence`` (reframe_tests/
topobind_rfm: the evidence section of the kernel result in the stage directory, else the load
rule's share, validation/evidence_files.py) read by validation/reframe_report.py into
``TestCase.evidence``, never failing the report."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import DATA

from topobind.measure.causes import signals_of
from topobind.measure.evidence import read_evidence
from topobind.validation.reframe_report import read_report, report_from_document


def report(tb_evidence: object) -> dict:
    case = {"display_name": "StreamCheck %layout=compact", "result": "pass", "system": "local",
            "partition": "default", "job_nodelist": ["node1"], "perfvalues": {},
            "tb_evidence": tb_evidence}  # fmt: skip
    return {"runs": [{"testcases": [case]}]}


def evidence_fixture() -> dict:
    return json.loads((DATA / "result_evidence_x86.json").read_text())["evidence"]


def test_the_evidence_of_a_run_reaches_the_test_case() -> None:
    ev = evidence_fixture()
    [case] = report_from_document(report(ev), "r.json").cases
    assert case.evidence == ev
    assert signals_of({"evidence": case.evidence})[0]["busy_share"] == 0.004


@pytest.mark.parametrize("value", [None, "", "{not json", [1, 2], 7, {}])
def test_evidence_not_as_documented_leaves_the_case_as_it_is(value: object) -> None:
    [case] = report_from_document(report(value), "r.json").cases
    assert case.evidence is None
    assert case.check == "StreamCheck" and case.node == "node1" and case.passed


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_a_stream_check_run_by_reframe_carries_its_evidence(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "topobind", "validate", "--site", "local", "--quiet",
           "--name", "StreamCheck", "--results", str(tmp_path), "-S", "StreamCheck.elements=200k",
           "-S", "StreamCheck.trials=3"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ}, check=False)  # fmt: skip
    assert proc.returncode in (0, 4), proc.stdout[-2000:] + proc.stderr[-2000:]
    [path] = glob.glob(str(tmp_path / "reports" / "*.json"))
    cases = read_report(path).cases
    assert cases and all(c.check == "StreamCheck" for c in cases)
    for case in cases:
        assert case.evidence, "the run's report holds no tb_evidence"
        ev = read_evidence(case.evidence).evidence
        assert ev is not None, read_evidence(case.evidence).reason
        assert ev.signal("busy_share") is not None
        assert ev.counters.events.get("context_switches") is not None
