"""Each run of ``topobind tune``, made as ``topobind run`` makes it: per candidate, the plan's
launch is prepared once through :mod:`topobind.launch.run` (the launcher, per-rank step,
files and environment a job script's ``topobind run`` gets; inside a Slurm allocation over
all its nodes, a plan per group of nodes where they differ) and verified once with the
placement probe in the program's place (same flags and files) before the candidate's first
run; then every run executes that launch and is timed (``time.monotonic`` around the
launch, topobind's own work outside it), its output sent to a file of the session (read up
to :data:`MAX_OUTPUT_CHARS` for ``--metric``, searched in a forked child for at most
:data:`METRIC_TIMEOUT_S`) or to /dev/null. The baseline is the program
launched plainly by the launcher ``topobind run`` would choose (:func:`baseline_launch`):
by itself on one rank, ``srun`` or ``flux run`` inside an allocation, the program's
``mpirun`` for several ranks outside; no binding asked for.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from topobind.errors import CannotRun, Interrupted, ProbeFailed, TopobindError, plural
from topobind.launch import run as jobrun
from topobind.launch.shape import RunOptions
from topobind.launch.verify import all_ok
from topobind.measure import cpuload, jobcpu
from topobind.plan import request
from topobind.plan.memory import check_here
from topobind.plan.model import Plan
from topobind.plan.request import PlanRequest
from topobind.runner import run_process
from topobind.tune.candidates import Planned, request_fields
from topobind.tune.session import Candidate, Measured

#: the program's output searched for --metric (the first bytes; the rest is not read)
MAX_OUTPUT_CHARS = 4 << 20
#: the most one search of a run's output for --metric may take (a linear pattern needs
#: milliseconds for MAX_OUTPUT_CHARS)
METRIC_TIMEOUT_S = 5.0
#: a run may go past the budget's end by this share of the budget (at least GRACE_MIN_S, at
#: most GRACE_MAX_S); then it is killed and counted as failed
GRACE_SHARE, GRACE_MIN_S, GRACE_MAX_S = 0.1, 5.0, 60.0
#: bytes of the matched group read back from the search (one write under PIPE_BUF: atomic)
MAX_GROUP = 1024


def grace_s(budget_s: float) -> float:
    """How long a run may go past the budget's end before it is killed."""
    return min(GRACE_MAX_S, max(GRACE_MIN_S, GRACE_SHARE * budget_s))


def compile_metric(text: str | None) -> re.Pattern[str] | None:
    """``--metric REGEX``: a regular expression with a group (the number)."""
    if text is None:
        return None
    try:
        pattern = re.compile(text, re.MULTILINE)
    except (re.error, RecursionError, OverflowError) as exc:  # nested too deep, a{10**20}
        why = str(exc)[:120] if isinstance(exc, re.error) else type(exc).__name__
        raise TopobindError(f"--metric {text[:80]!r}: not a regular expression ({why})") from None
    if pattern.groups < 1:
        raise TopobindError(f"--metric {text[:80]!r} has no group; put the number in parentheses, "
                            "e.g. --metric 'time: ([0-9.]+) s'")  # fmt: skip
    return pattern


def figure(output: str, pattern: re.Pattern[str]) -> tuple[float | None, str | None]:
    """The first group of the first match as a number, or why there is none."""
    found, why = search_bounded(pattern, output[:MAX_OUTPUT_CHARS], METRIC_TIMEOUT_S)
    if why:
        return None, why
    if found is None:
        return None, "no match for --metric in its output"
    return number(found)


#: a figure: ASCII digits with at most one decimal point and an optional exponent
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def number(found: str) -> tuple[float | None, str | None]:
    """The matched group as a number, or why not: a comma is refused (``2,5`` is two and a
    half in much of the world and 25 in the rest: put the group round digits and a point)."""
    text = found.strip()
    if "," in text:
        return None, (f"--metric matched {found[:30]!r}: a comma (a decimal or a thousands "
                      "separator?); match digits and a point only, e.g. ([0-9.]+)")  # fmt: skip
    if not NUMBER.fullmatch(text):
        return None, f"--metric matched {found[:30]!r}, not a number (ASCII digits, one point)"
    value = float(text)
    if not math.isfinite(value):
        return None, f"--metric matched {found[:30]!r}, not a finite number"
    return value, None


