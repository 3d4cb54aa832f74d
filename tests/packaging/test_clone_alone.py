"""A clone of the repository with nothing beside it (issue 38 item 4): every file the tests
and the docs read is in the repository (``topologies/``), and the offline mirror holds only
upstream archives. Without it the whole suite collects as in the checkout, and the one module
that needs the archives (the Spack check) skips with one line naming them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

pytestmark = pytest.mark.slow

MIRROR_VARIABLES = ("TOPOBIND_OFFLINE_MIRROR", "TOPOBIND_SHARED", "TOPOBIND_REQUIRE_MIRROR")


def _copy_working_tree(dest: Path) -> None:
    """The files git knows in the working tree (tracked and new, not ignored): a clone of it."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = REPO / name
        if src.is_file():  # a tracked file deleted in the working tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)


def _collect(where: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-rs", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*argv, "tests"], cwd=where, env=env, capture_output=True, text=True, timeout=900
    )


def _collected(out: subprocess.CompletedProcess[str]) -> int:
    m = re.search(r"^(\d+) tests? collected", out.stdout, re.M)
    assert m, out.stdout[-2000:] + out.stderr[-2000:]
    return int(m.group(1))


def test_a_clone_alone_collects_the_whole_suite(tmp_path: Path) -> None:
    clone = tmp_path / "p"
    _copy_working_tree(clone)
    env = {k: v for k, v in os.environ.items() if k not in MIRROR_VARIABLES}
    env["PYTHONPATH"] = str(clone / "src")  # the clone's package, before the editable one
    where = subprocess.run(
        [sys.executable, "-c", "import topobind; print(topobind.__file__)"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(clone / "src")), where
    assert not (tmp_path / "shared").exists()

    alone = _collect(clone, env)
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
    assert " error" not in alone.stdout.splitlines()[-1], alone.stdout[-3000:]
    skips = [ln for ln in alone.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert len(skips) == 1, skips
    assert "tests/spack_driver/test_spack_check.py" in skips[0], skips
    for named in ("spack-v1.1.0.tar.gz", "spack-packages-v2026.06.0.tar.gz", "github.com/spack"):
        assert named in skips[0], skips

    # the checkout told its mirror is elsewhere collects the same tests
    home = {**env, "PYTHONPATH": str(REPO / "src")}
    home["TOPOBIND_OFFLINE_MIRROR"] = str(tmp_path / "no-mirror")
    assert _collected(alone) == _collected(_collect(REPO, home))
