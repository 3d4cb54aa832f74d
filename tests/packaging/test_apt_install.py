"""scripts/apt-install.sh: the one loop that installs the Debian packages of a list when
missing, for 'make setup' (scripts/setup.sh) and 'make flux' (scripts/build-flux.sh), which
each had a copy of it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from paths import REPO

SCRIPT = REPO / "scripts" / "apt-install.sh"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def apt_install(
    who: str, listed: Path, as_nobody: bool = False
) -> subprocess.CompletedProcess[str]:
    argv = [*(NOBODY if as_nobody else []), "bash", str(SCRIPT), who, str(listed)]
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.slow
def test_all_present_is_one_line(tmp_path: Path) -> None:
    listed = tmp_path / "packages.txt"
    listed.write_text("# the shell\nbash\n\ncoreutils   # and its tools\n")
    done = apt_install("setup", listed)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "setup: Debian packages: all 2 present\n", ""
    )  # fmt: skip


@pytest.mark.slow
def test_missing_packages_without_root_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tb-apt-") as folder:  # nobody reads it
        os.chmod(folder, 0o755)
        listed = Path(folder) / "packages.txt"
        listed.write_text("bash\ntopobind-no-such-package\n")
        listed.chmod(0o644)
        done = apt_install("flux", listed, as_nobody=True)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == (
        "flux: error: Debian packages missing: topobind-no-such-package; run 'sudo make flux' "
        "(or apt-get install them as root)\n"
    )


def test_setup_and_make_flux_share_it() -> None:
    for script, listed in (
        ("setup.sh", "apt-packages.txt"),
        ("build-flux.sh", "flux-apt-packages.txt"),
    ):
        text = (REPO / "scripts" / script).read_text()
        assert (
            f"scripts/apt-install.sh {script.split('.')[0].removeprefix('build-')} "
            f"scripts/{listed}" in text
        ), script
        assert "dpkg-query" not in text and "apt-get" not in text, script
