"""Site files checked where they are read (issue 37 items 20, 21): every setting of a site
against the catalogue (names, types, bounds) in ``site check``, and one broken site.yaml never
breaking the others (ReFrame's configuration, host detection)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fuzzing import bounded, fuzz
from hypothesis import given
from hypothesis import strategies as st
from paths import REPO

from topobind.validation import sites

REFRAME = Path(sys.executable).parent / "reframe"


def _sites_with_a_broken_one(tmp_path: Path) -> Path:
    base = tmp_path / "sites"
    base.mkdir()
    shutil.copytree(REPO / "site_configs" / "local", base / "local")
    (base / "local" / "references.yaml").unlink(missing_ok=True)
    (base / "broken").mkdir()
    (base / "broken" / "site.yaml").write_text("schema: topobind.site/1\nname: broken\n")
    return base


def test_a_broken_site_is_left_out_of_reframes_systems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _sites_with_a_broken_one(tmp_path)
    conf = sites.reframe_site_configuration(base, tmp_path / "res")
    assert [s["name"] for s in conf["systems"]] == ["local"]
    assert "site broken left out: " in capsys.readouterr().err
    only = sites.reframe_site_configuration(base, tmp_path / "res", only="local")
    assert [s["name"] for s in only["systems"]] == ["local"]
    assert sites.detect_site("anyhost", base).name == "local"


@pytest.mark.slow
def test_reframe_loads_a_site_beside_a_broken_one(tmp_path: Path) -> None:
    """Issue 37 item 21: an invalid site.yaml anywhere in TOPOBIND_SITES_DIR made every
    site's validate fail inside ReFrame's configuration loading."""
    base = _sites_with_a_broken_one(tmp_path)
    env = {**os.environ, "TOPOBIND_SITES_DIR": str(base), "TOPOBIND_SITE": "local",
           "TOPOBIND_REFRAME_RESULTS": str(tmp_path / "res")}  # fmt: skip
    done = subprocess.run(
        [str(REFRAME), "-C", str(REPO / "site_configs" / "reframe_config.py"), "-c",
         str(REPO / "reframe_tests" / "stream.py"), "--system", "local:default", "-l"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Found " in done.stdout and "SiteError" not in done.stdout + done.stderr


# --------------------------------------------------------------------------- item 20
SITE_YAML = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: slurm, scheduler: slurm, launcher: srun, access: ['-p debug']}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)


def _site(tmp_path: Path, settings: str) -> Path:
    base = tmp_path / "sites"
    (base / "fleet").mkdir(parents=True)
    (base / "fleet" / "site.yaml").write_text(SITE_YAML + settings)
    return base


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("outlier_threshold: abc", "settings.outlier_threshold: 'abc': give a number from 0 to 10"),
        ("outlier_threshold: -1", "settings.outlier_threshold: -1: give a number from 0 to 10"),
        ("outlier_threshold: 0", "settings.outlier_threshold: 0: give a fraction above 0"),
        ("each_node.outlier_threshold: 12", "settings.each_node.outlier_threshold: 12: give a"),
        ("node_budget: abc", "settings.node_budget: 'abc': not a duration"),
        ("node_budget: -1m", "settings.node_budget: '-1m': not a duration"),
        ("each_node.node_budget: 5x", "settings.each_node.node_budget: '5x': not a duration"),
        ("StreamChek.elements: 4M", "settings.StreamChek.elements: no check 'StreamChek' (did "
         "you mean StreamCheck?"),
        ("StreamCheck.elemnts: 4M", "StreamCheck has no variable 'elemnts' (did you mean "
         "StreamCheck.elements?"),
        ("elemnts: 4M", "no check has a variable 'elemnts' (did you mean elements?"),
        ("StreamCheck.max_bytes_per_run: 100", "settings.StreamCheck.max_bytes_per_run: 100 "
         "bytes is under the least 3 quick trials of STREAM move (240000 bytes"),
        ("StreamCheck.max_bytes_per_run: 2K", "2048 bytes is under the least 3 quick trials"),
        ("StreamCheck.max_bytes_per_run: 0.0001K", "'0.0001K': give a size from 1"),
        ("StreamCheck.elements: 10", "settings.StreamCheck.elements: 10: give a count from 1,000"),
        ("StreamCheck.trials: \u0661", "settings.StreamCheck.trials: '\u0661': give a whole"),
        ("StreamCheck.trials: '1_0'", "'1_0': give a whole number from 1 to 10000"),
        ("DgemmCheck.reps: 2.5", "settings.DgemmCheck.reps: 2.5: give a whole number"),
        ("pages: 3G", "settings.pages: '3G': give one of 1G, 2M, thp, 4k, auto (StreamCheck"),
        ("strict_load: maybe", "settings.strict_load: 'maybe': not a yes/no value"),
        ("HugepagesCheck.pages_1g_per_numa: -2", "give a whole number from -1 to"),
        ("LatencyCheck.max_working_set: 100K", "give a size from 1M"),
        ("LatencyCheck.min_time: 0", "min_time: 0: give a number from 0.0001 to 100"),
        ("LatencyCheck.min_time: fast", "min_time: 'fast': give a number from 0.0001"),
        ("calibrating: true", "no check has a variable 'calibrating'"),
    ],
)  # fmt: skip
def test_site_check_refuses_a_setting_the_catalogue_does_not_take(
    setting: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Issue 37 item 20: every one of these was 'valid' (and STREAM failed every run, or
    validate refused later naming 'nan', or the setting was silently ignored)."""
    from topobind.cli.main import main

    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(_site(tmp_path, f"settings:\n  {setting}\n")))
    assert main(["site", "check", "fleet"]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "settings",
    ["", "settings: {}\n",
     "settings:\n  StreamCheck.elements: 4M\n  each_node.StreamCheck.elements: 20M\n"
     "  outlier_threshold: 0.1\n  each_node.outlier_threshold: 0.2\n  node_budget: 10m\n"
     "  each_node.node_budget: 90s\n  strict_load: true\n  pages: 2M\n  sanity_once: 'false'\n"
     "  HugepagesCheck.pages_1g_per_numa: -1\n  LatencyCheck.quick_small: ''\n"
     "  LatencyCheck.sizes: 2M,64M\n  HplCheck.mem_fraction: 0.4\n  DgemmCheck.n: 8192\n"
     "  StreamCheck.max_bytes_per_run: 16GiB\n  C2CCheck.samples: 7\n"
     "  LatencyCheck.min_time: 0.01\n"],
)  # fmt: skip
def test_legitimate_settings_and_a_site_without_them_are_valid(
    settings: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from topobind.cli.main import main

    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(_site(tmp_path, settings)))
    assert main(["site", "check", "fleet"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("name", ["local", "betzy", "stampede2-skx", "epyc9755"])
def test_the_shipped_sites_settings_are_valid(name: str) -> None:
    site = sites.load_site(name, REPO / "site_configs")
    assert site.name == name


def test_each_node_threshold_and_budget_replace_the_plain_ones(tmp_path: Path) -> None:
    """Issue 37 item 20: each_node.outlier_threshold and each_node.node_budget were ignored
    although the docs say each_node.X replaces X under --each-node."""
    from topobind.errors import TopobindError
    from topobind.validation import progress, verdict

    settings = {"outlier_threshold": 0.05, "each_node.outlier_threshold": 0.2}
    assert verdict.threshold_for(None, settings, "f", each_node=True) == 0.2
    assert verdict.threshold_for(None, settings, "f", each_node=False) == 0.05
    base = _site(tmp_path, "settings:\n  node_budget: 1h\n  each_node.node_budget: 1m\n")
    site = sites.load_site("fleet", base)
    with pytest.raises(TopobindError, match="over the site's each_node.node_budget of 1:00"):
        progress.check_budget(site, progress.Expected(600.0, 300.0, "x"))


def test_the_catalogue_holds_every_variable_of_the_checks() -> None:
    """CHECK_VARIABLES against the ``NAME = variable(...)`` lines of reframe_tests/ (what a
    site may set), the internal ones (set by topobind, not by a site) left out."""
    import ast

    from topobind.validation.sites.catalogue import CHECK_VARIABLES

    internal = {"calibrating", "tb_ran_on", "tb_evidence", "tb_matrices"}
    found: dict[str, set[str]] = {}
    for path in [*(REPO / "reframe_tests").glob("*.py"),
                 REPO / "reframe_tests" / "topobind_rfm" / "__init__.py"]:  # fmt: skip
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or not node.name.endswith("Check"):
                continue
            names = found.setdefault(node.name, set())
            for stmt in node.body:
                value = getattr(stmt, "value", None)
                if (isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Call)
                        and getattr(value.func, "id", "") == "variable"):  # fmt: skip
                    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                    names.add(target.id)  # type: ignore[attr-defined]
    assert {c: set(v) for c, v in CHECK_VARIABLES.items()} == {
        c: v - internal for c, v in found.items()
    }


# --------------------------------------------------------------------------- the probe
def _probe() -> object:
    sys.path.insert(0, str(REPO / "reframe_tests" / "topobind_rfm"))
    try:
        import probe
    finally:
        sys.path.pop(0)
    return probe


@pytest.mark.parametrize("cap", ["100", "2K", "200K"])
def test_the_size_probe_refuses_a_cap_that_runs_nothing(
    cap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Issue 37 item 20: a cap of 100 bytes printed '0 3' and STREAM failed every run with
    'exited with status 2'; the probe stops the job with its own line."""
    monkeypatch.chdir(tmp_path)
    probe = _probe()
    assert probe.main(["stream-size", "3", cap]) == 3  # type: ignore[attr-defined]
    got = capsys.readouterr()
    assert got.out == "" and "raise StreamCheck.max_bytes_per_run" in got.err
    assert probe.main(["stream-size", "3", "1G"]) == 0  # type: ignore[attr-defined]
    elements, trials = capsys.readouterr().out.split()
    assert int(elements) >= 1000 and int(trials) >= 3


@pytest.mark.parametrize("text", ["0.0001K", "0.5", "\u0664G", "1_0K", "-1K", "nan", ""])
def test_the_probe_never_turns_a_size_into_zero(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 24: parse_size('0.0001K') was 0 bytes."""
    probe = _probe()
    with pytest.raises(SystemExit) as done:
        probe.parse_size(text, "max_bytes_per_run")  # type: ignore[attr-defined]
    assert done.value.code == 3
    assert "max_bytes_per_run" in capsys.readouterr().err


# --------------------------------------------------------------------------- the net
_KEYS = st.one_of(
    st.sampled_from(["outlier_threshold", "node_budget", "StreamCheck.elements", "pages",
                     "StreamCheck.max_bytes_per_run", "each_node.StreamCheck.max_bytes_per_run",
                     "HugepagesCheck.pages_1g_per_numa", "strict_load", "LatencyCheck.sizes",
                     "each_node.outlier_threshold", "DgemmCheck.n", "Nope.x", "x"]),
    st.from_regex(r"(each_node\.)?([A-Za-z_][A-Za-z0-9_]{0,12}\.)?[a-z_][a-z0-9_]{0,12}",
                  fullmatch=True),
)  # fmt: skip
_VALUES = st.one_of(st.text(max_size=30), st.integers(-(10**20), 10**20), st.booleans(),
                    st.floats(allow_nan=True, allow_infinity=True))  # fmt: skip


@fuzz(300)
@given(st.dictionaries(_KEYS, _VALUES, max_size=6))
def test_any_settings_give_one_line_per_problem_or_none(settings: dict[str, object]) -> None:
    """The site-settings parser on anything a YAML mapping can hold: never an exception,
    one line per problem, each naming its setting; an accepted value reads back as its kind."""
    from topobind.validation.sites.schema import settings_problems

    with bounded():
        got = settings_problems(settings, "F")
    for line in got:
        assert "\n" not in line and line.startswith("F: settings.")
    named = {line.split(": ")[1].removeprefix("settings.") for line in got}
    assert named <= set(settings)
    if "outlier_threshold" in settings and "settings.outlier_threshold" not in " ".join(got):
        from topobind.validation import verdict

        assert 0 < verdict.threshold_for(None, settings, "F") < 10