def search_bounded(
    pattern: re.Pattern[str], text: str, seconds: float
) -> tuple[str | None, str | None]:
    """(the first group of the first match or None, why there is no answer). Python's ``re``
    has no time bound and a user's pattern can backtrack for ever (``(a+)+$`` on 40 ``a``s:
    hours; no cut of the text bounds that), so the search runs in a forked child killed after
    ``seconds``; the group's first :data:`MAX_GROUP` bytes come back through a pipe."""
    import select  # here: only a --metric session forks

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: search, answer, exit without running the parent's cleanup
        try:
            os.close(r)
            match = pattern.search(text)
            group = None if match is None else match.group(1)
            answer = b"N" if group is None else b"M" + group.encode(errors="replace")[:MAX_GROUP]
            os.write(w, answer)
        finally:
            os._exit(0)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], seconds)
        answer = os.read(r, MAX_GROUP + 1) if ready else None
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if answer is None:
        return None, (f"--metric searched this run's output for more than {seconds:g} s (a "
                      "pattern that backtracks: anchor it, or avoid nested repeats)")  # fmt: skip
    if not answer:
        return None, "--metric: the search of this run's output failed (out of memory?)"
    return (answer[1:].decode(errors="replace") if answer[:1] == b"M" else None), None


class Launcher:
    """The runs of one session: each candidate's launch prepared and verified on first use,
    in a scratch directory of this job (removed when the session ends)."""

    def __init__(self, program: Sequence[str], req: PlanRequest, opts: RunOptions,
                 metric: re.Pattern[str] | None, budget_s: float, where: str) -> None:  # fmt: skip
        if opts.allocation is None:  # the allocation of the request, made once
            opts = replace(opts, allocation=req.allocation)
        self.program, self.req, self.opts = list(program), req, opts
        self.metric, self.where = metric, where
        self.grace = grace_s(budget_s)
        self.deadline = time.monotonic() + budget_s  # the session's end (its clock)
        self.plans: dict[Candidate, Plan | None] = {}
        self.launches: dict[Candidate, tuple[list[str], dict[str, str]] | str] = {}
        self.verdicts: dict[Candidate, str] = {}  # "verified ...", or why the launch failed
        self.exports: dict[Candidate, dict[str, str]] = {}  # what each launch exports

    def add(self, planned: Sequence[Planned]) -> None:
        for p in planned:
            self.plans[p.candidate] = p.plan

    def __call__(self, cand: Candidate) -> Measured:
        launch = self.launches.get(cand)
        if launch is None:
            launch = self.launches[cand] = self._prepare(cand)
        if isinstance(launch, str):
            return Measured(None, 0.0, launch)
        argv, env = launch
        out = os.path.join(self.where, "output")  # the run's output, read up to a bound
        before, steps = self._load_sample()
        t0 = time.monotonic()
        limit = max(1.0, self.deadline + self.grace - t0)  # what is left, and the grace
        name = os.path.basename(self.program[0])
        try:  # the program's output goes to a file (or nowhere), not into memory
            done = run_process(to_file(argv, out if self.metric else os.devnull), env=env,
                               timeout=limit, what=name)  # fmt: skip
        except CannotRun as exc:
            return Measured(None, time.monotonic() - t0, str(exc))
        except TopobindError:  # past the budget and its grace: killed (its process group)
            return Measured(None, time.monotonic() - t0, f"{name} did not finish within "
                            f"{limit:.0f} s (the budget left and {self.grace:.0f} s of grace): "
                            "killed", timed_out=True)  # fmt: skip
        finally:
            if steps is not None:
                steps.stop()
        wall = time.monotonic() - t0
        status = jobrun.exit_status(done.returncode)
        if status in (130, 143):
            return Measured(None, wall, "interrupted", interrupted=True)
        if status:
            return Measured(None, wall, f"exit status {status}")
        load = None  # where the job's steps went unread, their time would count as other work
        if steps is None or not steps.error:
            job_s = steps.seconds()[0] if steps is not None else 0.0
            after = cpuload.cpu_sample() if before else None
            load = cpuload.load_between(before, after, also_own=job_s)
        share = None if load is None else load.share
        if self.metric is None:
            return Measured(wall, wall, load=share)
        value, why = figure(_head(out), self.metric)
        return Measured(value, wall, why, load=share)

    def _load_sample(self) -> tuple[cpuload.CpuSample | None, jobcpu.Sampler | None]:
        """The host's CPU time before a run, and inside a Slurm job the sampler of its steps
        on this node (their tasks are children of each step's slurmstepd, not of this
        process: without it their time would count as other work), as validate's checks
        measure it (measure/jobcpu.py). None inside a Flux allocation (its jobs' processes
        cannot be told from other work) or where /proc cannot be read."""
        alloc = self.opts.allocation
        if alloc is None or alloc.manager == "none":
            return cpuload.cpu_sample(), None
        if alloc.manager != "slurm" or not alloc.job_id:
            return None, None
        try:
            steps = jobcpu.Sampler(os.getpid(), alloc.job_id, None)
        except OSError:
            return None, None
        before = cpuload.cpu_sample()
        steps.start()
        return before, steps

    def _prepare(self, cand: Candidate) -> tuple[list[str], dict[str, str]] | str:
        plan = self.plans[cand]
        if plan is None:
            self.verdicts[cand] = "not verified: launched plainly, nothing planned"
            try:
                return baseline_launch(self.program, self.first_plan(), cand.threads, self.opts)
            except TopobindError as exc:
                return self._failed(cand, f"no plain launch here: {exc}")
        try:  # as topobind run checks: NUMA nodes here and allowed; the shim reaches it
            check_here(plan, jobrun.program_path(self.program[0]) or self.program[0])
        except TopobindError as exc:
            return self._failed(cand, f"cannot run here: {exc}")
        where = os.path.join(self.where, f"c{len(self.launches)}")
        os.mkdir(where, 0o700)
        req = request.parse(cand.layout or "compact", **request_fields(self.req, cand))
        groups = jobrun.node_groups(req) or []  # the job's nodes differ: a plan per group
        if groups:
            plan = groups[0].plan
        job = jobrun.prepare(plan, self.program, self.opts, where, groups=groups)
        try:
            verdict = (jobrun.verify_groups(groups, job) if groups
                       else jobrun.verify_first(plan, job))  # fmt: skip
        except ProbeFailed as exc:
            if exc.exit_status in (130, 143):  # Ctrl-C / SIGTERM during the probe: the end
                signum = exc.exit_status - 128
                raise Interrupted(signum, signal.Signals(signum).name, "while verifying") from None
            return self._failed(cand, f"verification failed: {exc}")
        bad = [r for r in verdict.rows if r.status != "OK"]
        if not all_ok(verdict.rows):
            return self._failed(cand, f"verification failed: {len(bad)} of "
                                f"{len(verdict.rows)} threads off their planned CPUs")  # fmt: skip
        if not all(r.ok for r in verdict.env_rows) or not all(r.ok for r in verdict.memory_rows):
            return self._failed(cand, "verification failed: memory policy or device "
                                "variables differ from the plan")  # fmt: skip
        self.verdicts[cand] = (
            f"verified: {plural(len(verdict.rows), 'thread')} on their planned CPUs"
        )
        self.exports[cand] = dict(job.launch.env)
        return job.launch.argv, {**os.environ, **job.launch.env}

    def _failed(self, cand: Candidate, why: str) -> str:
        self.verdicts[cand] = why
        return why

    def first_plan(self) -> Plan:
        """A planned candidate's plan (the baseline runs as many ranks, with their launcher)."""
        return next(p for p in self.plans.values() if p is not None)


