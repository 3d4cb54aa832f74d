"""``topobind run --evidence``: tb-evidence between each rank's step and its program, one file a
rank in the scratch directory, gathered (launch/run.py ``gather_evidence``: bounded, bad files
kept with their reason), one line on stderr (measure/evidence.py ``ranks_line``) and
``--evidence-json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_topobind
from paths import DATA

from topobind.launch.run import gather_evidence
from topobind.measure.evidence import evidence_of, ranks_line


def _doc(rank: int, host: str = "node1", busy: float = 0.0) -> dict:
    ev = json.loads((DATA / "result_evidence_x86.json").read_text())["evidence"]
    ev["signals"]["busy_share"] = busy
    return {"schema": "topobind.evidence/1", "host": host, "rank": rank, "command": "a.out",
            "status": 0, "evidence": ev}  # fmt: skip


def test_gather_reads_every_rank_and_keeps_bad_files_with_their_reason(tmp_path: Path) -> None:
    (tmp_path / "evidence-1-20.json").write_text(json.dumps(_doc(1, "node2", 0.4)))
    (tmp_path / "evidence-0-10.json").write_text(json.dumps(_doc(0)))
    (tmp_path / "evidence-2-30.json").write_text("{truncated")
    os.mkfifo(tmp_path / "evidence-3-40.json")  # never opened blocking
    (tmp_path / "evidence-4-50.json").write_text(json.dumps({"schema": "other"}))
    (tmp_path / "step.txt").write_text("not evidence")
    got = gather_evidence(str(tmp_path))
    assert [(r.host, r.rank) for r in got[:2]] == [("node1", 0), ("node2", 1)]
    assert got[1].evidence is not None and got[1].evidence.signal("busy_share") == 0.4
    reasons = sorted(r.reason for r in got[2:])
    assert len(reasons) == 3 and all(r.startswith("evidence-") for r in reasons)
    assert any("FIFO" in r for r in reasons)
    assert any("not a topobind.evidence/1 document" in r for r in reasons)
    assert gather_evidence(str(tmp_path / "absent")) == []


def test_the_line_names_the_worst_rank_a_quota_and_the_ranks_without() -> None:
    quiet, busy = evidence_of(_doc(0)), evidence_of(_doc(1, "node2", 0.62))
    assert quiet is not None and busy is not None
    line = ranks_line([("node1 rank 0", quiet, ""), ("node2 rank 1", busy, ""),
                       ("node3 rank 2", None, "evidence-2-30.json: corrupt")])  # fmt: skip
    assert line.startswith("evidence: 3 rank(s) on 3 host(s): busy max 62 % (node2 rank 1)")
    assert "counters: hardware (cycles" in line
    assert line.endswith("; 1 rank(s) without: evidence-2-30.json: corrupt")
    assert ranks_line([]) == "evidence: 0 rank(s) on 0 host(s): none (no rank wrote its evidence)"


def test_evidence_options_are_checked_before_the_launch(tmp_path: Path) -> None:
    proc = run_topobind("run", "--evidence-json", str(tmp_path / "e.json"), "--", "true")
    assert proc.returncode != 0 and "--evidence-json FILE needs --evidence" in proc.stderr
    proc = run_topobind("run", "--evidence", "--dry-run", "--", "true")
    assert proc.returncode != 0 and "drop --dry-run" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_run_evidence_of_two_ranks_under_mpirun(tmp_path: Path) -> None:
    out = tmp_path / "ev.json"
    proc = run_topobind("run", "--ranks", "2", "--threads", "1", "--launcher", "mpirun",
                        "--evidence", "--evidence-json", str(out), "--", "sh", "-c", "exit 0",
                        cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("evidence:")]
    assert line.startswith("evidence: 2 rank(s) on 1 host(s): busy max ")
    doc = json.loads(out.read_text())
    assert doc["schema"] == "topobind.run-evidence/1" and doc["status"] == 0
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["status"] == 0 for r in ranks)
    cpus = [tuple(evidence_of(r).cpus) for r in ranks]
    assert all(len(c) == 1 for c in cpus) and cpus[0] != cpus[1]  # each rank's bound CPU
    assert all(evidence_of(r).counters.events.get("context_switches") is not None for r in ranks)


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_run_evidence_passes_the_programs_status_on(tmp_path: Path) -> None:
    proc = run_topobind("run", "--ranks", "1", "--threads", "1", "--evidence", "--",
                        "sh", "-c", "exit 3", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 3
    assert any(x.startswith("evidence: 1 rank(s) on 1 host(s)") for x in proc.stderr.splitlines())


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_run_evidence_under_srun_in_a_slurm_job(
    local_slurm: dict[str, str], tmp_path: Path
) -> None:
    """The ranks' files land in the job's scratch directory from inside srun's tasks."""
    out = tmp_path / "ev.json"
    cmd = ["salloc", "-n", "2", "--quiet", "topobind", "run", "--threads", "1", "--launcher",
           "srun", "--evidence", "--evidence-json", str(out), "--", "true"]  # fmt: skip
    env = {**local_slurm, "PATH": f"{Path(sys.executable).parent}:{local_slurm.get('PATH', '')}"}
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "evidence: 2 rank(s) on 1 host(s): busy max " in proc.stderr
    ranks = json.loads(out.read_text())["ranks"]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert all(evidence_of(r) is not None for r in ranks)
