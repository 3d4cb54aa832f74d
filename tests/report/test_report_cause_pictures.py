"""The fleet report's view of causes (issue 45 item 2): beside the figure's ECDF, the ECDF of
the signal a slow host's cause names; McCalpin's scatter of each run's figure against its L2
lines in where the results carry hardware counters, one line why where they do not. The
pictures are checked by what they drew (``Picture.data``), not by their pixels."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from fleetgen import FleetSpec, generate_fleet, parse_causes, parse_slow

from topobind.report import cause_charts, cause_views
from topobind.report.analysis import Options, Report, analyse
from topobind.report.reader import read_results

TRAFFIC = ("gen-node0003", "gen-node0008")
THROTTLED = "gen-node0011"


def _report(root: Path, evidence: str, hosts: int = 12, runs: int = 5) -> Report:
    causes = ",".join([f"{h}:traffic" for h in TRAFFIC] + [f"{THROTTLED}:throttled"])
    slow = ",".join(f"{h}:1.25" for h in (*TRAFFIC, THROTTLED))
    spec = FleetSpec(hosts=hosts, runs=runs, kernels=("stream",), slow=parse_slow(slow),
                     evidence=evidence, causes=parse_causes(causes))  # fmt: skip
    generate_fleet(root / "fleet", spec)
    read = read_results([root / "fleet"])
    return analyse(read.runs, Options(), read.inputs, read.files)


def test_mccalpins_case_names_memory_traffic_and_draws_the_scatter(tmp_path: Path) -> None:
    report = _report(tmp_path, "counters")
    causes = {h.host: h.cause for _, h in report.slow}
    for host in TRAFFIC:
        assert causes[host].startswith("memory traffic (L2 lines in"), causes[host]
    assert causes[THROTTLED].startswith("throttled (cgroup quota 16 CPUs"), causes[THROTTLED]
    cv = report.cause_views
    by_signal = {v.signal: v for v in cv.signals}
    assert set(by_signal["l2_lines_in"].hosts) == set(TRAFFIC)
    assert by_signal["throttled_share"].hosts == (THROTTLED,)
    assert cv.no_counters == ""
    (scatter,) = cv.scatters
    pic = cause_charts.scatter_picture(report, scatter)
    assert (pic.kind, pic.filename) == ("scatter", "scatter-stream-nolayout-2MiB.png")
    assert pic.data["counter"] == "l2_lines_in" and pic.data["per"] == "64-byte line of work"
    assert len(pic.data["x"]) == pic.data["runs"] == 12 * 5
    assert sum(pic.data["slow"]) == 3 * 5  # every run of the three slow hosts, in red
    fast = [x for x, s in zip(pic.data["x"], pic.data["slow"], strict=True) if not s]
    # the traffic hosts' runs lie at 1.5-2x the fleet's L2 lines in a line of work
    traffic = sorted(pic.data["x"])[-10:]
    assert min(traffic) > 1.4 * statistics.median(fast)
    assert "McCalpin" in pic.caption


def test_the_signals_picture_marks_the_named_hosts_runs(tmp_path: Path) -> None:
    report = _report(tmp_path, "counters")
    v = next(v for v in report.cause_views.signals if v.signal == "l2_lines_in")
    pic = cause_charts.signal_picture(report, v)
    assert pic.filename == "signal-stream-nolayout-2MiB-l2_lines_in.png"
    assert pic.data["cause"] == "memory traffic" and pic.data["runs"] == 60
    assert len(pic.data["marked"]) == 10
    ecdf = pic.data["ecdf"]
    assert ecdf[-1][1] == 100.0 and [x for x, _ in ecdf] == sorted(x for x, _ in ecdf)
    assert min(pic.data["marked"]) > statistics.median(x for x, _ in ecdf)


def test_a_fleet_without_counters_says_why_and_draws_no_scatter(tmp_path: Path) -> None:
    from topobind.report.build import build_report

    built = build_report([str(_fleet_dir(tmp_path, "software"))], tmp_path / "out")
    cv = built.report.cause_views
    assert cv.scatters == ()
    assert cv.no_counters.startswith("no run carried l2_lines_in or dram_bytes: hardware "
                                     "counters unavailable (no hardware PMU")  # fmt: skip
    assert not [p for p in built.pictures if p.kind == "scatter"]
    assert f"  {cv.no_counters}" in built.text.splitlines()
    assert cv.no_counters in built.markdown
    html = (tmp_path / "out" / "index.html").read_text()
    assert "No run carried l2_lines_in or dram_bytes: hardware counters unavailable (no " \
        "hardware PMU (a VM" in html  # fmt: skip
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["causes"]["no_counters"] == cv.no_counters and doc["causes"]["scatters"] == []
    # the throttled host's signal is drawn all the same (no counter needed)
    assert [s["signal"] for s in doc["causes"]["signals"]] == ["throttled_share"]
    assert doc["causes"]["signals"][0]["picture"] in {p.filename for p in built.pictures}


def _fleet_dir(root: Path, evidence: str) -> Path:
    causes = f"{THROTTLED}:throttled" if evidence else ""
    spec = FleetSpec(hosts=12, runs=4, kernels=("stream",), slow=parse_slow(f"{THROTTLED}:1.3"),
                     evidence=evidence, causes=parse_causes(causes))  # fmt: skip
    return generate_fleet(root / "fleet", spec).directory


def test_results_without_evidence_say_so(tmp_path: Path) -> None:
    read = read_results([_fleet_dir(tmp_path, "")])
    report = analyse(read.runs, Options(), read.inputs, read.files)
    assert report.cause_views.signals == () and report.cause_views.scatters == ()
    assert "the results carry no evidence section" in report.cause_views.no_counters


def test_thinning_keeps_every_slow_run_and_the_bound() -> None:
    slow = [i % 997 == 0 for i in range(3 * cause_views.MAX_POINTS)]
    keep = cause_views._thinned(slow)
    assert len(keep) == cause_views.MAX_POINTS
    assert {i for i, s in enumerate(slow) if s} <= set(keep)
    assert keep == sorted(set(keep))
    assert len(cause_charts.ecdf_points(tuple(range(50_000)))) <= cause_charts.MAX_ECDF_STEPS + 1


def test_work_lines_reads_streams_work_and_nothing_else() -> None:
    assert cause_views.work_lines({"bytes_total": 6400, "ntimes": 10}) == 1000.0
    assert cause_views.work_lines({"bytes_per_array": 64, "ntimes": 2}) == 6.0
    assert cause_views.work_lines({"n": 20000, "reps": 5}) is None
    assert cause_views.work_lines({"bytes_total": True, "ntimes": 3}) is None


@pytest.mark.slow
def test_5000_hosts_stay_bounded_in_pictures_and_points(tmp_path: Path) -> None:
    traffic = [f"gen-node{i:04d}" for i in range(100, 5000, 700)]  # 7 hosts
    throttled = [f"gen-node{i:04d}" for i in range(150, 5000, 900)]  # 6 hosts
    spec = FleetSpec(
        hosts=5000, runs=3, kernels=("stream",),
        slow=parse_slow(",".join(f"{h}:1.3" for h in traffic + throttled)), evidence="counters",
        causes=parse_causes(",".join([f"{h}:traffic" for h in traffic]
                                     + [f"{h}:throttled" for h in throttled])),
    )  # fmt: skip
    generate_fleet(tmp_path / "fleet", spec)
    read = read_results([tmp_path / "fleet"])
    report = analyse(read.runs, Options(), read.inputs, read.files)
    cv = report.cause_views
    assert len(cv.signals) <= cause_views.MAX_SIGNAL_VIEWS
    assert {v.signal for v in cv.signals} == {"l2_lines_in", "throttled_share"}
    (scatter,) = cv.scatters
    assert scatter.runs == 15_000 and len(scatter.x) <= cause_views.MAX_POINTS
    pics = [cause_charts.draw(report, k, i) for k, i in cause_charts.cause_pictures(report, 0)]
    assert len(pics) == len(cv.signals) + 1
    for p in pics:
        assert p is not None and len(p.png) < 400_000, (p.filename, len(p.png))
    sig = next(p for p in pics if p is not None and p.kind == "signal")
    assert len(sig.data["ecdf"]) <= cause_charts.MAX_ECDF_STEPS + 1


def test_generated_evidence_is_as_documented_and_leaves_the_figures(tmp_path: Path) -> None:
    import jsonschema
    from fleetgen import main as fleetgen_main

    from topobind.measure.evidence import read_evidence

    schema = json.loads((Path(cause_views.__file__).parent.parent / "schemas"
                         / "result.schema.json").read_text())  # fmt: skip
    base = ["--hosts", "3", "--runs", "2", "--kernels", "stream,latency"]
    assert fleetgen_main([*base, "-o", str(tmp_path / "plain")]) == 0
    assert fleetgen_main([*base, "--evidence", "counters", "--cause", "gen-node0002:traffic",
                          "-o", str(tmp_path / "ev")]) == 0  # fmt: skip
    for f in sorted((tmp_path / "ev").rglob("*.json")):
        doc = json.loads(f.read_text())
        jsonschema.validate(doc, schema)
        assert read_evidence(doc).reason == "", f
        plain = json.loads((tmp_path / "plain" / f.relative_to(tmp_path / "ev")).read_text())
        assert doc.pop("evidence") and doc == plain  # the figures as without evidence
    assert fleetgen_main([*base, "--cause", "gen-node0002:traffic", "-o",
                          str(tmp_path / "x")]) == 2  # a cause needs --evidence  # fmt: skip
    assert fleetgen_main([*base, "--evidence", "counters", "--cause", "gen-node0002:hot",
                          "-o", str(tmp_path / "y")]) == 2  # fmt: skip
