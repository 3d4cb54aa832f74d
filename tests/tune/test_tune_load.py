"""The load each tune run records (issue 46 item 3), by the rule validate's checks use:
outside a job the host's busy time less topobind's process tree; inside a Slurm job also less
the job's steps on this node (their tasks are children of each step's slurmstepd, read from
/proc by measure/jobcpu.Sampler); inside a Flux allocation not measured, and said so.
tests/tune/test_tune_slurm.py runs a real session inside a job of the local cluster."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from topobind.launch.shape import RunOptions
from topobind.measure import cpuload, jobcpu
from topobind.topo.allocation import Allocation
from topobind.topo.slurm_allocation import allocation
from topobind.tune import launching
from topobind.tune.session import Candidate


def test_the_slurm_allocation_names_its_job_and_nothing_odd() -> None:
    assert allocation({"SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "1"}).job_id == "4242"
    for odd in ("", "42; rm -rf", "4" * 21, "-1", "\u00b2", "\u0663"):  # '²', Arabic-Indic 3
        assert allocation({"SLURM_JOB_ID": odd, "SLURM_JOB_NUM_NODES": "1"}).job_id == ""
    assert Allocation().job_id == ""


class FakeSteps:
    """A Sampler whose job's steps used ``job_s`` CPU-seconds; what the launcher did to it."""

    made: list[tuple[int, str, Any]] = []

    def __init__(self, me: int, job: str, harness: Any, job_s: float = 1.5) -> None:
        FakeSteps.made.append((me, job, harness))
        self.job_s, self.error, self.started, self.stopped = job_s, "", False, False

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        assert self.started
        self.stopped = True

    def seconds(self) -> tuple[float, float]:
        assert self.stopped  # read once stopped, as run_measured does
        return self.job_s, 0.0


def _launcher(tmp_path: Path, alloc: Allocation) -> launching.Launcher:
    prog = tmp_path / "prog"
    prog.write_text("#!/bin/sh\nexit 0\n")
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    from topobind.tune.engine import base_request

    base = base_request("synthetic:core:2 pu:1")
    opts = RunOptions(allocation=alloc)
    runner = launching.Launcher([str(prog)], base, opts, None, 60.0, str(tmp_path))
    # the launch itself is the program, run plainly (what a candidate's prepared launch is)
    runner.launches[Candidate("compact")] = ([str(prog)], {})
    return runner


def _samples(monkeypatch: pytest.MonkeyPatch, busy: list[float]) -> None:
    """cpu_sample: 2 CPUs; the host's busy CPU-seconds as ``busy`` gives them, one a call,
    over 1 s between two calls; topobind's own tree used nothing."""
    walls = iter([100.0, 101.0] * 4)
    seq = iter(busy)
    monkeypatch.setattr(cpuload, "cpu_sample",
                        lambda: cpuload.CpuSample(next(walls), next(seq), 0.0, 2, 0.5))  # fmt: skip


def test_inside_a_slurm_job_its_steps_on_this_node_are_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeSteps.made.clear()
    monkeypatch.setattr(jobcpu, "Sampler", FakeSteps)
    _samples(monkeypatch, [10.0, 11.8])  # 1.8 CPU-s busy in 1 s: 1.5 of it the job's steps
    runner = _launcher(tmp_path, Allocation("slurm", job_id="77"))
    got = runner(Candidate("compact"))
    assert got.value is not None and got.reason is None
    assert FakeSteps.made and FakeSteps.made[0][1:] == ("77", None)
    assert got.load == pytest.approx((1.8 - 1.5) / 2)  # 0.15 of the CPUs: not busy


def test_outside_a_job_the_host_rule_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeSteps.made.clear()
    monkeypatch.setattr(jobcpu, "Sampler", FakeSteps)
    _samples(monkeypatch, [10.0, 11.8])
    got = _launcher(tmp_path, Allocation())(Candidate("compact"))
    assert FakeSteps.made == [] and got.load == pytest.approx(0.9)  # 1.8 of 2 CPUs: busy


@pytest.mark.parametrize("alloc", [Allocation("flux"), Allocation("slurm", job_id="")])
def test_where_the_jobs_processes_cannot_be_told_apart_no_load(
    alloc: Allocation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeSteps.made.clear()
    monkeypatch.setattr(jobcpu, "Sampler", FakeSteps)
    got = _launcher(tmp_path, alloc)(Candidate("compact"))
    assert got.value is not None and got.load is None and FakeSteps.made == []


def test_a_sampler_that_failed_gives_no_load_rather_than_a_busy_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(FakeSteps):
        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            self.error = "ValueError: odd /proc"

    monkeypatch.setattr(jobcpu, "Sampler", Broken)
    _samples(monkeypatch, [10.0, 11.8])
    got = _launcher(tmp_path, Allocation("slurm", job_id="77"))(Candidate("compact"))
    assert got.load is None


def test_the_real_sampler_is_stopped_when_the_run_cannot_start(tmp_path: Path) -> None:
    """A real Sampler (reading this machine's /proc) around a run that cannot start: its
    thread ends with the run."""
    import threading

    runner = _launcher(tmp_path, Allocation("slurm", job_id="77"))
    runner.launches[Candidate("compact")] = ([str(tmp_path / "missing")], {})
    before = {t.ident for t in threading.enumerate()}
    got = runner(Candidate("compact"))
    assert got.value is None
    assert {t.ident for t in threading.enumerate() if t.is_alive()} <= before
