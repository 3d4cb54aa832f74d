"""``reframe_runs.validate`` (issue 28 item 4): the per-partition loop and the failure decision
live in checks/, the command prints; run here with a fake ``reframe`` that writes a report,
so validate's table and its exit status come from that report alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topobind.cli.main import main
from topobind.validation import reframe_runs
from topobind.validation.verdict import NOT_JUDGED_STATUS

SITE = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: default, scheduler: local, launcher: local}\n"
    "  - {name: other, scheduler: local, launcher: local}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)
FAKE = """#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --report-file ]; then mkdir -p "$(dirname "$2")"; cp {report} "$2"; fi
  shift
done
echo "[       OK ] (1/2) StreamCheck %layout=compact /0283914c @fleet:default+builtin"
"""


def _case(name: str, result: str, value: float | None, ref: float = 0.0) -> dict[str, object]:
    lower = None if ref == 0 else -0.1
    return {
        "display_name": name, "name": name, "system": "fleet", "partition": "default",
        "result": result, "fail_phase": "performance" if result == "fail" else None,
        "perfvalues": {} if value is None else {
            "fleet:default:triad": [value, ref, lower, None, "MB/s",
                                    "fail" if result == "fail" else "pass"]},
    }  # fmt: skip


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sites = tmp_path / "sites" / "fleet"
    sites.mkdir(parents=True)
    (sites / "site.yaml").write_text(SITE)
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(sites.parent))
    report = tmp_path / "the-report.json"
    fake = tmp_path / "reframe"
    fake.write_text(FAKE.replace("{report}", str(report)))
    fake.chmod(0o755)
    monkeypatch.setattr(reframe_runs, "reframe_exe", lambda: [str(fake)])
    return report


def _report(path: Path, *cases: dict[str, object]) -> None:
    path.write_text(json.dumps({"runs": [{"testcases": list(cases)}]}))


def test_validate_returns_one_outcome_over_the_partitions(fleet: Path, tmp_path: Path) -> None:
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0),
            _case("LatencyCheck", "fail", 200.0, 100.0))  # fmt: skip
    opts = reframe_runs.Options(results=tmp_path / "res")
    from topobind.validation import sites

    seen: list[str] = []
    out = reframe_runs.validate(sites.load_site("fleet"), ["default", "other"], opts,
                              lambda one: seen.append(one.partition))  # fmt: skip
    assert seen == ["default", "other"]
    assert [(r.check, r.variant, r.result) for r in out.partitions[0].rows] == [
        ("StreamCheck", "compact", "PASS (no ref)"), ("LatencyCheck", "local", "FAIL")]  # fmt: skip
    assert out.status == 1


def test_the_command_prints_the_outcome_and_its_status(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0, 100.0))
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "1 passed, 0 failed, 0 skipped" in out
    assert out.splitlines()[-1] == "1 of 1 figures compared with a reference"


def test_nothing_compared_is_not_judged_and_partly_compared_a_warning(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 47 item 5: performance checks ran and no figure met a reference (a new site,
    before calibrate): the last line says performance was not judged, exit 4; not a pass."""
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0))
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    out = capsys.readouterr().out
    assert status == NOT_JUDGED_STATUS == 4, out
    assert "1 passed, 0 failed, 0 skipped" in out
    assert "0 of 1 figures compared with a reference" in out
    assert out.splitlines()[-1] == (
        "performance NOT JUDGED: none of the 1 figure(s) had a reference; "
        "write references with: topobind calibrate --site fleet"
    )
    assert main(["validate", "--site", "fleet", "--strict", "--results", str(tmp_path)]) == 1
    capsys.readouterr()
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0, 100.0),
            _case("StreamCheck %layout=numa", "pass", 100.0))  # fmt: skip
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    got = capsys.readouterr()
    assert status == 0, got.out  # partly compared: a warning
    assert got.out.splitlines()[-1] == "1 of 2 figures compared with a reference"
    assert "1 figure(s) had no reference" in got.err


def test_a_sanity_only_run_has_no_figures_to_judge(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report(fleet, _case("NodeCheck", "pass", None))
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[-1] == "0 of 0 figures compared with a reference"


def test_a_hostile_report_from_reframe_is_one_line(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.write_text('{"runs": [{"testcases": [{"display_name": "StreamCheck", '
                     '"perfvalues": {"t": [true, 0, null, null, "MB/s"]}}]}]}')  # fmt: skip
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    err = capsys.readouterr().err
    assert status == 2
    (line,) = [ln for ln in err.splitlines() if ln.startswith("topobind: error:")]
    assert 'perfvalues["t"][0]: must be a number, got true' in line
