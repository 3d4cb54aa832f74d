"""`topobind report` on a ReFrame output directory (issue 30 item 5): it takes the results in
it and notes what it skipped (plan.json, verify.json, load.json ...), and keeps the variants of a
check apart even when they ran the same layout (StreamCheck ``numa`` and ``compact`` both record
layout ``compact``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run_topobind
from paths import KERNELS_BIN

from topobind.errors import TopobindError
from topobind.report.reader import CHECK_FILE, read_results


@pytest.fixture(scope="module")
def stream_doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("k") / "s.json"
    subprocess.run(
        [str(KERNELS_BIN / "stream"), "--elements", "64K", "--trials", "3", "--json", str(out)],
        check=True,
        capture_output=True,
        env={"OMP_NUM_THREADS": "1", "TOPOBIND_LAYOUT": "compact"},
    )
    return json.loads(out.read_text())


def check_dir(root: Path, name: str, variant: str, doc: dict, triad: float) -> Path:
    d = root / "local" / "default" / "builtin" / name
    d.mkdir(parents=True)
    (d / "rfm_job.out").write_text("topobind-exit-status: 0 host: n1\n")
    (d / CHECK_FILE).write_text(json.dumps({"check": "StreamCheck", "variant": variant}))
    (d / "plan.json").write_text(json.dumps({"schema": "topobind.plan/1"}))
    (d / "verify.json").write_text(json.dumps({"verdict": "ok"}))
    doc = json.loads(json.dumps(doc))
    m = doc["metrics"]["triad"]
    m["trials"] = [triad] * len(m["trials"])
    for k in ("best", "avg", "median", "min", "max"):
        if k in m:
            m[k] = triad
    (d / "stream.0.json").write_text(json.dumps(doc))
    return d


def test_reframe_output_is_read_leniently_and_variants_stay_apart(
    tmp_path: Path, stream_doc: dict
) -> None:
    out = tmp_path / "output"
    check_dir(out, "StreamCheck_aaaa", "compact", stream_doc, 20000.0)
    check_dir(out, "StreamCheck_bbbb", "numa", stream_doc, 9000.0)
    read = read_results([out])
    assert len(read.runs) == 2 and read.files == 6
    assert sorted(r.layout for r in read.runs) == ["compact", "numa"]
    assert {r.params["reframe_check"] for r in read.runs} == {"StreamCheck"}
    assert sorted(Path(f).name for f, _ in read.skipped) == ["plan.json"] * 2 + ["verify.json"] * 2
    assert all("not a topobind result" in why for _, why in read.skipped)

    proc = run_topobind("report", str(out), "-o", str(tmp_path / "rep"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 4 file(s) that are not results" in proc.stdout
    assert "verify.json: not a topobind result" in proc.stdout
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert len(doc["inputs"]["skipped"]) == 4
    assert sorted(g["layout"] for g in doc["groups"]) == ["compact", "numa"]


def test_a_plain_results_directory_still_stops_at_a_foreign_file(
    tmp_path: Path, stream_doc: dict
) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "s.json").write_text(json.dumps(stream_doc))
    (tmp_path / "r" / "verify.json").write_text(json.dumps({"verdict": "ok"}))
    with pytest.raises(TopobindError, match="verify.json: not a topobind result"):
        read_results([tmp_path / "r"])
