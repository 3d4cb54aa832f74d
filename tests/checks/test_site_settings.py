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
from paths import REPO

from topobind.checks import sites

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
