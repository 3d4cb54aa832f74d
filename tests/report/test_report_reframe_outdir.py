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
    assert "left out: 4 files that are not results (plan.json 2, verify.json 2; " in proc.stdout
    assert "plan.json: not a topobind result" in proc.stdout  # an example
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


def _node_dirs(out: Path, doc: dict, tier: str | None, triads: dict[str, float],
               runs: int = 3) -> None:  # fmt: skip
    """One check directory a host and run, its STREAM result of ``tier``, beside the files
    a check leaves that are not results."""
    for host, triad in triads.items():
        for i in range(runs):
            one = json.loads(json.dumps(doc))
            one["host"] = host
            one["timestamp"] = f"2026-12-0{i + 1}T10:00:00Z"
            one["headline"]["value"] = triad * (1 + 0.001 * i)
            if tier is None:
                one.pop("tier", None)
            else:
                one["tier"] = tier
            check_dir(out / f"{host}-{tier}-{i}", f"StreamCheck_{i}", "compact", one,
                      triad * (1 + 0.001 * i))  # fmt: skip


def test_a_smoke_runs_figures_are_not_judged(tmp_path: Path, stream_doc: dict) -> None:
    """Issue 47 item 6: the smoke tier measures no performance: a smoke run's results list no
    SLOW HOSTS (node2 at a third of the others' triad, as a 1 MiB array on a busy node
    gives), the report says nothing was judged; beside a quick run's they are counted as not
    judged, and the first lines say what was read and left out, in counts."""
    smoke = tmp_path / "smoke"
    _node_dirs(smoke, stream_doc, "smoke", {"node1": 20000.0, "node2": 6000.0, "node3": 20100.0})
    proc = run_topobind("report", str(smoke), "-o", str(tmp_path / "rep"), timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == (
        f"topobind: error: {smoke}: nothing to judge: 9 results of the smoke tier measure no "
        "performance (not judged); report a quick or full tier's results\n"
    )
    assert not (tmp_path / "rep").exists()
    quick = tmp_path / "quick"
    _node_dirs(quick, stream_doc, "quick", {"node1": 20000.0, "node2": 20050.0, "node3": 19900.0})
    proc = run_topobind("report", str(smoke), str(quick), "-o", str(tmp_path / "rep"),
                        timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[2] == f"inputs: {smoke}, {quick}: 54 files, 18 results"
    assert lines[3] == ("not judged (smoke tier): 9 results: the smoke tier measures no "
                        "performance, its figures are not compared")  # fmt: skip
    assert lines[4] == ("left out: 36 files that are not results (plan.json 18, verify.json "
                        "18; report.json lists them all)")  # fmt: skip
    assert lines[5].startswith("  e.g. ") and lines[6].startswith("  e.g. ")
    assert lines[7].startswith("used: 9 runs in 1 group ")
    assert "SLOW HOSTS: none" in lines, proc.stdout
    assert sum("not a topobind result" in ln for ln in lines) == 2  # examples, not every file
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "Not judged (smoke tier, which measures no performance): 9 result(s)." in summary
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["inputs"]["not_judged"] == {"smoke": 9}
    assert len(doc["inputs"]["skipped"]) == 36


def test_results_without_a_tier_are_judged(tmp_path: Path, stream_doc: dict) -> None:
    """``topobind bench`` and a kernel run by hand write no tier: their figures measure."""
    plain = tmp_path / "plain"
    _node_dirs(plain, stream_doc, None, {"node1": 20000.0, "node2": 6000.0, "node3": 20100.0})
    proc = run_topobind("report", str(plain), "-o", str(tmp_path / "rep"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "SLOW HOSTS: 1 host(s)" in proc.stdout and "not judged" not in proc.stdout


def test_the_first_lines_stay_short_whatever_is_left_out(small_fleet: Path) -> None:
    """1,350 files that are not results (issue 47 item 6: each was a line): counted by name,
    the four commonest named, two examples; the summary's size does not grow with them."""
    import dataclasses

    from topobind.report.analysis import Options, analyse
    from topobind.report.tables import intro_lines
    from topobind.report.text import text_summary

    read = read_results([small_fleet])
    report = analyse(read.runs, Options(), read.inputs, read.files)
    names = ["load.json", "plan.json", "verify.json", "stream-size.json", "a.json", "b.json"]
    skipped = tuple((f"out/c{i}/{names[i % 6]}", "not a topobind result") for i in range(1350))
    big = dataclasses.replace(report, skipped=skipped, not_judged={"smoke": 12})
    lines = intro_lines(big)
    lines = lines[[i for i, ln in enumerate(lines) if ln.startswith("inputs: ")][0] :]
    assert lines[1] == ("not judged (smoke tier): 12 results: the smoke tier measures no "
                        "performance, its figures are not compared")  # fmt: skip
    assert lines[2] == ("left out: 1,350 files that are not results (a.json 225, b.json 225, "
                        "load.json 225, plan.json 225, 2 other names; report.json lists them "
                        "all)")  # fmt: skip
    assert lines[3:5] == ["  e.g. out/c0/load.json: not a topobind result",
                          "  e.g. out/c1/plan.json: not a topobind result"]  # fmt: skip
    assert len(intro_lines(big)) == len(intro_lines(report)) + 4
    assert len(text_summary(big)) - len(text_summary(report)) < 600
