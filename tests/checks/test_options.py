"""Options and site files that lied (issue 31 item 4, the checks' parts): --history
--threshold, --threshold 0, a site file's .nan, a hosts: pattern site check accepted but
--live could not expand. In-process (topobind.cli.main.main), so cheap."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from paths import REPO

from topobind.checks import sites
from topobind.cli.main import main


def _site(tmp_path: Path, old: str, new: str) -> Path:
    base = tmp_path / "sites"
    shutil.copytree(REPO / "site_configs" / "betzy", base / "betzy")
    (base / "betzy" / "references.yaml").unlink(missing_ok=True)
    path = base / "betzy" / "site.yaml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return base


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("  smt: 2\n", "  smt: 2\n  memory_gib_per_numa: .nan\n",
         "node.memory_gib_per_numa: nan is not a finite number"),
        ("  smt: 2\n", "  smt: 2\n  memory_gib_per_numa: .inf\n",
         "node.memory_gib_per_numa: inf is not a finite number"),
        ("  smt: 2\n", "  smt: 2\n  hosts: {'node[3-1]': {cores: 64}}\n",
         "node.hosts.node[3-1]: not a Slurm host list"),
        ("  smt: 2\n", "  smt: 2\n  hosts: {'node[1-99999999]': {cores: 64}}\n",
         "node.hosts.node[1-99999999]: not a Slurm host list"),
    ],
)  # fmt: skip
def test_a_site_file_that_would_make_live_checks_lie_is_invalid(
    tmp_path: Path, old: str, new: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _site(tmp_path, old, new)
    with pytest.raises(sites.SiteError) as err:
        sites.load_site("betzy", base)
    assert any(message in p for p in err.value.problems), err.value.problems


def _history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(_site(tmp_path, "smt: 2", "smt: 2")))
    return main(["validate", "--site", "betzy", "--history", "--results", str(tmp_path), *args])


def test_history_takes_the_documented_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status = _history(tmp_path, monkeypatch, "--threshold", "0.2")
    err = capsys.readouterr().err
    assert status == 2 and "no ReFrame results database yet" in err  # past the options


@pytest.mark.parametrize("value", ["0", "-0.1", "nan", "10"])
def test_a_threshold_outside_0_to_10_is_refused(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    assert _history(tmp_path, monkeypatch, "--threshold", value) == 2
    err = capsys.readouterr().err
    assert f"--threshold {float(value):g}: give a fraction above 0" in err, err


def test_threshold_zero_without_each_node_or_history_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(_site(tmp_path, "smt: 2", "smt: 2")))
    assert main(["validate", "--site", "betzy", "--threshold", "0"]) == 2
    assert "--threshold: only with --each-node" in capsys.readouterr().err
