"""Ctrl-C in validate (issue 30 item 4): the reframe child and its job stop, and topobind
exits with one line (no KeyboardInterrupt traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import REPO

FAKE_REFRAME = """#!/bin/sh
# a ReFrame that runs one 'job' (a sleep) and cancels it on SIGINT, as ReFrame does
trap 'kill $job; echo cancelled > {mark}; exit 1' INT TERM
echo "[ RUN      ] StreamCheck %layout=compact /00000000 @local:default+builtin"
sleep 300 &
job=$!
echo $job > {pidfile}
wait $job
"""

DRIVER = """
import sys
from topobind.validation import reframe_runs
reframe_runs.reframe_exe = lambda: [sys.argv[1]]
from topobind.cli.main import main
sys.exit(main(["validate", "--site", "local", "--results", sys.argv[2]]))
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("started", ["plain", "sigint-ignored"])
def test_ctrl_c_stops_reframe_and_its_job_with_one_line(tmp_path: Path, started: str) -> None:
    """'sigint-ignored': topobind started as a background job of a script, by nohup or cron
    (SIGINT ignored, inherited); ReFrame started while topobind still ignored it could not
    trap it, and ignored the SIGINT that asks it to cancel its jobs (CI's fresh clone)."""
    mark, pidfile = tmp_path / "cancelled", tmp_path / "job.pid"
    fake = tmp_path / "reframe"
    fake.write_text(FAKE_REFRAME.format(mark=mark, pidfile=pidfile))
    fake.chmod(0o755)
    env = dict(os.environ, TOPOBIND_SITES_DIR=str(REPO / "site_configs"))
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(fake), str(tmp_path / "res")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=_ignore_sigint if started == "sigint-ignored" else None,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    job = int(pidfile.read_text())
    proc.send_signal(signal.SIGINT)  # to topobind only: it must pass it on
    out, err = proc.communicate(timeout=90)  # topobind gives ReFrame 60 s, then says so
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("topobind: error:")]
    assert len(errors) == 1, err
    assert "interrupted (SIGINT) while ReFrame ran on local:" in errors[0]
    assert "ReFrame stopped and cancelled its jobs" in errors[0]
    assert mark.read_text().strip() == "cancelled"
    try:
        os.kill(job, 0)
        alive = Path(f"/proc/{job}/stat").read_text().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the job of the interrupted ReFrame still runs"


def test_a_signal_while_the_child_starts_acts_once_it_is_known() -> None:
    """signals_held: a Ctrl-C during Popen waits until the Popen returned (the child can then
    be stopped), and is raised then as stop_on_signals' Interrupted, not KeyboardInterrupt."""
    from topobind.errors import Interrupted
    from topobind.interrupt import signals_held, stop_on_signals

    started = []
    held = stop_on_signals("while the test ran"), signals_held()
    with pytest.raises(Interrupted) as caught, held[0], held[1]:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # a handler that raised would have raised here
        started.append("child known")
    assert started == ["child known"]
    assert caught.value.exit_status == 130
