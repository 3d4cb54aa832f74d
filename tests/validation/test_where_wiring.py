"""Where in a slow node (issue 45 item 3), through ``validate --each-node --reports``: the
check's runs carry their result document's matrices (``tb_matrices``, ReFrame's report per run),
and a SLOW row's ``cause:`` line (and so its drain reason) gains ``where: ...``; the nodes
whose matrices are like the fleet's get none; hostile matrices in a report name nothing and
break nothing. The rule itself: tests/measure/test_where.py."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_causes_wiring import NODES, _evidence, fake_slurm  # noqa: F401 (a fixture)

from topobind.cli.main import main
from topobind.validation import evidence_files

ROOT = Path(__file__).resolve().parents[2]


def _read_bw(node: str, run: int) -> dict[str, Any]:
    local = [41000.0 + 100 * ((run + i) % 3) for i in range(4)]
    if node == "node3":
        local[2] /= 2  # one memory channel of its NUMA node 2 missing
    return {
        "unit": "MB/s",
        "rows": [0, 1, 2, 3],
        "cols": [0, 1, 2, 3],
        "row_kind": "numa",
        "col_kind": "numa",
        "values": [[local[i] if i == j else None for j in range(4)] for i in range(4)],
    }


def _tc(node: str, run: int, where: object) -> dict[str, Any]:
    latency = 400.0 if node == "node3" else 95.0 + run + NODES.index(node)
    return {
        "display_name": f"LatencyCheck %.part=fleet:slurm %.nid={node}", "system": "fleet",
        "partition": "slurm", "result": "pass",
        "perfvalues": {"fleet:slurm:latency_ns": [latency, 0, None, None, "ns", "pass"]},
        "tb_evidence": _evidence(node, run), "tb_matrices": where,
    }  # fmt: skip


def _validate(tmp: Path, where: Any) -> int:
    doc = {"runs": [{"testcases": [_tc(n, r, where(n, r)) for n in NODES]} for r in range(7)]}
    report = tmp / "report.json"
    report.write_text(json.dumps(doc))
    return main(["validate", "--site", "fleet", "--partition", "slurm", "--each-node",
                 "--reports", str(report), "--drain"])  # fmt: skip


@pytest.mark.usefixtures("fake_slurm")
def test_the_slow_nodes_cause_line_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _validate(tmp_path, lambda n, r: {"matrices": {"read_bw": _read_bw(n, r)}}) == 1
    lines = capsys.readouterr().out.splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.startswith("node3 "))
    cause = lines[row + 1].strip()
    assert cause.startswith("cause: throttled (")
    assert cause.endswith("; where: NUMA node 2: read bandwidth 21 GB/s, fleet 41: a memory "
                          "channel?")  # fmt: skip
    assert sum("where:" in ln for ln in lines if not ln.startswith("scontrol")) == 1
    drain = next(ln for ln in lines if ln.startswith("scontrol update nodename=node3"))
    assert "where: NUMA node 2" in drain


@pytest.mark.parametrize("hostile", [
    "junk", {"matrices": "x"}, {"matrices": {"read_bw": {"rows": [0], "cols": [0, 1],
                                                        "values": [[1]]}}},
    {"matrices": {"read_bw": {"unit": "MB/s", "rows": [0, 1], "cols": [0, 1],
                              "values": [["x", 0], [None, -5]]}}},
])  # fmt: skip
@pytest.mark.usefixtures("fake_slurm")
def test_hostile_matrices_in_a_report_name_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hostile: object
) -> None:
    assert _validate(tmp_path, lambda n, r: hostile) == 1
    out = capsys.readouterr().out
    assert "cause: throttled (" in out and "where:" not in out


def test_the_stage_directorys_matrices_are_recorded_bounded(tmp_path: Path) -> None:
    assert evidence_files.matrices_in(tmp_path) == {}
    doc = {"schema": "topobind.result/1", "matrices": {"read_bw": _read_bw("node3", 0),
                                                       "other": {"unit": "x"}}}  # fmt: skip
    (tmp_path / "latency.json").write_text(json.dumps(doc))
    got = evidence_files.matrices_in(tmp_path)
    assert list(got["matrices"]) == ["read_bw"]
    assert got["matrices"]["read_bw"]["values"][2][2] == 20600.0
    big = {"unit": "ns", "rows": list(range(65)), "cols": list(range(65)), "row_kind": "cpu",
           "col_kind": "cpu", "values": [[1.0] * 65 for _ in range(65)]}  # fmt: skip
    (tmp_path / "latency.json").write_text(json.dumps({"schema": "topobind.result/1",
                                                       "matrices": {"c2c": big}}))  # fmt: skip
    assert evidence_files.matrices_in(tmp_path) == {}
    (tmp_path / "latency.json").unlink()
    os.mkfifo(tmp_path / "a.json")
    (tmp_path / "b.json").write_text('{"schema": "topobind.result/1", "matrices": [')
    assert evidence_files.matrices_in(tmp_path) == {}


def test_the_quick_tiers_bandwidth_row_follows_the_nodes_numa_count(tmp_path: Path) -> None:
    """LatencyCheck's prerun line (reframe_tests/latency.py) on this machine, the kernel
    replaced by echo: its own run of the row on a node of several NUMA nodes, none on one."""
    src = (ROOT / "reframe_tests" / "latency.py").read_text()
    line = src.split("MULTI_NUMA_BW_ROW = (", 1)[1].split("\n)", 1)[0]
    template = "".join(ast.literal_eval(part.strip()) for part in line.split("\n") if part.strip())
    snippet = template.format(kernel="echo kernel", pages="auto")
    run = subprocess.run(["bash", "-c", f"lsize=1G; {snippet}"], capture_output=True,
                         text=True, timeout=30, cwd=tmp_path)  # fmt: skip
    nodes = [p for p in os.listdir("/sys/devices/system/node") if p[4:].isdigit()]
    want = ("kernel --sizes 16K --min-time 0.001 --trials 1 --bw-matrix --bw-local --bw-size 1G "
            "--pages auto --json numa-bw.json") if len(nodes) > 1 else ""  # fmt: skip
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, want, "")


def test_the_rows_own_document_keeps_the_checks_evidence(tmp_path: Path) -> None:
    """latency.json (the check's run, its evidence) beside numa-bw.json (the row's run, its
    own evidence): the evidence recorded is the check's, the matrices the row's."""
    mine = {"schema": "topobind.result/1", "evidence": _evidence("node1", 0)}
    row = {"schema": "topobind.result/1", "evidence": _evidence("node3", 0),
           "matrices": {"read_bw": _read_bw("node3", 0)}}  # fmt: skip
    (tmp_path / "latency.json").write_text(json.dumps(mine))
    (tmp_path / "numa-bw.json").write_text(json.dumps(row))
    assert evidence_files.evidence_in(tmp_path) == mine["evidence"]
    assert evidence_files.matrices_in(tmp_path)["matrices"]["read_bw"]["rows"] == [0, 1, 2, 3]
