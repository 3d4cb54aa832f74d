"""The 'squeue' backend of site_configs/reframe_config.py (partitions without sacct): it asks
``squeue -t all`` and so needs no 2 s wait after each submission, yet takes a job that squeue
does not list for finished only 2 s after its submission, as ReFrame's own backend."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("reframe")


class _Job:
    def __init__(self, jobid: str, age: float) -> None:
        self.jobid, self.submit_time = jobid, time.time() - age
        self.is_cancelling, self.max_pending_time = False, None
        self._state: str | None = None
        self._nodespec: str | None = None

    @property
    def state(self) -> str | None:
        return self._state


def _backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TOPOBIND_REFRAME_RESULTS", str(tmp_path / "res"))
    spec = importlib.util.spec_from_file_location(
        "tb_rfm_config", REPO / "site_configs" / "reframe_config.py"
    )
    assert spec and spec.loader
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    from reframe.core.backends import getscheduler

    return getscheduler("squeue")


def test_squeue_lists_every_state_and_a_fresh_job_is_not_taken_for_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "squeue"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                    'printf "5|COMPLETED|node1|None\\n6|RUNNING|node2|None\\n"\n')  # fmt: skip
    fake.chmod(0o755)
    cls = _backend(tmp_path, monkeypatch)
    backend = object.__new__(cls)  # no ReFrame runtime: only what poll uses
    backend._squeue = str(fake)
    jobs = {i: _Job(i, age) for i, age in (("5", 0.1), ("6", 0.1), ("7", 0.1), ("8", 3.0))}
    backend.poll(*jobs.values())
    assert "-t all -j 5,6,7,8" in calls.read_text()
    assert {i: j.state for i, j in jobs.items()} == {
        "5": "COMPLETED", "6": "RUNNING", "7": None, "8": "COMPLETED"}  # fmt: skip
    assert jobs["6"]._nodespec == "node2"
