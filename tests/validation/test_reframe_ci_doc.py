"""docs/reframe-ci.md's `cluster.py` runs one check at a time per partition (issue 30 item 5:
without max_jobs ReFrame's async policy ran every check at once and the figures meant
nothing) and the doc defines the $TOPOBIND its commands use."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from reframe_ci_doc import DOC, cluster_py, reframe_commands  # noqa: E402


def load_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_documented_cluster_py_sets_max_jobs_1_on_every_partition() -> None:
    scope: dict = {}
    exec(compile(cluster_py(DOC.read_text()), "cluster.py", "exec"), scope)
    parts = [p for s in scope["site_configuration"]["systems"] for p in s["partitions"]]
    assert parts and all(p.get("max_jobs") == 1 for p in parts), parts


def test_doc_defines_topobind_before_using_it() -> None:
    text = DOC.read_text()
    first_use = text.index("$TOPOBIND/")
    assert "export TOPOBIND=" in text[:first_use]


def test_doc_runs_cluster_py_on_both_partitions() -> None:
    """The lines make bench-reframe-ci runs (scripts/bench-reframe-ci.py reads them here)."""
    lines = reframe_commands(DOC.read_text())
    assert any("--system mycluster:batch" in ln and ln.startswith("TOPOBIND_SITE=") for ln in lines)
    assert any("--system mycluster:cpu" in ln for ln in lines), lines


def test_bench_runs_each_check_alone_in_the_ci_sessions_tier() -> None:
    """make bench-reframe-ci compares each figure of the CI session with the same check run
    alone: the same check means the same tier (``-t quick`` bounds trials and sizes). With
    ``-n /HASH`` alone, STREAM ran 20 trials against the CI session's 3 and the latency check
    a 1G working set against 256M: ratios of 0.47 and 0.74 that no load explained."""
    bench, probe = (
        load_file(name, REPO / path)
        for name, path in (("bench_rci", "scripts/bench-reframe-ci.py"),
                           ("rfm_probe", "reframe_tests/topobind_rfm/probe.py"))
    )  # fmt: skip
    quick_tier = probe.quick_tier

    for select in (["-t", "quick"], ["--tag=quick"], ["-t", "full"]):
        alone = bench.alone_select(select, "3240c69e")
        assert alone[-2:] == ["-n", "/3240c69e"]
        assert quick_tier(["reframe", *alone]) == quick_tier(["reframe", *select])
    assert bench.alone_select(["-t", "quick"], "ab", 3) == [
        "-t", "quick", "-n", "/ab", "--reruns", "2"]  # fmt: skip


def test_bench_compares_the_ci_figure_with_the_median_of_the_runs_alone() -> None:
    """The checks alone run 3 times in one session (--reruns): the CI figure is held against
    their median, so one spoilt run alone is not the reference; a run that failed fails the
    check; DGEMM's spread measures are shown but not held to the 20 %."""
    bench = load_file("bench_rci2", REPO / "scripts/bench-reframe-ci.py")
    name = "StreamCheck %layout=compact"
    out = "\n".join(
        [f"[       OK ] ({i}/3) {name} /3240c69e @mycluster:batch+gnu\nP: triad: {v} MB/s (r:0)"
         for i, v in ((1, 20000.0), (2, 9000.0), (3, 19000.0))]
        + ["[     FAIL ] (1/1) DgemmCheck %pages=1G /aa11bb22 @mycluster:batch+gnu",
           "P: gflops: 60.0 GFLOP/s (r:0)", "P: cv: 8.0 % (r:0)"]
    )  # fmt: skip
    alone = bench.parse(out)
    assert alone[name]["result"] == "OK" and alone["DgemmCheck %pages=1G"]["result"] == "FAIL"
    fig = alone[name]["figures"]["triad"]
    assert fig["values"] == [20000.0, 9000.0, 19000.0] and fig["value"] == 19000.0
    ci = bench.parse(
        f"[       OK ] (1/2) {name} /3240c69e @x\nP: triad: 16000 MB/s (r:0)\n"
        "[       OK ] (2/2) DgemmCheck %pages=1G /aa11bb22 @x\nP: gflops: 30 GFLOP/s (r:0)\n"
        "P: cv: 2 % (r:0)"
    )
    compared = bench.compare({"checks": ci}, {n: {"checks": alone} for n in alone})
    rows = {(r["check"], r["metric"]): r for r in compared}
    assert rows[(name, "triad")]["ratio"] == round(16000 / 19000, 3)
    assert not rows[(name, "triad")]["off"]  # 0.84 of the median; 1.78 of the spoilt run
    assert not rows[(name, "triad")]["off_range"]  # 9000..20000 runs alone
    assert rows[("DgemmCheck %pages=1G", "gflops")]["off"]  # 0.5
    assert rows[("DgemmCheck %pages=1G", "gflops")]["off_range"]  # 30 < 0.8 x 60
    near = bench.compare({"checks": {name: {"hash": "x", "figures": {"triad": {
        "value": 23000.0, "unit": "MB/s"}}}}}, {name: {"checks": alone}})[0]  # fmt: skip
    # 1.21 of the median, but the runs alone spread 9000..20000, wider than the 20 % rule:
    # too noisy to judge, not off (issue 48 item 6)
    assert near["verdict"] == "too-noisy" and not near["off"] and not near["off_range"]
    assert rows[(name, "triad")]["verdict"] == "too-noisy"
    assert rows[("DgemmCheck %pages=1G", "gflops")]["verdict"] == "missed"
    zero = {"HugepagesCheck": {"hash": "h", "figures": {"free_1g_min": {"value": 0.0, "unit": ""}}}}
    zero_alone = {"HugepagesCheck": {"result": "OK", "hash": "h", "figures": {
        "free_1g_min": {"value": 0.0, "values": [0.0, 0.0, 0.0], "unit": ""}}}}  # fmt: skip
    z = bench.compare({"checks": zero}, {"HugepagesCheck": {"checks": zero_alone}})[0]
    assert z["verdict"] == "met" and not z["off"]  # 0 against 0 is no miss
    cv = rows[("DgemmCheck %pages=1G", "cv")]
    assert cv["spread_measure"] and not cv["off"] and cv["ratio"] == 0.25


def test_doc_runs_the_checks_serially_where_reframe_shares_the_machine() -> None:
    """Both partitions of the page's cluster.py run on ReFrame's own host (a local partition;
    the local cluster's nodes): under async ReFrame judged one check while the next one
    measured, and the CI run's STREAM triad was 0.25-0.6 of the same check alone."""
    lines = [ln for ln in reframe_commands(DOC.read_text()) if ln.startswith("TOPOBIND_SITE=")]
    assert lines and all("--exec-policy serial" in ln for ln in lines), lines
