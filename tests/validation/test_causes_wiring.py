"""A verdict's cause (issue 45 item 2) from the evidence ReFrame's report carries per run
(``tb_evidence``), through ``validate --each-node --reports ... --drain --metrics``: the
table's ``cause:`` line, the drain reason, the metrics' ``cause`` label; the nodes without
such a signal get no such cause; a report without evidence says ``unknown (no evidence:
...)``. The engine itself: tests/measure/test_causes.py."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from slurm_helpers import stand_in_slurm

from topobind.cli.main import main
from topobind.validation import evidence_files, slurm

NODES = ["node1", "node2", "node3", "node4"]


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stand_in_slurm(tmp_path, monkeypatch, NODES)


def _evidence(node: str, run: int) -> dict[str, Any]:
    signals: dict[str, Any] = {"throttled_share": 0.0, "busy_share": 0.01 + 0.001 * run}
    if node == "node3":
        signals.update(throttled_share=0.72 + 0.01 * run, quota_cpus=0.25)
    return {"version": 1, "window_s": 1.5, "cpus": [0, 1], "signals": signals}


def _tc(node: str, run: int, with_evidence: bool) -> dict[str, Any]:
    latency = 400.0 if node == "node3" else 95.0 + run + NODES.index(node)
    tc: dict[str, Any] = {
        "display_name": f"LatencyCheck %.part=fleet:slurm %.nid={node}", "system": "fleet",
        "partition": "slurm", "result": "pass",
        "perfvalues": {"fleet:slurm:latency_ns": [latency, 0, None, None, "ns", "pass"]},
    }  # fmt: skip
    if with_evidence:
        tc["tb_evidence"] = _evidence(node, run)
    return tc


def _report(tmp: Path, with_evidence: bool = True) -> Path:
    doc = {"runs": [{"testcases": [_tc(n, r, with_evidence) for n in NODES]}
                    for r in range(7)]}  # fmt: skip
    path = tmp / "report.json"
    path.write_text(json.dumps(doc))
    return path


def _validate(report: Path, prom: Path) -> int:
    return main(["validate", "--site", "fleet", "--partition", "slurm", "--each-node",
                 "--reports", str(report), "--drain", "--metrics", str(prom)])  # fmt: skip


def test_a_throttled_node_names_its_cause_in_table_drain_and_metrics(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prom = tmp_path / "m.prom"
    assert _validate(_report(tmp_path), prom) == 1
    out = capsys.readouterr().out
    cause = ("throttled (cgroup quota 0.25 CPUs, throttled 75% of the run; fleet: no quota, "
             "none)")  # fmt: skip
    lines = out.splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.startswith("node3 "))
    assert "SLOW (strong)" in lines[row] and "LatencyCheck.local.latency_ns" in lines[row]
    assert lines[row + 1].strip() == f"cause: {cause}"
    assert out.count("cause: ") == 1  # the ok nodes need none, and have none
    drain = next(ln for ln in lines if ln.startswith("scontrol update nodename=node3"))
    reason = f"slow: LatencyCheck.local.latency_ns +300%: {cause}"
    assert drain == shlex.join(slurm.drain_command("node3", reason)), drain
    assert drain.endswith(f"'reason=topobind: {reason}'")
    text = prom.read_text()
    labels = 'site="fleet",partition="slurm",node="node3",cause="throttled"'
    assert f"topobind_node_cause{{{labels}}} 1" in text
    assert text.count("topobind_node_cause{") == 1


def test_a_report_without_evidence_says_unknown_with_the_reason(
    tmp_path: Path, fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prom = tmp_path / "m.prom"
    assert _validate(_report(tmp_path, with_evidence=False), prom) == 1
    out = capsys.readouterr().out
    assert ("cause: unknown (no evidence: the report holds none of this run (no "
            "tb_evidence))") in out  # fmt: skip
    assert 'node="node3",cause="unknown"} 1' in prom.read_text()


def test_the_stage_directorys_evidence_is_the_documents_else_the_load_share(
    tmp_path: Path,
) -> None:
    (tmp_path / "load.json").write_text(json.dumps({"seconds": 2.0, "others_share": 0.4}))
    got = evidence_files.evidence_in(tmp_path)
    assert got["signals"] == {"busy_share": 0.4} and got["source"] == "load.json"
    doc = {"schema": "topobind.result/1", "evidence": _evidence("node3", 0)}
    (tmp_path / "latency.json").write_text(json.dumps(doc))
    assert evidence_files.evidence_in(tmp_path) == doc["evidence"]


def test_a_fifo_or_garbage_in_the_stage_directory_is_no_evidence(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "a.json")
    (tmp_path / "b.json").write_text("{not json")
    (tmp_path / "load.json").write_text(json.dumps({"others_share": "x"}))
    assert evidence_files.evidence_in(tmp_path) == {}
    assert evidence_files.evidence_in(tmp_path / "absent") == {}


def test_a_conformance_finding_gets_no_cause_line() -> None:
    """Its finding is its cause; no check's evidence explains it."""
    from topobind.validation import verdict

    obs = verdict.Observations()
    for n in NODES:
        obs.ran_on[n] = {"LatencyCheck"}
    obs.failures.append(verdict.Failure("node2", "conformance", "-", "smt: 2, site: 1"))
    got = verdict.with_causes(verdict.node_verdicts(NODES, obs, []), obs, 0.05)
    (fail,) = [v for v in got if v.status == "FAIL"]
    assert fail.node == "node2" and fail.cause == ""
    assert "cause:" not in verdict.table(got)
