"""HplCheck %size=full passes (issue 30 item 5): it runs 'topobind bench hpl ... --repeat N',
which was refused ('hpl takes no --repeat/--strict/kernel arguments'), breaking calibrate
--tags full."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

pytestmark = pytest.mark.slow


def test_hpl_full_variant_passes_with_two_runs(tmp_path: Path) -> None:
    env = {**os.environ, "TOPOBIND_SITE": "local", "TOPOBIND_REFRAME_RESULTS": str(tmp_path)}
    argv = [
        str(Path(sys.executable).parent / "reframe"),
        "-C", str(REPO / "site_configs" / "reframe_config.py"),
        "-c", str(REPO / "reframe_tests" / "hpl.py"), "--system", "local:default",
        "-n", "HplCheck%size=full", "-S", "n=600", "-S", "runs=2",
        "-o", str(tmp_path / "o"), "-s", str(tmp_path / "s"), "-r",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "P: gflops:" in done.stdout and "P: max_slowdown:" in done.stdout
    (check,) = (tmp_path / "o").rglob("HplCheck_*")  # ReFrame keeps the files flat
    assert len(list(check.glob("*-compact.json"))) == 2
