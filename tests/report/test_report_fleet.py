"""Slow-host detection and fleet figures on generated (synthetic) fleets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleetgen import (
    FleetSpec,
    generate_fleet,
    host_name,
    parse_slow,
)
from fleetgen import (
    main as fleetgen_main,
)

from topobind.measure import results, stats
from topobind.report.analysis import Options, analyse
from topobind.report.document import report_json
from topobind.report.reader import read_results
from topobind.report.text import markdown_summary, text_summary


def analysed(path: Path, opts: Options | None = None):  # noqa: ANN201 - test helper
    read = read_results([path])
    return analyse(read.runs, opts or Options(), read.inputs, read.files)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_finds_exactly_the_slowed_hosts(tmp_path: Path, seed: int) -> None:
    slow = {host_name(5): 1.10, host_name(17): 1.13, host_name(31): 1.15}
    spec = FleetSpec(
        hosts=40,
        runs=7,
        kernels=("stream", "dgemm", "latency"),
        slow={h: {None: f} for h, f in slow.items()},
        seed=seed,
    )
    generate_fleet(tmp_path / "fleet", spec)
    report = analysed(tmp_path / "fleet")
    assert report.slow_host_names == sorted(slow)
    for g in report.groups:
        assert sorted(h.host for h in g.slow_hosts) == sorted(slow), g.label
        for h in g.slow_hosts:
            # the measured deficit matches the planted factor within the host-to-host noise
            planted_pct = (
                (1 - 1 / slow[h.host]) * 100 if g.higher_is_better else (slow[h.host] - 1) * 100
            )
            assert abs(h.worse_pct - planted_pct) < 3.0, (g.kernel, h.host, h.worse_pct)
            assert h.mads is not None and h.mads > 3
    # slow hosts come first, worst first
    worse = [h.worse_pct for _, h in report.slow]
    assert worse == sorted(worse, reverse=True)


@pytest.mark.slow
def test_no_slow_host_in_a_healthy_fleet(tmp_path: Path) -> None:
    generate_fleet(
        tmp_path / "f", FleetSpec(hosts=40, runs=7, kernels=("stream", "dgemm", "latency"))
    )
    report = analysed(tmp_path / "f")
    assert report.slow == []
    assert all(not g.slow_hosts for g in report.groups)


def test_thresholds_both_apply(tmp_path: Path) -> None:
    """A 3 % slower host is many MADs out but under --slow-pct 5: not slow; at 2 % it is."""
    spec = FleetSpec(hosts=30, runs=7, kernels=("stream",), slow={host_name(3): {None: 1.03}})
    generate_fleet(tmp_path / "f", spec)
    assert analysed(tmp_path / "f").slow == []
    flagged = analysed(tmp_path / "f", Options(slow_pct=2.0)).slow_host_names
    assert flagged == [host_name(3)]
    # and a huge MAD requirement silences it again
    assert analysed(tmp_path / "f", Options(slow_pct=2.0, slow_mads=50)).slow == []


def test_slow_only_in_one_kernel(tmp_path: Path) -> None:
    spec = FleetSpec(
        hosts=20, runs=5, kernels=("stream", "dgemm"), slow=parse_slow("gen-node0004:1.2:stream")
    )
    generate_fleet(tmp_path / "f", spec)
    report = analysed(tmp_path / "f")
    assert [(g.kernel, h.host) for g, h in report.slow] == [("stream", "gen-node0004")]


def test_per_host_figures_match_stats(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "f", FleetSpec(hosts=6, runs=7, kernels=("stream", "latency")))
    report = analysed(tmp_path / "f")
    for g in report.groups:
        medians = []
        for h in g.hosts:
            docs = sorted(
                (json.loads(Path(r.source).read_text()) for r in h.runs),
                key=lambda d: d["timestamp"],
            )
            values = [d["headline"]["value"] for d in docs]
            assert list(h.summary.values) == values
            assert h.summary.median == stats.median(values)
            assert h.summary.best == (max(values) if g.higher_is_better else min(values))
            assert h.summary.median_ci is not None  # 7 runs >= 6
            medians.append(h.summary.median)
        assert g.fleet_median == stats.median(medians)
        assert g.fleet_mad == pytest.approx(stats.mad(medians, scaled=True))


def test_warmup_drops_first_run_by_timestamp(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "f", FleetSpec(hosts=3, runs=4, kernels=("stream",)))
    report = analysed(tmp_path / "f", Options(warmup=1))
    for h in report.groups[0].hosts:
        assert h.summary.n == 3 and len(h.warmup_runs) == 1
        assert h.warmup_runs[0].time < min(r.time for r in h.runs)
    with pytest.raises(Exception, match="warmup"):
        analysed(tmp_path / "f", Options(warmup=4))


def test_page_sizes_and_matrices(tmp_path: Path) -> None:
    spec = FleetSpec(hosts=5, runs=3, kernels=("latency", "c2c"), pages=("4k", "2M", "1G"))
    generate_fleet(tmp_path / "f", spec)
    report = analysed(tmp_path / "f")
    lat = next(pc for pc in report.pages if pc.kernel == "latency")
    assert [r.page_kib for r in lat.rows] == [4, 2048, 1048576]
    assert lat.reference_kib == 4
    # the generator makes 4 KiB pages ~30 % slower for latency: 2 MiB and 1 GiB are better
    assert lat.rows[1].better_pct > 15 and lat.rows[2].better_pct > lat.rows[1].better_pct
    names = {(m.kernel, m.name, m.page_kib) for m in report.matrices}
    assert ("c2c", "c2c_latency", 2048) in names and ("latency", "numa_latency", 4) in names
    c2c = next(m for m in report.matrices if m.name == "c2c_latency" and m.page_kib == 2048)
    assert c2c.runs == 15 and c2c.hosts == 5 and c2c.lower_is_better
    assert c2c.median.value(c2c.rows[0], c2c.cols[0]) is None  # diagonal never measured


def test_text_markdown_json_agree(tmp_path: Path) -> None:
    spec = FleetSpec(hosts=12, runs=6, kernels=("stream",), slow=parse_slow("gen-node0002:1.15"))
    generate_fleet(tmp_path / "f", spec)
    report = analysed(tmp_path / "f")
    text = text_summary(report)
    md = markdown_summary(report)
    doc = report_json(report)
    assert "GENERATED DATA" in text and "Generated data" in md
    assert "SLOW HOSTS: 1 host(s)" in text and "| `gen-node0002` | stream |" in md
    assert doc["slow_host_names"] == ["gen-node0002"] and doc["slow_found"] is True
    (g,) = doc["groups"]
    assert g["hosts"] == 12 and g["runs"] == 72 and g["per_host"][0]["host"] == "gen-node0002"
    assert g["per_host"][0]["slow"] is True and g["per_host"][0]["median_ci"]["coverage"] >= 0.95
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN anywhere


def test_fleetgen_is_deterministic_and_marked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--hosts",
        "3",
        "--runs",
        "2",
        "--kernels",
        "stream,whereami",
        "--slow",
        "gen-node0002:1.1",
    ]
    assert fleetgen_main([*args, "-o", str(tmp_path / "a")]) == 0
    assert fleetgen_main([*args, "-o", str(tmp_path / "b")]) == 0
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.json*"))
    assert files_a and files_a == sorted(
        p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.json*")
    )
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    for line in (tmp_path / "a" / files_a[0]).read_text().splitlines():
        d = json.loads(line)
        assert d["params"]["generated"] is True and d["host"].startswith("gen-node")
    assert "generated (synthetic)" in capsys.readouterr().out
    assert fleetgen_main([*args, "-o", str(tmp_path / "a")]) == 2  # not empty: refused
    assert (
        fleetgen_main(["--slow", "gen-node0009:1.1", "--hosts", "3", "-o", str(tmp_path / "c")])
        == 2
    )


def test_invalid_and_headless_results_are_counted_not_used(tmp_path: Path) -> None:
    spec = FleetSpec(hosts=4, runs=3, kernels=("stream", "whereami"))
    generate_fleet(tmp_path / "f", spec)
    bad = sorted((tmp_path / "f").rglob("stream-*.json"))[:2]
    for f in bad:
        doc = json.loads(f.read_text())
        doc["valid"] = False
        doc["validation"] = "STREAM: triad failed validation"
        f.write_text(json.dumps(doc))
    report = analysed(tmp_path / "f")
    assert report.no_headline == 4 * 3 * 4  # whereami: 4 JSON lines per file
    assert sorted(r.source for r in report.invalid) == sorted(str(f) for f in bad)
    (g,) = report.groups
    assert g.all_runs.n == 4 * 3 - 2
    used = {r.source for h in g.hosts for r in h.runs}
    assert not used & {str(f) for f in bad}
    text = text_summary(report)
    assert "INVALID RESULTS left out (2)" in text and "triad failed validation" in text


def test_generated_results_follow_the_official_schema(tmp_path: Path) -> None:
    """fleetgen output must be what the kernels write: the kernels' own loader accepts it."""
    spec = FleetSpec(
        hosts=2,
        runs=1,
        kernels=("stream", "dgemm", "hpl", "latency", "c2c", "whereami"),
        pages=("4k", "1G"),
        slow=parse_slow("gen-node0002:1.2"),
    )
    generate_fleet(tmp_path / "f", spec)
    files = sorted((tmp_path / "f").rglob("*.json*"))
    assert len(files) == 2 * 6 * 2
    for f in files:
        assert results.load_results(f), f
