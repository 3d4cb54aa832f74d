"""ReFrame reports carry each run's evidence: the checks' ``tb_evidence`` (reframe_tests/
topobind_rfm, the evidence of the kernel results in the stage directory) read by
validation/reframe_report.py into ``TestCase.evidence``, never failing the report."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import DATA

from topobind.validation.reframe_report import read_report, report_from_document


def report(tb_evidence: object) -> dict:
    case = {"display_name": "StreamCheck %layout=compact", "result": "pass", "system": "local",
            "partition": "default", "job_nodelist": ["node1"], "perfvalues": {},
            "tb_evidence": tb_evidence}  # fmt: skip
    return {"runs": [{"testcases": [case]}]}


def evidence_fixture() -> dict:
    return json.loads((DATA / "result_evidence_x86.json").read_text())["evidence"]


def test_the_evidence_of_each_rank_reaches_the_test_case() -> None:
    one, two = evidence_fixture(), evidence_fixture()
    two["signals"]["busy_share"] = 0.5
    [case] = report_from_document(report(json.dumps([one, two])), "r.json").cases
    assert [e.signal("busy_share") for e in case.evidence] == [0.004, 0.5]
    assert case.evidence_reason == ""


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no evidence recorded"),
        ("", "no evidence recorded"),
        ("{not json", "tb_evidence is not JSON"),
        ('{"a": 1}', "not a JSON array"),
        (7, "not a JSON text"),
        ('[{"version": 9}]', "evidence.version is 9, expected 1"),
    ],
)
def test_evidence_not_as_documented_leaves_the_case_as_it_is(value: object, reason: str) -> None:
    [case] = report_from_document(report(value), "r.json").cases
    assert case.evidence == () and reason in case.evidence_reason
    assert case.check == "StreamCheck" and case.node == "node1" and case.passed


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_a_stream_check_run_by_reframe_carries_its_evidence(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "topobind", "validate", "--site", "local", "--quiet",
           "--name", "StreamCheck", "--results", str(tmp_path), "-S", "StreamCheck.elements=200k",
           "-S", "StreamCheck.trials=3"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ}, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [path] = glob.glob(str(tmp_path / "reports" / "*.json"))
    cases = read_report(path).cases
    assert cases and all(c.check == "StreamCheck" for c in cases)
    for case in cases:
        assert case.evidence, case.evidence_reason
        assert case.evidence[0].signal("busy_share") is not None
        assert case.evidence[0].counters.events.get("context_switches") is not None
