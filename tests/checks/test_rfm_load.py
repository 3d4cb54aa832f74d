"""Every ReFrame check records the load it ran under (issue 30 item 5): ``probe.py load``
wraps the main command and writes load.json; a check warns when other work shared the node and
fails with ``-S strict_load=true``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import REPO

PROBE = REPO / "reframe_tests" / "topobind_rfm" / "probe.py"
SPIN = "import time\nt = time.monotonic() + 120\nwhile time.monotonic() < t:\n    pass\n"


@pytest.fixture
def spinners() -> Iterator[None]:
    """Other work on every CPU of this machine (busy loops), stopped at the end."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_probe_load_sees_other_work_and_keeps_the_exit_status(
    tmp_path: Path, spinners: None
) -> None:
    out = tmp_path / "load.json"
    cmd = [sys.executable, str(PROBE), "load", str(out), "--", "sh", "-c", "sleep 1; exit 7"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    load = json.loads(out.read_text())
    assert load["busy"] is True and load["others_share"] > 0.25, load
    assert load["cpus"] == os.cpu_count() and load["seconds"] >= 1.0


def test_probe_load_subtracts_the_commands_own_cpu_time(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    spin = "import time\nwhile time.process_time() < 0.5:\n    pass\n"  # 0.5 CPU-s, busy or not
    cmd = [sys.executable, str(PROBE), "load", str(out), "--", sys.executable, "-c", spin]
    subprocess.run(cmd, check=True, timeout=60)
    load = json.loads(out.read_text())
    assert load["own_cpu_seconds"] >= 0.5, load  # the command's CPU time is its own


@pytest.mark.slow
def test_a_check_under_load_warns_and_fails_with_strict_load(
    tmp_path: Path, spinners: None
) -> None:
    env = {**os.environ, "TOPOBIND_SITE": "local", "TOPOBIND_REFRAME_RESULTS": str(tmp_path)}
    base = [
        str(Path(sys.executable).parent / "reframe"),
        "-C", str(REPO / "site_configs" / "reframe_config.py"),
        "-c", str(REPO / "reframe_tests" / "stream.py"),
        "--system", "local:default", "-n", "StreamCheck%layout=compact",
        "-S", "elements=256K", "-S", "trials=3",
    ]  # fmt: skip
    runs = {}
    for strict in ("false", "true"):
        o = tmp_path / strict
        argv = [*base, "-S", f"strict_load={strict}", "-o", str(o), "-s", str(o / "s"), "-r"]
        runs[strict] = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    warned = runs["false"]
    assert warned.returncode == 0, warned.stdout[-2000:]
    assert "other processes kept" in warned.stdout and "not the node's own" in warned.stdout
    (load,) = (tmp_path / "false").rglob("load.json")
    assert json.loads(load.read_text())["busy"] is True
    (label,) = (tmp_path / "false").rglob("topobind-check.json")
    assert json.loads(label.read_text()) == {"check": "StreamCheck", "variant": "compact"}
    failed = runs["true"]
    assert failed.returncode != 0 and "strict_load" in failed.stdout, failed.stdout[-2000:]
