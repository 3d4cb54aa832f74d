"""One Slurm job a node for ``validate --each-node``: each node's checks of one pass, with their
repeats, run inside one allocation of that node.

The job (:func:`job_script`) first runs ``topobind site check SITE --live`` on the node (the
conformance step), then ONE ReFrame session with the site's partition turned into a ReFrame
``local`` partition of the same name (:data:`topobind.validation.sites.reframe_config.
IN_JOB_VARIABLE`): ReFrame runs the tier's checks as processes of the job, each ``topobind
run`` making its srun step inside the allocation, ``--reruns N-1`` repeating the whole list so
the checks' runs interleave (A B C A B C ...). Its report is an ordinary ReFrame report of the
same checks, variants, figures and units (the node: ReFrame's ``job_nodelist``, the host name),
so the verdict, the history, the metrics and the fleet report read it as before.

:func:`run_jobs` submits the jobs in waves of at most ``wave`` (the site's limits:
:mod:`topobind.validation.limits`), follows them with one ``squeue`` a poll, and bounds each node:
a job not started within ``start_s`` is cancelled (NOT STARTED), one running past ``run_s``
is cancelled, and a job that ended without a report (NODE_FAIL: the node died) makes its node
UNREACHABLE, each with the reason. Ctrl-C cancels the jobs this run submitted, by id, and
nothing else. Every Slurm call has a time bound.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topobind.errors import Interrupted, TopobindError

TIMEOUT_S = 60  # any one sbatch, squeue or scancel
POLL_S = 1.0
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE"}  # fmt: skip
POLL = {"RFM_POLL_RATE_DECAY": "0.02"}  # ReFrame's polls of the checks inside a node's job
NOT_STARTED = "NOT STARTED"
UNREACHABLE = "UNREACHABLE"


@dataclass
class NodeJob:
    """One node's job: where its files go, and what became of it."""

    node: str
    report: Path
    output: Path
    conformance: Path
    job_id: str = ""
    state: str = ""  # Slurm's last state of the job ('' before it was seen)
    submitted: float = 0.0
    started: float | None = None
    ended: float | None = None
    fault: str = ""  # '' | NOT STARTED | UNREACHABLE
    reason: str = ""
    #: its conformance step's findings and notes ([] [] before the report was read; a note:
    #: the step did not judge the node)
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Run:
    """The jobs of one pass and what they cost in submissions."""

    jobs: list[NodeJob] = field(default_factory=list)
    submitted: int = 0  # sbatch calls that made a job
    waves: int = 0


def job_script(node: str, access: Sequence[str], exclusive: bool, minutes: int,
               output: Path, env: dict[str, str], conformance: list[str],
               reframe: list[str], conformance_out: Path) -> str:  # fmt: skip
    """The batch script of one node's job (``#SBATCH`` lines, the environment, the
    conformance step, the ReFrame session)."""
    lines = ["#!/bin/bash", f"#SBATCH --job-name=tb-accept-{node}", "#SBATCH --nodes=1",
             f"#SBATCH --nodelist={node}", f"#SBATCH --time={max(1, minutes)}",
             f"#SBATCH --output={output}", "#SBATCH --ntasks=1"]  # fmt: skip
    if exclusive:
        lines.append("#SBATCH --exclusive")
    lines += [f"#SBATCH {opt}" for opt in access]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines += [
        f"{shlex.join(conformance)} > {shlex.quote(str(conformance_out))} 2>&1",
        f'echo "topobind-conformance-status: $?" >> {shlex.quote(str(conformance_out))}',
        f"exec {shlex.join(reframe)}",
    ]
    return "\n".join(lines) + "\n"


def _slurm(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise TopobindError(f"{what}: {argv[0]} did not answer within {TIMEOUT_S} s; is "
                            "slurmctld reachable?") from None  # fmt: skip
    except OSError as exc:
        raise TopobindError(f"{what}: {argv[0]} failed ({exc}); is Slurm installed?") from None


def submit(script: Path, node: str) -> str:
    """``sbatch --parsable SCRIPT``: the job id."""
    done = _slurm(["sbatch", "--parsable", str(script)], f"the job of {node}")
    job = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job.isdigit():
        why = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}")[:300]
        raise TopobindError(f"sbatch of {node}'s job failed: {why}")
    return job


