"""Site files: the shipped sites load, malformed ones are refused with FILE: PATH: problem (fix),
and the ReFrame configuration derived from them is accepted by ReFrame itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_helpers import run_topobind, venv_bin
from paths import REPO

from topobind.validation import sites

REFRAME = str(venv_bin("reframe"))
SHIPPED = ["betzy", "epyc9755", "local", "stampede2-skx"]


def tb(*args: str, sites_dir: Path | None = None, cwd: Path | None = None):
    env = dict(os.environ)
    if sites_dir is not None:
        env["TOPOBIND_SITES_DIR"] = str(sites_dir)
    return run_topobind(*args, env=env, cwd=cwd)


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sites_check(name: str) -> None:
    done = tb("site", "check", name)
    assert done.returncode == 0, done.stderr
    assert "valid (topobind.site/1)" in done.stdout


@pytest.mark.slow
def test_site_list_names_every_site() -> None:
    done = tb("site", "list")
    assert done.returncode == 0, done.stderr
    for name in SHIPPED:
        assert re.search(rf"^{re.escape(name)}: ", done.stdout, re.M)


def test_betzy_targets_are_the_seed_figures() -> None:
    betzy = sites.load_site("betzy", REPO / "site_configs")
    assert betzy.targets[("stream", "every-other-core", "triad")].reference == 329046.7
    assert betzy.targets[("stream", "compact", "triad")].reference == 309893.4
    assert betzy.targets[("stream", "numa-every-other-core", "triad")].reference == 41860.1
    assert betzy.targets[("stream", "numa", "triad")].reference == 39181.7
    for t in betzy.targets.values():
        assert t.provenance.kind == "quoted" and "seed 003" in (t.provenance.source or "")
        assert t.lower is not None and t.lower <= 0 <= (t.upper or 0)
    skx = sites.load_site("stampede2-skx", REPO / "site_configs")
    assert skx.hugepages.enforce_in == ("dgemm", "hpl")
    assert skx.targets[("dgemm", "1G", "max_slowdown")].reframe_tuple() == (5.0, -1.0, 0.0, "%")


def _copy_site(tmp_path: Path, name: str = "betzy") -> Path:
    base = tmp_path / "sites"
    shutil.copytree(REPO / "site_configs" / name, base / name)
    (base / name / "references.yaml").unlink(missing_ok=True)
    return base


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


BAD_CASES = {
    "unknown key": (
        "    max_jobs: 16\n",
        "    max_job: 16\n",
        "partitions[0].max_job: unknown key 'max_job' (did you mean 'max_jobs'?",
    ),
    "missing unit": (
        "        unit: MB/s\n        provenance: &betzy_full\n",
        "        provenance: &betzy_full\n",
        "targets.stream.every-other-core.triad.unit: missing (add it: the unit the check "
        "reports, e.g. unit: MB/s)",
    ),
    "tolerance of the wrong sign": (
        "tolerance: {lower: -0.05, upper: 0.10}",
        "tolerance: {lower: 0.05, upper: 0.10}",
        "targets.stream.every-other-core.triad.tolerance.lower: must be <= 0, got 0.05 "
        "(a fraction below the reference, e.g. -0.05",
    ),
    "upper below zero": (
        "tolerance: {lower: -0.05, upper: 0.10}",
        "tolerance: {lower: -0.05, upper: -0.10}",
        "targets.stream.every-other-core.triad.tolerance.upper: must be >= 0, got -0.1 "
        "(a fraction above the reference",
    ),
    "wrong unit": (
        "        reference: 329046.7\n        tolerance: {lower: -0.05, upper: 0.10}\n"
        "        unit: MB/s\n",
        "        reference: 329.0\n        tolerance: {lower: -0.05, upper: 0.10}\n"
        "        unit: GB/s\n",
        "targets.stream.every-other-core.triad.unit: 'GB/s' is not the unit check stream "
        "reports for triad (write the reference in MB/s",
    ),
    "unknown layout": (
        "    every-other-core:          # 64 threads",
        "    every-other-cores:          # 64 threads",
        "targets.stream.every-other-cores: unknown layout 'every-other-cores' for check stream "
        "(did you mean 'every-other-core'?",
    ),
    "quoted without source": (
        "          kind: quoted\n          source: \"Sigma2, 'Efficient use of memory bandwidth on "
        "Betzy', STREAM over the entire system, experiment 1",
        "          kind: quoted\n          note: \"Sigma2, 'Efficient use of memory bandwidth on "
        "Betzy', STREAM over the entire system, experiment 1",
        "targets.stream.every-other-core.triad.provenance.source: missing (add it: where the "
        "number comes from",
    ),
    "bad scheduler": (
        "    scheduler: slurm\n",
        "    scheduler: pbs\n",
        "partitions[0].scheduler: 'pbs' is not one of: local, slurm",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_malformed_site_is_refused_with_file_path_and_fix(tmp_path: Path, case: str) -> None:
    old, new, expected = BAD_CASES[case]
    base = _copy_site(tmp_path)
    _edit(base / "betzy" / "site.yaml", old, new)
    done = tb("site", "check", "betzy", sites_dir=base, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert f"topobind: error: sites/betzy/site.yaml: {expected}" in done.stderr, done.stderr
    assert done.stdout == ""
    # every command that reads the site refuses it the same way, before running anything
    val = tb("validate", "--site", "betzy", sites_dir=base, cwd=tmp_path)
    assert val.returncode == 2
    assert val.stderr.startswith("topobind: error: sites/betzy/site.yaml: ")
    assert "reframe" not in val.stderr


@pytest.mark.slow
def test_several_problems_are_all_listed(tmp_path: Path) -> None:
    base = _copy_site(tmp_path)
    path = base / "betzy" / "site.yaml"
    for case in ("unknown key", "tolerance of the wrong sign", "bad scheduler"):
        old, new, _ = BAD_CASES[case]
        _edit(path, old, new)
    done = tb("site", "check", "betzy", sites_dir=base, cwd=tmp_path)
    assert done.returncode == 2
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("topobind: error:")]
    assert len(errors) == 3, done.stderr
    assert "3 problem(s) in site betzy" in done.stderr


@pytest.mark.slow
def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    base = _copy_site(tmp_path)
    (base / "betzy" / "site.yaml").write_text("schema: topobind.site/1\nname: betzy\n  bad: [\n")
    done = tb("site", "check", "betzy", sites_dir=base, cwd=tmp_path)
    assert done.returncode == 2
    assert "sites/betzy/site.yaml: line 3 column 6: not valid YAML" in done.stderr


@pytest.mark.slow
def test_synthetic_must_agree_with_counts(tmp_path: Path) -> None:
    base = _copy_site(tmp_path)
    _edit(base / "betzy" / "site.yaml", "  l3_domains: 32\n", "  l3_domains: 16\n")
    done = tb("site", "check", "betzy", sites_dir=base, cwd=tmp_path)
    assert done.returncode == 2
    assert "node.synthetic: describes l3_domains = 32 but node.l3_domains is 16" in done.stderr


@pytest.mark.slow
def test_references_file_is_checked_and_overrides(tmp_path: Path) -> None:
    base = _copy_site(tmp_path)
    ref = {
        "schema": "topobind.references/1",
        "site": "betzy",
        "calibration": {"date": "2026-01-01", "host": "b1001", "method": "calibration", "runs": 3},
        "targets": {
            "stream": {
                "compact": {
                    "triad": {
                        "reference": 300000.0,
                        "tolerance": {"lower": -0.1, "upper": 0.1},
                        "unit": "MB/s",
                        "provenance": {
                            "kind": "measured",
                            "date": "2026-01-01",
                            "method": "calibration",
                        },
                    }
                }
            }
        },
    }
    path = base / "betzy" / "references.yaml"
    path.write_text(yaml.safe_dump(ref))
    site = sites.load_site("betzy", base)
    assert site.targets[("stream", "compact", "triad")].reference == 300000.0
    assert site.targets[("stream", "compact", "copy")].reference == 315216.0  # from site.yaml
    assert any("overrides" in n for n in site.notes)
    refs = sites.reframe_references(site, "stream", "compact")
    assert refs == {
        "*": {
            "triad": (300000.0, -0.1, 0.1, "MB/s"),
            "copy": (315216.0, -0.05, 0.1, "MB/s"),
        }
    }
    ref["site"] = "stampede2-skx"
    del ref["targets"]["stream"]["compact"]["triad"]["provenance"]["date"]
    path.write_text(yaml.safe_dump(ref))
    done = tb("site", "check", "betzy", sites_dir=base, cwd=tmp_path)
    assert done.returncode == 2
    assert (
        "sites/betzy/references.yaml: targets.stream.compact.triad.provenance.date: missing"
        in done.stderr
    )


@pytest.mark.slow
def test_reframe_accepts_the_derived_configuration(tmp_path: Path) -> None:
    env = dict(os.environ, TOPOBIND_REFRAME_RESULTS=str(tmp_path / "res"))
    cfg = str(REPO / "site_configs" / "reframe_config.py")
    done = subprocess.run(
        [REFRAME, "-C", cfg, "--system", "betzy:normal", "--show-config", "systems/0/partitions"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"scheduler": "slurm"' in done.stdout and '"-p normal"' in done.stdout
    conf = sites.reframe_site_configuration(REPO / "site_configs", tmp_path / "res")
    names = [s["name"] for s in conf["systems"]]
    assert names[-1] == "local" and sorted(names) == sorted(SHIPPED)  # local matches any host
    local = next(s for s in conf["systems"] if s["name"] == "local")
    slurm = next(p for p in local["partitions"] if p["name"] == "slurm")
    assert slurm["scheduler"] == "squeue" and slurm["launcher"] == "srun"  # no sacct locally
    assert conf["storage"][0]["enable"] is True
    assert conf["storage"][0]["sqlite_db_file"] == str(tmp_path / "res" / "results.db")
    perflog = conf["logging"][0]["handlers_perflog"][0]
    assert perflog["basedir"] == str(tmp_path / "res" / "perflogs")
    env_builtin = conf["environments"][0]
    assert env_builtin["name"] == "builtin" and "-fopenmp" in env_builtin["cflags"]
