"""``make setup`` readies a clone for every documented command (issue 48 item 1): after
scripts/setup.sh alone the per-rank step, the hugepage shim, the kernels and the placement
probe are built (``topobind run --verify`` and the smoke acceptance need them), the SPANK
plugin too where Slurm's headers are, and a second run rebuilds nothing.

The clone borrows this checkout's .venv and wheelhouse (setup.sh's pip steps are then
no-ops, no network), so what the test exercises is the C part of set-up.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from paths import REPO
from test_clone_alone import _copy_working_tree as copy_working_tree

pytestmark = pytest.mark.slow

BUILT = (
    "libtb/build/libtb.a",
    "rankstep/bin/rankexec",
    "rankstep/bin/libtbhugepages.so",
    "kernels/bin/whereami",
    "kernels/bin/stream",
    "kernels/bin/dgemm",
    "kernels/bin/latency",
    "kernels/bin/c2c",
)


def _clone_with_this_venv(dest: Path) -> None:
    copy_working_tree(dest)
    (dest / ".venv").symlink_to(REPO / ".venv")
    (dest / "build").mkdir(exist_ok=True)
    (dest / "build" / "wheelhouse").symlink_to(REPO / "build" / "wheelhouse")
    os.utime(dest / "pyproject.toml", (0, 0))  # older than the venv's stamp: no pip install


def _setup(clone: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=clone, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip


def test_setup_builds_every_c_part_and_a_second_run_builds_nothing(tmp_path: Path) -> None:
    if not (REPO / ".venv" / ".topobind-setup-stamp").is_file():
        pytest.skip("this checkout has not run make setup (no .venv stamp)")
    if not (REPO / "build" / "wheelhouse" / "requirements.txt").is_file():
        pytest.skip("no build/wheelhouse (make setup could not reach PyPI)")
    clone = tmp_path / "any-name"
    _clone_with_this_venv(clone)
    first = _setup(clone)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    missing = [p for p in BUILT if not (clone / p).is_file()]
    assert not missing, f"make setup left unbuilt: {missing}\n{first.stdout[-2000:]}"
    if Path("/usr/include/slurm/spank.h").is_file():
        assert (clone / "rankstep" / "bin" / "topobind_spank.so").is_file()
    stamps = {p: (clone / p).stat().st_mtime_ns for p in BUILT}
    second = _setup(clone)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert {p: (clone / p).stat().st_mtime_ns for p in BUILT} == stamps, "rebuilt on a re-run"
