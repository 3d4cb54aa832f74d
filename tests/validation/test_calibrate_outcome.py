"""``reframe_runs.calibrate`` (issue 28 item 4): the session, the failure decision and the
references file live in checks/, ``topobind calibrate`` prints; run with the fake
``reframe`` of test_validate_outcome.py, so what is written comes from its report alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_validate_outcome import _case, _report, fleet  # noqa: F401 (the fixture)

from topobind.cli.main import main
from topobind.validation import reframe_runs, sites


@pytest.fixture
def calibrated_site(fleet: Path) -> Path:  # noqa: F811 (the fixture)
    site = fleet.parent / "sites" / "fleet" / "site.yaml"
    site.write_text(site.read_text() + "references: references.yaml\n")
    return fleet


def test_calibrate_writes_the_references_of_its_report(
    calibrated_site: Path, tmp_path: Path
) -> None:
    _report(calibrated_site, _case("StreamCheck %layout=compact", "pass", 100.0))
    opts = reframe_runs.CalibrateOptions(results=tmp_path / "res", repeat=1)
    out = reframe_runs.calibrate(sites.load_site("fleet"), ["default"], opts)
    assert out.status == 0 and out.written is not None
    doc = yaml.safe_load(out.written.read_text())
    (variants,) = doc["targets"].values()
    assert variants["compact"]["triad"]["reference"] == 100.0
    assert doc["calibration"]["runs"] == 1


def test_a_failed_check_writes_nothing_and_the_command_says_so(
    calibrated_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report(calibrated_site, _case("StreamCheck %layout=compact", "pass", 100.0),
            _case("LatencyCheck", "fail", 200.0, 100.0))  # fmt: skip
    status = main(["calibrate", "--site", "fleet", "--repeat", "1",
                   "--results", str(tmp_path / "res")])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 1
    assert "FAIL LatencyCheck" in captured.out
    assert "1 check(s) failed; nothing written" in captured.err
    assert not (calibrated_site.parent / "sites" / "fleet" / "references.yaml").exists()


def test_calibrate_refuses_two_partitions_before_running(
    calibrated_site: Path, tmp_path: Path
) -> None:
    opts = reframe_runs.CalibrateOptions(results=tmp_path / "res")
    with pytest.raises(reframe_runs.TopobindError, match="one partition"):
        reframe_runs.calibrate(sites.load_site("fleet"), ["default", "other"], opts)
    assert not (tmp_path / "res").exists()
