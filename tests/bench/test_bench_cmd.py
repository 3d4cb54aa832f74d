"""'topobind bench': real kernel runs through the CLI, saved results, failure pass-through."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import Cli, run_topobind

from topobind.measure import stats
from topobind.measure.hugepages import hugepages_status, reserve_hugepages
from topobind.measure.results import load_result


def bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_topobind("bench", *args, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_stream_repeat_3_writes_3_valid_results_and_summary(tmp_path: Path) -> None:
    proc = bench(
        "stream",
        "--repeat",
        "3",
        "--results",
        "res",
        "--",
        "--elements",
        "2M",
        "--trials",
        "3",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted((tmp_path / "res").glob("*/stream/*-compact.json"))
    assert len(files) == 3
    results = [load_result(f) for f in files]
    assert all(r.valid and r.kernel == "stream" and r.layout == "compact" for r in results)
    assert all(r.params["array_elements"] == 2_000_000 for r in results)
    ncores = len(os.sched_getaffinity(0))
    assert all(r.threads <= ncores for r in results)
    # one plain progress line per finished run (stderr is not a terminal): node, check, runs
    progress = [ln for ln in proc.stderr.splitlines() if "  stream compact  run " in ln]
    assert [ln.split("  run ")[1].split()[0] for ln in progress] == ["1/3", "2/3", "3/3"]
    assert all("  stream triad " in ln and ln.endswith(" MB/s") for ln in progress)
    values = [r.headline_value or 0.0 for r in results]
    s = stats.summarize(values, True)
    assert f"median {s.median:.6g}" in proc.stdout
    assert f"best {s.best:.6g}" in proc.stdout
    assert "3 valid" in proc.stdout


@pytest.mark.slow
def test_strict_1g_without_pages_fails_cleanly(tmp_path: Path) -> None:
    if 1048576 not in hugepages_status():
        pytest.skip("no 1G hugepage pool on this kernel")
    if os.geteuid() != 0:
        pytest.skip("needs root to empty the 1G pool")
    with reserve_hugepages(1048576, 0):
        proc = bench(
            "stream",
            "--strict",
            "--pages",
            "1G",
            "--results",
            "res",
            "--",
            "--elements",
            "2M",
            cwd=tmp_path,
        )
    # bench plans through request.plan: the empty pool is refused before the kernel runs
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind: error: --pages 1G:")
    assert not (tmp_path / "res").exists()


@pytest.mark.slow
def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    for args in (
        ["c2c", "--pages", "1G"],
        ["hpl"],  # no --ranks
        ["stream", "--repeat", "0"],
        ["stream", "--layout", "nonsense"],
        ["stream", "--pages", "3M"],
    ):
        proc = bench(*args, "--results", "res", cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert proc.stderr.startswith("topobind: error: "), (args, proc.stderr)
    assert not (tmp_path / "res").exists()
    unknown = bench("nosuchkernel", cwd=tmp_path)
    assert unknown.returncode == 2 and "nosuchkernel" in unknown.stderr


@pytest.mark.slow
def test_hpl_through_cli_writes_valid_result(tmp_path: Path) -> None:
    proc = bench(
        "hpl", "--ranks", "2", "--n", "1000", "--nb", "100", "--results", "r", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = (tmp_path / "r").glob("*/hpl/*.json")
    res = load_result(path)
    assert res.valid and res.params["N"] == 1000 and res.params["NB"] == 100
    assert json.loads(path.read_text())["metrics"]["gflops"]["unit"] == "GFLOP/s"
    assert "PASSED" in proc.stdout


@pytest.mark.slow
def test_hpl_repeat_writes_one_result_per_run(tmp_path: Path) -> None:
    """HplCheck %size=full runs 'topobind bench hpl ... --repeat 3' (issue 30: it was refused
    with 'hpl takes no --repeat/--strict/kernel arguments')."""
    proc = bench(
        "hpl",
        "--ranks",
        "1",
        "--n",
        "400",
        "--nb",
        "100",
        "--repeat",
        "2",
        "--results",
        "r",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted((tmp_path / "r").glob("*/hpl/*.json"))
    assert len(files) == 2 and all(load_result(f).valid for f in files)
    assert "hpl run 2/2" in proc.stdout


def test_hpl_refuses_kernel_arguments_and_strict_without_pages(tmp_path: Path) -> None:
    for args, word in ((["--", "--foo"], "kernel arguments"), (["--strict"], "--pages")):
        proc = bench("hpl", "--ranks", "1", *args, "--results", "r", cwd=tmp_path)
        assert proc.returncode == 2 and word in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_results_record_the_topology_so_a_report_elsewhere_can_draw_them(
    tmp_path: Path, topobind_cli: Cli
) -> None:
    from topobind.topo.topology import load, load_live

    proc = bench(
        "stream",
        "--layout",
        "spread",
        "--results",
        "res",
        "--",
        "--elements",
        "1M",
        "--trials",
        "2",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = (tmp_path / "res").glob("*/stream/*.json")
    recorded = json.loads(path.read_text())["params"]["topology"]
    assert recorded.startswith("synthetic:")
    again, live = load(recorded), load_live()
    assert [c.pus for c in again.cores] == [c.pus for c in live.cores]
    # The report draws the layout from the recorded topology even for a host it never saw.
    doc = json.loads(path.read_text())
    doc["host"] = "elsewhere"
    for p in doc["placement"]:
        p["host"] = "elsewhere"
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "r.json").write_text(json.dumps(doc))
    rep = topobind_cli("report", str(fleet), "-o", str(tmp_path / "rep"), timeout=300)
    assert rep.returncode == 0, rep.stderr
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["layouts"], report.get("layouts_not_drawn")
    assert "params.topology" in json.dumps(report["layouts"])


@pytest.mark.usefixtures("built_kernels")  # a fresh clone has none built
def test_repeat_prints_a_progress_line_per_run_and_none_with_quiet(tmp_path: Path) -> None:
    """issue 30 item 2: not a terminal -> one plain line per finished run (runs done/planned,
    elapsed, time left); --quiet -> none, the summary still printed."""
    kernel_args = ["--", "--elements", "100K", "--trials", "2"]
    proc = bench("stream", "--repeat", "2", "--results", "r", *kernel_args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "stream compact  run" in ln]
    assert [ln.split("  run ")[1][:7] for ln in lines] == ["1/2 ok ", "2/2 ok "], proc.stderr
    assert "left)" in lines[0] and "\x1b" not in proc.stderr
    quiet = bench("stream", "--repeat", "2", "-q", "--results", "r", *kernel_args, cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert "over 2 run(s)" in quiet.stdout


def test_a_stream_in_the_cache_says_so_on_the_console(tmp_path: Path) -> None:
    """Issue 47: `bench stream -- --elements 1M` printed `stream triad 47863.7 MB/s` and no
    word that the arrays fit in the cache (the JSON knew: elements_at_least_4x_llc false)."""
    from dataclasses import replace

    from topobind.bench.runs import BenchRun, caveats, summary_text

    params = {"elements_at_least_4x_llc": False, "llc_bytes_total": 32 << 20,
              "bytes_per_array": 8_000_000, "array_elements": 1_000_000}  # fmt: skip
    (line,) = caveats("stream", params)
    assert line == (
        "caveat: each array (7.6 MiB) is under 4x the last-level cache (32.0 MiB): a cache's "
        "bandwidth, not memory's; give --elements 16777216 or more"
    )
    big = {**params, "elements_at_least_4x_llc": True}
    assert caveats("stream", big) == [] and caveats("dgemm", params) == []
    assert caveats("stream", {**params, "llc_bytes_total": 0}) == []  # LLC unknown: no claim
    doc = json.loads((Path(__file__).parent / "data" / "stream-in-cache.json").read_text())
    from topobind.measure.results import result_from_document

    result = replace(result_from_document(doc), params=params)
    text = summary_text([BenchRun(tmp_path / "r.json", result)])
    assert text.splitlines()[1] == line
