"""The one load rule (topobind.validation.load): other processes' share of the node's CPU time
while a measurement ran = the host's busy time less the measurement's own, its own being its
process tree and, inside a Slurm job, the job's other processes (an srun step's tasks are the
step's slurmstepd's children, not the job script's). Synthetic /proc samples: no machine
performance is compared here."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import REPO

from topobind.measure import jobcpu
from topobind.measure.jobcpu import JobCpu, Proc
from topobind.validation import load as cpu_load
from topobind.validation.load import CpuSample, load_between


def sample(wall: float, busy: float, own: float, cpus: int = 2) -> CpuSample:
    return CpuSample(wall=wall, busy=busy, own=own, cpus=cpus, loadavg=1.0)


def test_load_counts_only_the_other_processes() -> None:
    # 10 s: the host's CPUs were busy 19 CPU-seconds, 4 of them ours -> others kept 1.5 CPUs
    load = load_between(sample(0, 100, 5), sample(10, 119, 9))
    assert load is not None and load.others_cpus == pytest.approx(1.5)
    assert load.share == pytest.approx(0.75) and load.busy
    doc = load.as_doc()
    assert doc["busy"] is True and doc["threshold"] == cpu_load.BUSY_SHARE
    quiet = load_between(sample(0, 100, 5), sample(10, 110, 14.5))
    assert quiet is not None and quiet.others_cpus == pytest.approx(0.05) and not quiet.busy
    # our own time is never counted as the others' (rounding of clock ticks: never negative)
    assert load_between(sample(0, 100, 5), sample(10, 104, 9.5)).others_cpus == 0.0  # type: ignore[union-attr]
    assert load_between(None, sample(1, 1, 1)) is None
    # the job's processes outside this tree are the measurement's own too
    job = load_between(sample(0, 100, 5), sample(10, 119, 9), also_own=14.0)
    assert job is not None and job.others_cpus == pytest.approx(0.1) and not job.busy


def test_cpu_sample_reads_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  100 0 50 1000 10 0 0 5 0 0\ncpu0 50 0 25 500 5 0 0 2 0 0\n"
        "cpu1 50 0 25 500 5 0 0 3 0 0\nintr 1\n"
    )
    s = cpu_load.cpu_sample(str(stat))
    assert s is not None and s.cpus == 2
    assert s.busy * os.sysconf("SC_CLK_TCK") == pytest.approx(155)
    assert cpu_load.cpu_sample(str(tmp_path / "missing")) is None
    live = cpu_load.cpu_sample()
    assert live is not None and live.cpus >= 1 and math.isfinite(live.busy)


def test_parse_stat_reads_a_name_with_spaces_and_parentheses() -> None:
    line = "4242 (tb (x) y) R 17 1 1 0 -1 4194560 1 0 0 0 120 30 7 3 20 0 1 0 98765 0 0"
    p = jobcpu.parse_stat(line)
    assert p == Proc(4242, 17, 98765, 150, 10, "tb (x) y")
    assert jobcpu.parse_stat("garbage") is None


# A Slurm job as /proc shows it: init (1), slurmd (10), the batch step's slurmstepd (20) with
# the job script (21) and the measuring probe (22, whose tree is counted by getrusage), a
# 'while :' loop of another user (50), another job's step (60, 61).
STEPD = {20: "slurmstepd: [7.batch]", 30: "slurmstepd: [7.0]", 60: "slurmstepd: [8.0]"}


def procs(*rows: tuple[int, int, int, int, int, str]) -> dict[int, Proc]:
    return {pid: Proc(pid, ppid, start, cpu, reaped, name) for pid, ppid, start, cpu, reaped, name
            in rows}  # fmt: skip


def base(loop: int, other: int) -> list[tuple[int, int, int, int, int, str]]:
    return [
        (1, 0, 1, 5, 0, "init"), (10, 1, 2, 3, 0, "slurmd"), (20, 1, 3, 2, 0, "slurmstepd"),
        (21, 20, 4, 1, 0, "bash"), (22, 21, 5, 9, 0, "python"), (50, 1, 6, loop, 0, "bash"),
        (60, 1, 7, 1, 0, "slurmstepd"), (61, 60, 8, other, 0, "stream"),
    ]  # fmt: skip


def members(snap: dict[int, Proc]) -> set[int]:
    roots = jobcpu.step_daemons(snap, "7", lambda pid: STEPD.get(pid, ""))
    return jobcpu.descendants(snap, roots, skip=22)


def test_a_step_of_the_job_is_its_own_work_and_other_work_is_not() -> None:
    """Job 7's step 0 (slurmstepd 30, task 31) starts after the first sample, spins 200 ticks
    and exits (reaped by its slurmstepd, which init reaps): the job's work is 200 ticks of the
    task and 4 of its slurmstepd, plus what the batch step did; the loop (50) and job 8's step
    (61) are other work, however much they spin."""
    first = procs(*base(loop=1000, other=500))
    job = JobCpu(first)
    job.add(first, members(first))
    assert members(first) == {20, 21}  # the probe's own tree is not sampled
    steps = [
        [(30, 1, 11, 1, 0, "slurmstepd"), (31, 30, 12, 50, 0, "stream")],
        [(30, 1, 11, 2, 0, "slurmstepd"), (31, 30, 12, 150, 0, "stream")],
        [(30, 1, 11, 4, 200, "slurmstepd")],  # the task exited; its 200 ticks reaped
        [],  # slurmstepd gone (its parent does not count it: no double counting)
    ]
    for i, step in enumerate(steps, 1):
        rows = base(loop=1000 + 100 * i, other=500 + 100 * i)
        rows[2] = (20, 1, 3, 2 + i, 0, "slurmstepd")  # the batch step's slurmstepd: 1 a sample
        snap = procs(*rows, *step)
        job.add(snap, members(snap))
    assert job.ticks() == 200 + 4 + 4


def test_a_process_alive_at_the_start_counts_from_there_and_orphans_stay_members() -> None:
    first = procs(*base(0, 0), (40, 20, 9, 100, 0, "helper"), (41, 40, 10, 10, 0, "child"))
    job = JobCpu(first)
    job.add(first, members(first))
    # the helper (100 ticks before the first sample, none since) exits, reaped by the
    # batch step's slurmstepd; its child is orphaned to init and keeps spinning
    after = base(0, 0)
    after[2] = (20, 1, 3, 2, 100, "slurmstepd")
    second = procs(*after, (41, 1, 10, 60, 0, "child"))
    job.add(second, members(second))
    assert 41 not in members(second)  # no longer below the job's slurmstepd
    job.add(procs(*after, (41, 1, 10, 90, 0, "child")), members(second))
    assert job.ticks() == 80  # the helper's 100 were before the start; the child 10 -> 90
    assert job.live() == {20, 21, 41}  # the members present at the last sample


def test_no_slurm_job_means_no_job_processes() -> None:
    snap = procs(*base(100, 100))
    job = JobCpu(snap)
    roots = jobcpu.step_daemons(snap, "", lambda pid: STEPD.get(pid, ""))
    assert roots == set()
    job.add(snap, jobcpu.descendants(snap, roots, skip=22))
    assert job.ticks() == 0


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )
)
def test_load_json_is_json(doc: object) -> None:
    """load.json is written without the json module (every check's job imports this module
    on a node that may be throttled): whatever it writes reads back as the same document."""
    assert json.loads(cpu_load.json_text(doc)) == doc


def test_load_json_refuses_what_json_cannot_hold() -> None:
    for bad in (float("nan"), float("inf"), [1], (1,)):
        with pytest.raises(ValueError, match="not a load document value"):
            cpu_load.json_text({"x": bad})


def test_the_wrapper_imports_nothing_heavy() -> None:
    """probe.py load runs in every check's job: no dataclasses, json, re, subprocess, typing
    or pathlib on its path (0.05 s of CPU a job; 0.2 s of wall time on a node at 25 %)."""
    probe = REPO / "reframe_tests" / "topobind_rfm" / "probe.py"
    check = (
        f"import sys; sys.path.insert(0, {str(probe.parent)!r}); import probe; "
        "import topobind.validation.load; "
        "heavy = {'dataclasses', 'json', 're', 'subprocess', 'typing', 'pathlib'} & "
        "set(sys.modules); print(sorted(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout


def test_a_load_document_it_cannot_write_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The document is made before its file is opened: a value json_text refuses leaves
    neither load.json nor a half-written load.json.tmp (the command has run all the same)."""

    def refuse(value: object) -> str:
        raise ValueError("not a load document value: nan")

    monkeypatch.setattr(cpu_load, "json_text", refuse)
    out = tmp_path / "load.json"
    with pytest.raises(ValueError, match="not a load document value"):
        cpu_load.run_measured(["true"], str(out), env={})
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the wrapper's status
def _wrapper(tmp_path: Path, *cmd: str, out: str | None = None) -> subprocess.CompletedProcess:
    probe = REPO / "reframe_tests" / "topobind_rfm" / "probe.py"
    dest = out if out is not None else str(tmp_path / "load.json")
    return subprocess.run([sys.executable, str(probe), "load", dest, "--", *cmd],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


@pytest.mark.slow
def test_the_wrapper_exits_as_a_shell_does(tmp_path: Path) -> None:
    """A command that does not exist: 127; that cannot run: 126 (one line each, no
    traceback); killed by signal N: 128+N, as the job's shell would say."""
    missing = _wrapper(tmp_path, "/no/such/program")
    assert missing.returncode == 127
    assert missing.stderr == "topobind load: /no/such/program: No such file or directory\n"
    plain = tmp_path / "not-executable"
    plain.write_text("echo hi\n")
    denied = _wrapper(tmp_path, str(plain))
    assert denied.returncode == 126
    assert denied.stderr == f"topobind load: {plain}: Permission denied\n"
    killed = _wrapper(tmp_path, "sh", "-c", "kill -TERM $$")
    assert killed.returncode == 128 + 15, killed.stderr
    assert killed.stderr == "" and json.loads((tmp_path / "load.json").read_text())["cpus"] >= 1
    assert _wrapper(tmp_path, "sh", "-c", "exit 3").returncode == 3


def test_the_wrapper_statuses_in_process(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "load.json")
    assert cpu_load.run_measured(["/no/such/program"], out, env={}) == 127
    assert cpu_load.run_measured([str(tmp_path)], out, env={}) == 126  # a directory
    assert cpu_load.run_measured(["sh", "-c", "kill -KILL $$"], out, env={}) == 128 + 9
    err = capfd.readouterr().err.splitlines()
    assert err[0] == "topobind load: /no/such/program: No such file or directory"
    assert err[1].startswith(f"topobind load: {tmp_path}: ") and len(err) == 2


@pytest.mark.parametrize("harness", ["\u00b2:1", "1:\u00b2", "\u0663:4", "1:" + "9" * 40, ":", "x"])
def test_an_odd_harness_variable_is_no_harness_and_the_command_runs(
    tmp_path: Path, harness: str
) -> None:
    """$TOPOBIND_LOAD_HARNESS comes from the environment: '²' passed str.isdigit and int()
    raised, so the check's wrapper ended with a traceback before its command ran."""
    assert jobcpu.harness_key(harness) is None
    out = tmp_path / "load.json"
    env = {"TOPOBIND_LOAD_HARNESS": harness}
    assert cpu_load.run_measured(["sh", "-c", "exit 3"], str(out), env=env) == 3
    assert json.loads(out.read_text())["own_by"]["harness"] == 0


@pytest.mark.parametrize("where", ["fifo", "/proc/load.json", ""])
def test_the_wrapper_refuses_an_unwritable_document_before_the_command(
    tmp_path: Path, where: str, capfd: pytest.CaptureFixture
) -> None:
    out = where
    if where == "fifo":
        out = str(tmp_path / "load.json")
        os.mkfifo(out)
    flag = tmp_path / "ran"
    assert cpu_load.run_measured(["touch", str(flag)], out, env={}) == 2
    assert not flag.exists()
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith("topobind load: ") and "give a writable load document path" in line