def to_file(argv: Sequence[str], path: str) -> list[str]:
    """``argv`` with its stdout and stderr sent to ``path`` (a shell that execs it: the same
    process, for every candidate and the baseline alike)."""
    return ["/bin/sh", "-c", 'exec "$@" >"$0" 2>&1', path, *argv]


def _head(path: str) -> str:
    """The first :data:`MAX_OUTPUT_CHARS` of a run's output (replacing bytes not UTF-8)."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_OUTPUT_CHARS).decode("utf-8", errors="replace")
    except OSError:
        return ""


def baseline_launch(
    program: Sequence[str], plan: Plan, threads: int | None, opts: RunOptions
) -> tuple[list[str], dict[str, str]]:
    """What the user runs without topobind: the launcher ``topobind run`` would choose for
    the candidates' plan (:func:`topobind.launch.resolve.resolve`: none for one rank, srun
    or flux run inside Slurm or Flux, the program's mpirun outside), asked for its plain
    launch (:meth:`~topobind.launch.mpi_launchers.base.Launcher.plain`: the job's nodes,
    the plan's ranks on each, no binding)."""
    from topobind.launch.resolve import resolve

    alloc = opts.allocation
    path = jobrun.program_path(program[0]) or program[0]
    found = resolve(plan, opts.launcher, opts.mpi, program=path, allocation=alloc)
    spans = bool(found.launcher.needs_manager)  # srun, flux run: over the job's nodes
    nodes = alloc.nodes if spans and alloc is not None else 1
    launch = found.launcher.plain(found.path, nodes, plan.nranks, program)
    env = {**os.environ, **found.env, **launch.env}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return launch.argv, env


@contextmanager
def session_dir() -> Iterator[str]:
    """The session's scratch directory (the job's, shared by its nodes), removed at the end."""
    with jobrun.scratch() as where:
        yield where
