"""scripts/bench-all (what ``make bench`` runs) and scripts/bench_summary.py (the one summary
each benchmark writes): every benchmark runs whatever an earlier one measured, one summary at
the end, the exit status after all ran; 0 against 0 is no miss, a figure whose runs alone
spread wider than the rule is too noisy to judge (issue 48 item 6). The benchmarks here are
stand-ins in a tiny makefile."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import bench_summary  # noqa: E402


def load_runner() -> ModuleType:
    path = str(REPO / "scripts" / "bench-all")
    loader = importlib.machinery.SourceFileLoader("bench_all", path)
    spec = importlib.util.spec_from_loader("bench_all", loader)
    assert spec
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def summary_cmd(name: str, rows: list[dict[str, object]], rc: int = 0) -> str:
    """A make recipe line that writes results/bench/NAME.json with ``rows`` and exits ``rc``."""
    doc = json.dumps({"summary": {"targets": rows}}).replace("'", "")
    return f"\tmkdir -p results/bench && echo '{doc}' > results/bench/{name}.json; exit {rc}\n"


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    met = bench_summary.target("plan ms", 12.5, "<= 100 ms", True, "ms")
    miss = bench_summary.target("fleet s", 14.0, "<= 10 s", False, "s")
    noisy = bench_summary.target("c2c ns", 90.0, "within 20 %", "too-noisy", "ns")
    (tmp_path / "Makefile").write_text(
        "bench-crash:\n\techo crashing; exit 3\n"
        "bench-miss:\n" + summary_cmd("miss", [miss], rc=1)
        + "bench-noisy:\n" + summary_cmd("noisy", [noisy])
        + "bench-ok:\n" + summary_cmd("ok", [met])
        + "bench-plain:\n\tmkdir -p results/bench && echo '{}' > results/bench/plain.json\n"
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_target_runs_after_a_crash_and_a_miss_then_exit_1(
    stand_ins: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    order = ["bench-crash", "bench-miss", "bench-noisy", "bench-ok", "bench-plain"]
    assert load_runner().main(["--make", "make", *order]) == 1
    out = capsys.readouterr().out
    summary = out[out.index("== make bench: summary") :]
    verdicts = {(r["benchmark"], r["verdict"]) for r in read(stand_ins)["targets"]}
    assert verdicts == {
        ("bench-crash", "not-run"),
        ("bench-miss", "missed"),
        ("bench-noisy", "too-noisy"),
        ("bench-ok", "met"),
        ("bench-plain", "met"),
    }
    assert "make bench-crash exited 2 without writing crash.json" in summary
    assert "plain.json has no summary" in summary
    assert "machine: " in summary and " cores, load average before / after: " in summary
    assert "5 of 5 benchmarks ran; 1 figure(s) missed" in out


def test_too_noisy_and_met_alone_exit_0(stand_ins: Path) -> None:
    assert load_runner().main(["--make", "make", "bench-noisy", "bench-ok"]) == 0


def test_a_stale_result_file_is_not_read_as_this_runs(stand_ins: Path) -> None:
    results = stand_ins / "results" / "bench"
    results.mkdir(parents=True)
    old = bench_summary.target("x", 1.0, "y", True)
    (results / "crash.json").write_text(json.dumps({"summary": {"targets": [old]}}))
    os.utime(results / "crash.json", (1, 1))
    assert load_runner().main(["--make", "make", "bench-crash"]) == 1
    assert [r["verdict"] for r in read(stand_ins)["targets"]] == ["not-run"]


def read(root: Path) -> dict[str, object]:
    doc = json.loads((root / "results" / "bench" / "summary.json").read_text())
    assert isinstance(doc, dict)
    return doc


def test_zero_against_zero_is_met() -> None:
    # bench-reframe-ci: HugepagesCheck free_1g_min 0 in the CI run and 0 alone
    assert bench_summary.within(0.0, 0.0, 0.20, runs=[0.0, 0.0, 0.0]) == "met"
    assert bench_summary.within(1.0, 0.0, 0.20) == "missed"


def test_runs_alone_spread_wider_than_the_rule_is_too_noisy() -> None:
    # a core-to-core figure whose runs alone spread 73-107 ns: 47 % apart, the rule 20 %
    assert bench_summary.within(60.0, 90.0, 0.20, runs=[73.0, 90.0, 107.0]) == "too-noisy"
    assert bench_summary.within(60.0, 90.0, 0.20, runs=[88.0, 90.0, 95.0]) == "missed"
    assert bench_summary.within(100.0, 90.0, 0.20, runs=[88.0, 90.0, 95.0]) == "met"
    assert bench_summary.within(100.0, None, 0.20) == "not-run"


def test_a_verdict_outside_the_four_is_refused() -> None:
    with pytest.raises(ValueError, match="none of met, missed, too-noisy, not-run"):
        bench_summary.target("x", 1.0, "y", "off")


def test_machine_names_model_cores_and_load() -> None:
    m = bench_summary.machine()
    assert m["model"] and m["cores"] >= 1 and len(m["loadavg"]) == 3
