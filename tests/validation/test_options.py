"""Options and site files that lied (issue 31 item 4, the checks' parts): --history
--threshold, --threshold 0, a site file's .nan, a hosts: pattern site check accepted but
--live could not expand. In-process (topobind.cli.main.main), so cheap."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from paths import REPO

from topobind.cli.main import main
from topobind.validation import sites


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


@pytest.mark.parametrize("value", ["0", "10"])
def test_a_threshold_outside_0_to_10_is_refused(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    assert _history(tmp_path, monkeypatch, "--threshold", value) == 2
    err = capsys.readouterr().err
    assert f"--threshold {float(value):g}: give a fraction above 0" in err, err


@pytest.mark.parametrize("value", ["-0.1", "nan", "inf", "\u0661", "1_0", " 1", "0x1", "1e999"])
def test_a_threshold_not_in_ascii_digits_is_refused(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Issue 37 item 22: '\u0661' (Arabic-Indic one) was read by float() as 1, i.e. 100 %."""
    with pytest.raises(SystemExit) as done:
        _history(tmp_path, monkeypatch, f"--threshold={value}")
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "argument --threshold" in err and "give a number from 0 to 10 in ASCII digits" in err


def test_threshold_zero_without_each_node_or_history_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(_site(tmp_path, "smt: 2", "smt: 2")))
    assert main(["validate", "--site", "betzy", "--threshold", "0"]) == 2
    assert "--threshold: only with --each-node" in capsys.readouterr().err


# --------------------------------------------------------------------------- issue 30 item 4
def _fleet(tmp_path: Path, node: str) -> Path:
    d = tmp_path / "fleetsites" / "fleet"
    d.mkdir(parents=True)
    (d / "site.yaml").write_text(
        "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
        "partitions:\n  - {name: slurm, scheduler: slurm, launcher: srun, access: ['-p debug']}\n"
        "hugepages: {pages_1g_per_numa: 0}\n" + node
    )
    return d.parent


@pytest.mark.slow
def test_conformance_counts_the_node_not_the_jobs_mask(tmp_path: Path) -> None:
    """Under a mask of one CPU (what a plain srun -N3 gives a task) the node still has all
    its cores: no 'cores: expected 2, found 1', no drain line."""
    import os
    import subprocess

    from cli_helpers import TOPOBIND

    from topobind.validation import conformance
    from topobind.validation.sites import node_counts

    c = node_counts(conformance.whole_node())
    if c["cores"] < 2:
        pytest.skip("needs 2 cores to restrict the mask to 1")
    node = "node:\n" + "".join(f"  {k}: {v}\n" for k, v in c.items())
    env = dict(os.environ, TOPOBIND_SITES_DIR=str(_fleet(tmp_path, node)), SLURMD_NODENAME="n2")
    argv = ["taskset", "-c", "0", TOPOBIND, "site", "check", "fleet", "--live", "--drain"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "n2 conforms to the node: section" in done.stdout
    assert "scontrol" not in done.stdout


def test_each_node_hint_shows_the_nodes_own_counts() -> None:
    """The note of a site without node: shows what the first node reported, not betzy's."""
    from topobind.validation import acceptance

    out = (
        "0: topobind: error: /s/fleet/site.yaml: no node: section to compare node1 with; add "
        "what this node has (if it is a good one), e.g.\n"
        "0: node:\n0:   packages: 1\n0:   numa_nodes: 1\n0:   l3_domains: 1\n"
        "0:   cores: 2\n0:   smt: 1\n"
        "1: topobind: error: /s/fleet/site.yaml: no node: section to compare node2 with\n"
    )
    found, notes = acceptance.conformance_lines(out, ["node1", "node2"], 2)
    assert found == {}
    (note,) = notes
    assert "node: {packages: 1, numa_nodes: 1, l3_domains: 1, cores: 2, smt: 1}" in note
    assert "128" not in note


def test_no_site_messages_name_topobind_sites_dir(tmp_path: Path) -> None:
    from topobind.errors import TopobindError

    with pytest.raises(TopobindError, match=r"\$TOPOBIND_SITES_DIR"):
        sites.load_site("nosuch", tmp_path)
    with pytest.raises(TopobindError, match=r"\$TOPOBIND_SITES_DIR"):
        sites.detect_site("nohost", tmp_path)
