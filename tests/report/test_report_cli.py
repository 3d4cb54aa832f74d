"""`topobind report` end to end: outputs, exit statuses, bad input, atomic report directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run_topobind as topobind
from fleetgen import FleetSpec, generate_fleet, parse_slow

pytestmark = pytest.mark.slow

SLOW = "gen-node0005:1.10,gen-node0017:1.13,gen-node0031:1.15"


def snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(d)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    spec = FleetSpec(
        hosts=40, runs=7, kernels=("stream", "dgemm", "latency"), slow=parse_slow(SLOW)
    )
    generate_fleet(root / "results", spec)
    return root / "results"


@pytest.fixture(scope="module")
def full_report(
    fleet: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("out") / "report"
    proc = topobind("report", str(fleet), "-o", str(out))
    return out, proc


def test_report_outputs(full_report: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = full_report
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in out.iterdir())
    for need in ("index.html", "report.json", "summary.md", "summary.txt"):
        assert need in names
    pngs = [n for n in names if n.endswith(".png")]
    # per kernel: per-host spread + ECDF; latency also has two NUMA matrices
    assert {
        f"{k}-{kern}-nolayout-2MiB.png"
        for k in ("hosts", "ecdf")
        for kern in ("stream", "dgemm", "latency")
    } <= set(pngs)
    assert "matrix-latency-numa_latency-nolayout-2MiB.png" in pngs
    summary = (out / "summary.txt").read_text()
    assert proc.stdout.startswith(summary)  # printed, too
    doc = json.loads((out / "report.json").read_text())
    assert doc["schema"] == "topobind.report/1"
    assert doc["slow_host_names"] == ["gen-node0005", "gen-node0017", "gen-node0031"]
    assert {p["file"] for p in doc["pictures"]} == set(pngs)
    # slow hosts are listed first in the summary, before the fleet table
    assert summary.index("SLOW HOSTS: 3 host(s)") < summary.index("FLEET:")
    html = (out / "index.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(pngs)
    assert "http://" not in html and "https://" not in html  # self-contained
    assert "GENERATED DATA" in html
    for name in pngs:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # no temporary directories left beside the report
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".report.")]


def test_fail_on_slow_and_markdown(fleet: Path, tmp_path: Path) -> None:
    proc = topobind(
        "report", str(fleet), "-o", str(tmp_path / "r"), "--fail-on-slow", "--format", "markdown"
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("### topobind fleet report")
    assert "**3 slow host(s)**" in proc.stdout
    assert proc.stdout == (tmp_path / "r" / "summary.md").read_text()


def test_healthy_fleet_exit_zero_and_replace_old_report(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "ok", FleetSpec(hosts=8, runs=3, kernels=("stream",)))
    out = tmp_path / "r"
    out.mkdir()
    (out / "report.json").write_text("{}")  # an old report, with the manifest topobind writes
    (out / "stale.png").write_bytes(b"old")
    (out / ".topobind-report").write_text("topobind-report 1\nreport.json\nstale.png\n")
    proc = topobind("report", str(tmp_path / "ok"), "-o", str(out), "--fail-on-slow")
    assert proc.returncode == 0, proc.stderr
    assert "SLOW HOSTS: none" in proc.stdout
    assert not (out / "stale.png").exists()  # replaced as a whole
    assert json.loads((out / "report.json").read_text())["slow_found"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok", "r"]


def _base(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    generate_fleet(d, FleetSpec(hosts=2, runs=2, kernels=("stream",)))
    return d


def _one_result(d: Path) -> Path:
    return sorted(d.rglob("*.json"))[0]


def _corrupt(d: Path) -> Path:
    bad = d / "gen-node0001" / "stream-corrupt.json"
    bad.write_text('{"schema": "topobind.result/1", "kernel": "stream", ,}')
    return bad


def _truncated(d: Path) -> Path:
    bad = d / "gen-node0002" / "stream-truncated.json"
    bad.write_bytes(_one_result(d).read_bytes()[:333])
    return bad


def _empty_file(d: Path) -> Path:
    bad = d / "gen-node0002" / "stream-empty.json"
    bad.write_bytes(b"")
    return bad


def _mixed_units(d: Path) -> Path:
    doc = json.loads(_one_result(d).read_text())
    doc["headline"]["unit"] = "GB/s"
    doc["metrics"][doc["headline"]["metric"]]["unit"] = "GB/s"  # one file is consistent
    doc["headline"]["value"] = 240.0
    bad = d / "gen-node0002" / "zz-stream-in-gbs.json"  # sorts after the MB/s files
    bad.write_text(json.dumps(doc))
    return bad


def _empty_dir(d: Path) -> Path:
    empty = d.parent / "empty"
    (empty / "sub").mkdir(parents=True)
    return empty


@pytest.mark.parametrize(
    ("make_bad", "needle", "only_bad"),
    [
        (_corrupt, "not valid JSON", False),
        (_truncated, "not valid JSON", False),
        (_empty_file, "empty file", False),
        (_mixed_units, "unit is 'GB/s'", False),
        (_empty_dir, "holds no result files", True),
    ],
)
def test_bad_input_exit_2_names_file_and_leaves_dir(
    tmp_path: Path, make_bad, needle: str, only_bad: bool
) -> None:  # noqa: ANN001
    d = _base(tmp_path)
    bad = make_bad(d)
    inputs = [str(bad)] if only_bad else [str(d)]
    # 1. DIR absent: stays absent, nothing beside it
    out = tmp_path / "out" / "report"
    proc = topobind("report", *inputs, "-o", str(out))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("topobind: error: ") and str(bad) in lines[0] and needle in lines[0]
    assert not out.exists() and not out.parent.exists()
    # 2. DIR holds an old report: unchanged, byte for byte and mtime
    old = tmp_path / "old"
    good = topobind("report", str(_one_result(d)), "-o", str(old))
    assert good.returncode == 0, good.stderr
    before = snapshot(old)
    proc = topobind("report", *inputs, "-o", str(old))
    assert proc.returncode == 2 and str(bad) in proc.stderr
    assert snapshot(old) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_missing_input_and_refusals(tmp_path: Path) -> None:
    proc = topobind("report", str(tmp_path / "nothing-here"), "-o", str(tmp_path / "r"))
    assert proc.returncode == 2 and "nothing-here: no such file or directory" in proc.stderr
    d = _base(tmp_path)
    # an existing directory that is not a report is never replaced
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep me")
    proc = topobind("report", str(d), "-o", str(precious))
    assert proc.returncode == 2 and "refusing to replace" in proc.stderr
    assert (precious / "thesis.tex").read_text() == "keep me"
    # the output directory must not contain the inputs
    proc = topobind("report", str(d), "-o", str(d.parent))
    assert proc.returncode == 2 and "inside the output directory" in proc.stderr
    # results marked invalid only: nothing to report
    for f in d.rglob("*.json"):
        doc = json.loads(f.read_text())
        doc["valid"] = False
        f.write_text(json.dumps(doc))
    proc = topobind("report", str(d), "-o", str(tmp_path / "r"))
    assert proc.returncode == 2 and "marked invalid" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_help_teaches() -> None:
    proc = topobind("report", "--help")
    assert proc.returncode == 0
    for needle in ("examples:", "--fail-on-slow", "exit status", "--warmup", "fleetgen"):
        assert needle in proc.stdout


def test_warmup_reported_apart(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "f", FleetSpec(hosts=3, runs=3, kernels=("stream",)))
    proc = topobind("report", str(tmp_path / "f"), "-o", str(tmp_path / "r"), "--warmup", "1")
    assert proc.returncode == 0, proc.stderr
    assert "warm-up run(s)" in proc.stdout and "warm-up runs dropped per host: 1" in proc.stdout
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    for h in doc["groups"][0]["per_host"]:
        assert h["runs"] == 2 and len(h["warmup"]) == 1
        assert h["warmup"][0]["timestamp"] < min(h["timestamps"])