def states(ids: Sequence[str]) -> dict[str, tuple[str, str]] | None:
    """{job id: (state, reason)} of ``squeue -t all``; None when squeue did not answer."""
    if not ids:
        return {}
    try:
        done = _slurm(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%r"],
                      "following the jobs")  # fmt: skip
    except Interrupted:  # Ctrl-C while squeue ran: the run stops (not a squeue that failed)
        raise
    except TopobindError:
        return None
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        return None
    out = {}
    for line in done.stdout[: 1 << 20].splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3 and parts[0].isdigit():
            out[parts[0]] = (parts[1].strip(), parts[2].strip())
    return out


def cancel(ids: Sequence[str]) -> str:
    """``scancel`` of these job ids (this run's own); what it did, in words."""
    if not ids:
        return "no job of this run was queued"
    try:
        done = _slurm(["scancel", *ids], "cancelling this run's jobs")
    except Interrupted:
        raise
    except TopobindError as exc:
        return str(exc)
    if done.returncode != 0:
        return f"scancel {' '.join(ids)}: {done.stderr.strip()[:200]}"
    return f"cancelled this run's job(s) {', '.join(ids)}"


def _follow(wave: list[NodeJob], start_s: float, run_s: float, show: Callable[[str], None],
            label: str, now: Callable[[], float]) -> None:  # fmt: skip
    """Poll the wave's jobs until each ended or was cancelled for its bound."""
    live = {j.job_id: j for j in wave}
    last = ""
    while live:
        got = states(list(live))
        t = now()
        # got None: squeue did not answer this time; the bounds still hold
        for job_id, job in list(live.items()):
            state, reason = (got or {}).get(job_id, ("", ""))
            if got is not None and not state and t - job.submitted > 10:
                state = "GONE"  # not listed any more (MinJobAge passed): ended
            job.state = state or job.state
            if state == "RUNNING" and job.started is None:
                job.started = t
            if state in FINAL or state == "GONE":
                job.ended = t
                if state == "NODE_FAIL":
                    job.fault, job.reason = UNREACHABLE, "its job ended NODE_FAIL (the node died)"
                del live[job_id]
                continue
            if job.started is None and t - job.submitted > start_s:
                job.fault = NOT_STARTED
                job.reason = (f"its job {job_id} did not start within {start_s:.0f} s "
                              f"({state or 'not listed'}: {reason or '-'})")  # fmt: skip
            elif job.started is not None and t - job.started > run_s:
                job.fault = UNREACHABLE
                job.reason = f"its job {job_id} ran past the node's bound of {run_s:.0f} s"
            if job.fault:
                cancel([job_id])
                job.ended = t
                del live[job_id]
        running = sum(1 for j in live.values() if j.started is not None)
        line = (f"{label}: {len(wave) - len(live)} of {len(wave)} node(s) done, {running} "
                f"running, {len(live) - running} pending")  # fmt: skip
        if line != last:  # a line when something changed, not one a poll
            show(line)
            last = line
        if live:
            time.sleep(POLL_S)


def run_jobs(jobs: list[NodeJob], scripts: dict[str, str], wave: int, start_s: float,
             run_s: float, show: Callable[[str], None] | None = None,
             now: Callable[[], float] = time.monotonic) -> Run:  # fmt: skip
    """Submit the nodes' jobs ``wave`` at a time, each wave followed to its end before the
    next is submitted; on Ctrl-C (or SIGTERM) cancel what this run submitted and stop."""
    from topobind.interrupt import signals_held, stop_on_signals

    run = Run(jobs)
    say = show or (lambda text: (sys.stderr.write(text + "\n"), sys.stderr.flush()))
    waves = [jobs[i : i + wave] for i in range(0, len(jobs), max(1, wave))]
    run.waves = len(waves)
    submitted: list[str] = []
    try:
        with stop_on_signals("while the nodes' jobs ran"):
            for n, group in enumerate(waves, 1):
                label = f"wave {n}/{len(waves)}"
                for job in group:
                    script = job.output.with_suffix(".sbatch")
                    script.write_text(scripts[job.node])
                    with signals_held():  # the id is known before a Ctrl-C acts
                        job.job_id = submit(script, job.node)
                        job.submitted = now()
                        submitted.append(job.job_id)
                        run.submitted += 1
                say(f"{label}: submitted {len(group)} job(s), one a node "
                    f"({group[0].node} .. {group[-1].node})")  # fmt: skip
                _follow(group, start_s, run_s, say, label, now)
    except Interrupted as exc:
        live = [j.job_id for j in jobs if j.job_id and j.ended is None]
        import signal

        signum = exc.exit_status - 128
        raise Interrupted(signum, signal.Signals(signum).name,
                          f"while the nodes' jobs ran; {cancel(live)}") from None  # fmt: skip
    except TopobindError as exc:
        live = [j.job_id for j in jobs if j.job_id and j.ended is None]
        raise TopobindError(f"{exc}; {cancel(live)}") from None
    return run


def ended_without_report(job: NodeJob) -> None:
    """A job that ended but left no report: its node is UNREACHABLE with what its output
    says last (a job that never ran: NOT STARTED)."""
    if job.fault or job.report.exists():
        return
    tail = "no output"
    try:
        lines = [ln for ln in job.output.read_text(errors="replace")[-4096:].splitlines()
                 if ln.strip()]  # fmt: skip
        tail = lines[-1][:200] if lines else "empty output"
    except OSError:
        pass
    job.fault = UNREACHABLE if job.started is not None or job.state else NOT_STARTED
    job.reason = f"its job {job.job_id} ended {job.state or '?'} without a report ({tail})"


def in_job_env(site: str, results: Path) -> dict[str, str]:
    """The environment of the ReFrame session inside a node's job."""
    from topobind.validation.sites import REPO
    from topobind.validation.sites.reframe_config import IN_JOB_VARIABLE

    env = {IN_JOB_VARIABLE: "1", "TOPOBIND_REFRAME_RESULTS": str(results),
           "TOPOBIND_SITE": site, "TOPOBIND_CALIBRATING": "0",
           "TOPOBIND_ROOT": os.environ.get("TOPOBIND_ROOT", str(REPO))}  # fmt: skip
    # ReFrame's default poll decay leaves 0.5-1.5 s between polls of a check's process once
    # it ran a few seconds: time lost between checks; 0.02 keeps 0.2-0.4 s (a value set wins)
    for k, v in POLL.items():
        env[k] = os.environ.get(k, v)
    for k in ("TOPOBIND_KERNELS_DIR", "TOPOBIND_SITES_DIR", "PATH"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    return env


# --------------------------------------------------------------------------- one pass
#: a job that has not started this long after its submission is cancelled: NOT STARTED
START_S = 300.0
#: a node's bound without a cost model or node_budget, and the slack over either (ReFrame's
#: start-up in the job, the conformance step)
DEFAULT_RUN_S = 1800.0
SLACK_S = 120.0


@dataclass
class Pass:
    """One pass over the nodes: the reports read, each node's job, the conformance findings."""

    parsed: list[object] = field(default_factory=list)  # reframe_report.Report of each node
    report_paths: list[str] = field(default_factory=list)
    run: Run = field(default_factory=Run)
    findings: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skip_reasons: dict[str, str] = field(default_factory=dict)  # test hash -> ReFrame's reason

    @property
    def faults(self) -> list[NodeJob]:
        return [j for j in self.run.jobs if j.fault]


@dataclass(frozen=True)
class PassSpec:
    """What every node's job of a pass runs: the ReFrame options shared by all nodes."""

    site: str
    partition: str
    access: tuple[str, ...]
    exclusive: bool
    tags: str  # ReFrame's -t
    names: tuple[str, ...]
    setvars: dict[str, str]
    extra: tuple[str, ...]  # -x ..., --reruns ...
    wave: int
    run_s: float
    start_s: float = START_S


def reframe_argv(spec: PassSpec, report: Path, prefix: Path) -> list[str]:
    """The ReFrame command line inside a node's job."""
    from topobind.validation.reframe_runs import reframe_exe
    from topobind.validation.sites import REPO

    argv = [*reframe_exe(), "-C", str(REPO / "site_configs" / "reframe_config.py"),
            "-c", str(REPO / "reframe_tests"), "--system", f"{spec.site}:{spec.partition}",
            "-t", spec.tags, "--exec-policy", "serial", "--report-file", str(report),
            "--prefix", str(prefix), "--nocolor"]  # fmt: skip
    for n in spec.names:
        argv += ["-n", n]
    for k, v in spec.setvars.items():
        argv += ["-S", f"{k}={v}"]
    return [*argv, *spec.extra, "-r"]


def conformance_argv(site: str) -> list[str]:
    exe = Path(sys.executable).parent / "topobind"
    tb = [str(exe)] if exe.exists() else [sys.executable, "-m", "topobind.cli.main"]
    return [*tb, "site", "check", site, "--live"]


def node_pass(spec: PassSpec, nodes: Sequence[str], results: Path, label: str,
              show: Callable[[str], None] | None = None) -> Pass:  # fmt: skip
    """One job a node on ``nodes``, waves of ``spec.wave``; the reports read, faults named."""
    import datetime as dt

    from topobind.validation import reframe_report

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{label}-{spec.site}-{spec.partition}-{stamp}"
    logs = results / "logs" / base
    logs.mkdir(parents=True, exist_ok=True)
    (results / "reports").mkdir(parents=True, exist_ok=True)
    env = in_job_env(spec.site, results)
    minutes = int((spec.run_s + SLACK_S + 59) // 60)
    jobs, scripts = [], {}
    for node in nodes:
        job = NodeJob(node, results / "reports" / f"{base}-{node}.json", logs / f"{node}.out",
                      logs / f"{node}.conformance.txt")  # fmt: skip
        argv = reframe_argv(spec, job.report, results / "work" / base / node)
        scripts[node] = job_script(node, spec.access, spec.exclusive, minutes, job.output, env,
                                   conformance_argv(spec.site), argv, job.conformance)  # fmt: skip
        jobs.append(job)
    run = run_jobs(jobs, scripts, spec.wave, spec.start_s, spec.run_s + SLACK_S, show)
    out = Pass(run=run)
    out_notes: list[tuple[str, str]] = []
    for job in jobs:
        ended_without_report(job)
        if job.fault:
            continue
        try:
            out.parsed.append(reframe_report.read_report(str(job.report)))
            out.report_paths.append(str(job.report))
        except TopobindError as exc:
            job.fault, job.reason = UNREACHABLE, f"its report is unreadable: {exc}"[:300]
            continue
        found, notes = _conformance(job)
        job.findings, job.notes = found.get(job.node, []), notes
        out.findings |= found
        out.skip_reasons |= skip_reasons(job.output)
        for note in notes:  # the same note of every node (no node: section): once
            same = note.replace(job.node, "NODE")
            if all(n.replace(n_node, "NODE") != same for n, n_node in out_notes):
                out_notes.append((note, job.node))
    out.notes = [n for n, _ in out_notes]
    return out


def skip_reasons(output: Path) -> dict[str, str]:
    """{test hash: reason} of ReFrame's SKIP lines in a node's job output (its last 16 MiB;
    the report holds no reason for a check skipped before it ran)."""
    from topobind.validation.reframe_runs import skip_reason

    try:
        with open(output, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - (16 << 20)))
            text = fh.read().decode(errors="replace")
    except OSError:
        return {}
    found = (skip_reason(line) for line in text.splitlines())
    return dict(f for f in found if f is not None)


def _conformance(job: NodeJob) -> tuple[dict[str, list[str]], list[str]]:
    """The node's conformance findings from its job's ``topobind site check --live``."""
    try:
        text = job.conformance.read_text(errors="replace")[: 1 << 20]
    except OSError:
        return {}, [f"conformance of {job.node}: its job wrote no {job.conformance.name}"]
    status = 0
    lines = []
    for line in text.splitlines():
        if line.startswith("topobind-conformance-status: "):
            tail = line.rsplit(" ", 1)[-1]
            status = int(tail) if tail.isdigit() else 1
        else:
            lines.append(f"0: {line}")
    return conformance_lines("\n".join(lines), [job.node], status)


def conformance_lines(output: str, nodes: Sequence[str], returncode: int) -> tuple[
        dict[str, list[str]], list[str]]:  # fmt: skip
    """({node: findings}, notes) of the labelled output of the conformance step."""
    found: dict[str, list[str]] = {}
    notes: list[str] = []
    counts: list[str] = []
    for line in output.splitlines():
        task, _, text = line.partition(": ")  # srun --label: 'TASK: text'
        if not task.strip().isdigit():
            continue
        text = text.removeprefix("topobind: error: ")
        node, _, finding = text.partition(": ")  # each finding starts with its node's name
        if node in nodes and ": expected " in finding:
            found.setdefault(node, []).append(finding.rsplit(" (", 1)[0])
        elif "no node: section" in text and not notes:
            notes.append("conformance not checked: " + text.split(" e.g.")[0].split("; add")[0])
        elif re.match(r"^\s+(packages|numa_nodes|l3_domains|cores|smt): \d+$", text) and (
                task.strip() == "0"):  # fmt: skip
            counts.append(text.strip())
    if notes:
        block = ", ".join(counts) or "packages: P, numa_nodes: N, l3_domains: L, cores: C, smt: S"
        notes[0] += f"; add what a good node has, e.g. node: {{{block}}} (the first node's counts)"
    if returncode != 0 and not found and not notes:
        tail = (output.strip().splitlines() or ["(no output)"])[-1]
        notes.append(f"conformance: srun exited with {returncode}: {tail}")
    return found, notes
