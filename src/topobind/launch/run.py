"""Running a program in this job (the engine of ``topobind run``): the scratch directory
every rank reads (:func:`scratch`), the launch prepared once (:func:`topobind.launch.build.build`,
files written), the placement probe run first in the program's place, the groups of nodes
when the job's nodes hold different shares (:mod:`topobind.launch.node_groups`), and the
samples of the running program, and with ``--evidence`` each rank's evidence (``tb-evidence``
between the rank's step and its program: the node's signals and the program's counters,
libtb's ``tb/evidence.h``; one file a rank in the scratch directory, gathered by
:func:`gather_evidence`). :func:`run_job` goes through them in order and returns an
:class:`Outcome`; :mod:`topobind.cli.commands.run` parses the options and prints (told each
stage by a :class:`Stages`)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from topobind.errors import CannotRun, ProbeFailed, TopobindError
from topobind.fsutil import atomic_write_text
from topobind.interrupt import signals_held, stop_on_signals
from topobind.launch import node_groups as pernode
from topobind.launch.build import build, job_shape
from topobind.launch.mpi_launchers.base import Launch
from topobind.launch.node_groups import check_env_per_node, compare_per_node
from topobind.launch.samples import (
    Sample,
    explain,
    judged_threads,
    read_sample_files,
    sample_files,
)
from topobind.launch.shape import JobShape, NodePlan, RunOptions
from topobind.launch.verify import Row, all_ok, compare, parse_probe_output
from topobind.launch.verify_devices import EnvRow, check_env
from topobind.launch.verify_memory import MemRow, ProbeRow, probe_rows
from topobind.launch.verify_memory import check as check_memory
from topobind.measure.evidence import Evidence, read_evidence
from topobind.measure.programs import find_kernel
from topobind.measure.results import read_bytes
from topobind.plan.memory import needs_step
from topobind.plan.model import Plan, PlannedRank
from topobind.plan.request import PlanRequest
from topobind.runner import run_process
from topobind.topo.allocation import Allocation
from topobind.topo.manager import detect
from topobind.topo.topology import Topology, load


@dataclass(frozen=True)
class Job:
    """A launch prepared in ``workdir`` (its files written) and the shape it was built from."""

    shape: JobShape
    launch: Launch
    workdir: str

    def running(self, program: Sequence[str]) -> Launch:
        """The same launch (flags, files) running ``program`` instead."""
        return build(self.shape, program)


@dataclass(frozen=True)
class Verdict:
    """Planned against observed: each thread's row, and per-gpu plans' device variables."""

    rows: list[Row]
    env_rows: list[EnvRow] = field(default_factory=list)
    memory_rows: list[ProbeRow] = field(default_factory=list)  # the probe's memory policy


def _alloc(allocation: Allocation | None) -> Allocation:
    return allocation if allocation is not None else detect()


def workdir(allocation: Allocation | None = None) -> str:
    """Scratch directory for the per-rank step file (and rankfile) every rank reads: on a shared
    file system when the job spans several nodes ($TOPOBIND_WORKDIR, else the job's submit
    directory, else the working directory). A relative $TOPOBIND_WORKDIR is resolved here,
    against the directory topobind starts in, not ignored: the ReFrame checks set ``.`` (their
    stage directory); the ranks, which may start elsewhere, are given the absolute path."""
    base = os.environ.get("TOPOBIND_WORKDIR") or _alloc(allocation).workdir or os.getcwd()
    base = os.path.abspath(base)
    try:
        return os.path.abspath(tempfile.mkdtemp(prefix=".topobind-run-", dir=base))
    except OSError as exc:
        raise TopobindError(
            f"cannot create topobind run's scratch directory in {base}: {exc.strerror}; set "
            "TOPOBIND_WORKDIR to a writable directory (shared by the job's nodes)"
        ) from exc


def local_dir(prefix: str, under: str | None = None) -> str:
    """A new directory on this node only: under ``under``, else $TMPDIR."""
    try:
        return os.path.abspath(tempfile.mkdtemp(prefix=prefix, dir=under))
    except OSError as exc:
        raise TopobindError(f"cannot create a scratch directory in {under or 'TMPDIR'}: "
                            f"{exc.strerror}") from exc  # fmt: skip


def dry_run_dir(allocation: Allocation | None = None) -> str:
    """Where a dry run writes the files its command reads: under $TMPDIR on one node, the
    shared scratch directory of a real run (:func:`workdir`) on several."""
    alloc = _alloc(allocation)
    return workdir(alloc) if alloc.nodes > 1 else local_dir("topobind-dry-run-")


def node_groups(
    req: PlanRequest, launcher: str | None = None, topo: Topology | None = None
) -> list[NodePlan] | None:
    """Plans per group of nodes when the job holds different shares of its nodes (see
    :mod:`topobind.launch.node_groups`); None on one node or when one plan fits every node.
    ``launcher``: the --launcher asked for (none runs one process: refused on several nodes);
    ``topo``: the topology, loaded once by the caller (default: loaded here when needed)."""
    alloc = req.allocation
    if alloc is None or (alloc.nodes < 2 and not alloc.restricted):
        return None
    groups = pernode.plans(req, topo if topo is not None else load(req.topology))
    if groups is not None and launcher == "none":
        raise TopobindError("--launcher none runs one process; the job spans several nodes")
    return groups


def prepare(
    plan: Plan,
    program: Sequence[str],
    opts: RunOptions,
    where: str,
    *,
    sample: bool = False,
    groups: Sequence[NodePlan] = (),
    evidence: bool = False,
) -> Job:
    """Build the launch of ``program`` (one builder: :func:`topobind.launch.build.build`) and write
    its files in ``where``. ``groups``: a plan per group of nodes (``plan`` is the first's);
    ``evidence``: each rank runs ``program`` under ``tb-evidence`` (:func:`evidence_wrapper`)."""
    path = program_path(program[0]) if program else None  # the program's, not the wrapper's
    shape = job_shape(plan, opts, workdir=where, sample=sample, groups=groups, program=path)
    wrapper = evidence_wrapper(where) if evidence and program else []
    launch = build(shape, [*wrapper, *program])
    write_files(launch)
    return Job(shape, launch, where)


#: a rank's evidence file in the scratch directory (tb-evidence expands {rank} and {pid})
EVIDENCE_FILE = "evidence-{rank}-{pid}.json"
MAX_EVIDENCE_FILES = 65536  # ranks of one job
MAX_EVIDENCE_BYTES = 1 << 20  # one rank's document: ~3 KiB


def evidence_wrapper(where: str) -> list[str]:
    """The words before a rank's program that collect its evidence into ``where``."""
    tool = find_kernel("tb-evidence")
    return [str(tool), "--json", os.path.join(where, EVIDENCE_FILE), "--"]


@dataclass(frozen=True)
class RankEvidence:
    """One rank's ``tb-evidence`` document: where, its program's status, the evidence (None:
    ``reason`` says why) and the document as written."""

    host: str
    rank: int | None
    status: int | None
    evidence: Evidence | None
    reason: str
    document: dict[str, object]


def _rank_evidence(path: str) -> RankEvidence:
    name = os.path.basename(path)
    try:
        doc = json.loads(read_bytes(path, MAX_EVIDENCE_BYTES))
    except (TopobindError, ValueError) as exc:
        return RankEvidence("?", None, None, None, f"{name}: {str(exc)[:200]}", {})
    if not isinstance(doc, dict) or doc.get("schema") != "topobind.evidence/1":
        return RankEvidence(
            "?", None, None, None, f"{name}: not a topobind.evidence/1 document", {}
        )
    host, rank, status = doc.get("host"), doc.get("rank"), doc.get("status")
    got = read_evidence(doc)
    return RankEvidence(
        host if isinstance(host, str) else "?",
        rank if type(rank) is int else None,
        status if type(status) is int else None,
        got.evidence,
        got.reason,
        doc,
    )


def gather_evidence(where: str) -> list[RankEvidence]:
    """Every rank's evidence file in ``where`` (at most :data:`MAX_EVIDENCE_FILES`, each read
    bounded; one that is not as documented is kept with its reason), by rank."""
    try:
        with os.scandir(where) as it:
            names = [e.path for e in itertools.islice(it, 4 * MAX_EVIDENCE_FILES)
                     if e.name.startswith("evidence-") and e.name.endswith(".json")]  # fmt: skip
    except OSError:
        return []
    found = [_rank_evidence(p) for p in sorted(names)[:MAX_EVIDENCE_FILES]]
    return sorted(found, key=lambda r: (r.rank is None, r.rank or 0, r.host))


def write_files(launch: Launch) -> None:
    """Write the launch's files (rankfile, per-rank step file), readable by the user only."""
    for path, text in launch.files:
        atomic_write_text(path, text)
        os.chmod(path, 0o600)


def execute(launch: Launch, capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run in a new process group; Ctrl-C / SIGTERM stop the whole group."""
    return run_process(launch.argv, env={**os.environ, **launch.env}, capture=capture)


def exit_status(code: int) -> int:
    """A process's return code as a shell's exit status (128 + signal)."""
    return 128 - code if code < 0 else code


def program_path(name: str) -> str | None:
    """The program's file (a name is looked up on PATH), or None."""
    path = name if "/" in name else shutil.which(name)
    return path if path and os.path.isfile(path) else None


def probe(kernel: str = "whereami") -> str:
    """The placement probe (kernels/bin/whereami; an MPI program's: whereami-mpi-NAME)."""

    try:
        return str(find_kernel(kernel))
    except TopobindError as exc:
        raise TopobindError(f"placement probe not found ({exc}); run 'make kernels'") from exc


def check_program(name: str) -> None:
    """The program must exist here, on the batch host, before any rank is started: a launcher
    would report a missing program in its own words, once per rank."""
    path = name if "/" in name else shutil.which(name)
    if path is None or not os.path.exists(path):
        raise CannotRun(name, FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT)))
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CannotRun(name, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))


def run_probe(launch: Launch) -> str:
    """The probe's output under ``launch``; :class:`ProbeFailed` when it exits non-zero."""
    done = execute(launch, capture=True)
    if done.returncode != 0:
        raise ProbeFailed(done.returncode)
    return done.stdout


def probe_output(job: Job) -> str:
    """The probe run in the program's place (same flags and files). When the program's
    threads are to be sampled, the probe runs with step files that do not sample (its samples
    would be taken for the program's), then the program's files are written back."""
    if job.shape.sample_ms is None:
        return run_probe(job.running([probe(job.shape.probe)]))
    quiet = build(_without_samples(job.shape), [probe(job.shape.probe)])
    write_files(quiet)
    try:
        return run_probe(quiet)
    finally:
        write_files(job.launch)


def _without_samples(shape: JobShape) -> JobShape:
    """The same shape (launcher, files, per-rank step) without sampling the threads."""
    return dataclasses.replace(shape, sample_ms=None, sample_dir=None)


def planned_ranks(plan: Plan) -> list[PlannedRank]:
    """What the probe's output is compared with: each rank's places, CPUs, variables, GPUs."""
    return [
        PlannedRank(r.rank, r.places, r.cpus, r.env, tuple(g.pci or "" for g in r.gpus))
        for r in plan.ranks
    ]


def verify_first(plan: Plan, job: Job) -> Verdict:
    """Run the probe in the program's place (same flags and files) and compare with the plan."""
    out = probe_output(job)
    planned = planned_ranks(plan)
    rows = compare(planned, parse_probe_output(out), nnodes=job.launch.nodes)
    memory = probe_rows(plan, out, judge=needs_step(plan))  # applied by the step: judged
    return Verdict(rows, check_env(planned, out), memory)  # per-gpu: each rank's variables


def verify_groups(groups: Sequence[NodePlan], job: Job) -> Verdict:
    """The probe in the program's place, each group's ranks against its own plan."""

    out = probe_output(job)
    rows = compare_per_node(groups, parse_probe_output(out))
    return Verdict(rows, check_env_per_node(groups, out))


WAITING = "while waiting for the samples of the running program; not verified"


def sampled_rows(plan: Plan, job: Job, sample_ms: int) -> tuple[list[Row], list[Sample]]:
    """The per-rank step's samples of the running program against the plan, or each group's
    samples against its own plan (``job.shape.groups``), waiting up to ``sample_ms`` + 12 s
    for every rank's sample file; and the samples (read once: their memory is checked too)."""
    groups = job.shape.groups
    expected = (
        sum(g.plan.nranks * len(g.hosts) for g in groups)
        if groups
        else plan.nranks * job.launch.nodes
    )
    deadline = time.monotonic() + sample_ms / 1000 + 12.0
    with stop_on_signals(WAITING):
        while time.monotonic() < deadline and len(sample_files(job.workdir)) < expected:
            time.sleep(0.05)
    samples = read_sample_files(sample_files(job.workdir))
    observed = judged_threads(samples)  # each rank's program, without its wrappers
    if groups:
        return explain(compare_per_node(groups, observed, match_threads=True), samples), samples
    planned = [PlannedRank(r.rank, r.places, r.cpus) for r in plan.ranks]
    rows = compare(planned, observed, nnodes=job.launch.nodes, match_threads=True)
    return explain(rows, samples), samples


@contextlib.contextmanager
def scratch(
    local: str | None = None, under: str | None = None, allocation: Allocation | None = None
) -> Iterator[str]:
    """A new scratch directory, removed with everything in it when the block ends, however
    it ends: the job's, shared by its nodes (:func:`workdir`), or, given a name prefix
    ``local``, one on this node only (:func:`local_dir`: under ``under``, else $TMPDIR;
    HPL's on one node)."""
    path = local_dir(local, under) if local is not None else workdir(allocation)
    try:
        yield path
    finally:
        remove_tree(path)


#: how long a scratch directory's removal waits for files still being written into it
REMOVE_WAIT = 3.0


def remove_tree(path: str, wait: float = REMOVE_WAIT) -> None:
    """Remove ``path`` and everything in it, with Ctrl-C and SIGTERM held until it is done (a
    signal that came during the removal acts after it). A rank's step may still be writing
    its sample as its group ends, and ``rmtree`` then meets a directory that is not empty:
    try again until it is gone or ``wait`` seconds have passed (seen on a node with load
    average 90: the directory stayed)."""
    deadline = time.monotonic() + wait
    with signals_held():
        while True:
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path) or time.monotonic() >= deadline:
                return
            time.sleep(0.05)


def dry_job(
    plan: Plan,
    program: Sequence[str],
    opts: RunOptions,
    *,
    sample: bool = False,
    groups: Sequence[NodePlan] = (),
) -> Job:
    """The launch of a dry run, its files written where its command reads them (see
    :func:`dry_run_dir`; the job's shared scratch directory for groups of nodes), kept only
    when the command reads files: ``job.workdir`` is gone when ``job.launch.files`` is empty
    and there are no groups."""
    where = workdir(opts.allocation) if groups else dry_run_dir(opts.allocation)
    try:
        job = prepare(plan, program, opts, where, sample=sample, groups=groups)
    except BaseException:
        remove_tree(where)
        raise
    if not job.launch.files and not groups:
        remove_tree(where)
    return job


class Stages(Protocol):
    """What :func:`run_job` tells its caller as it goes (the command prints)."""

    def prepared(self, job: Job) -> None:
        """The launch is prepared, not yet started (its notes, the plan's warnings)."""

    def probed(self, verdict: Verdict) -> None:
        """The probe's verdict (``verify``); raising stops the job before the launch."""


@dataclass(frozen=True)
class Outcome:
    """A job run: the launch's exit status (a shell's: 128 + signal) and, when the program
    was sampled, the comparison's rows, the samples and the memory they show against each
    rank's planned memory (``memory``: None when the plan places no memory or has groups;
    empty when no sample caught the program)."""

    job: Job
    status: int
    rows: list[Row] | None = None
    samples: list[Sample] | None = None
    memory: list[MemRow] | None = None
    evidence: list[RankEvidence] | None = None  # with --evidence: each rank's, by rank

    @property
    def exit_status(self) -> int:
        """The program's exit status, else 1 when its sampled placement or memory differs
        from the plan."""
        if self.status or self.rows is None:
            return self.status
        ok = all_ok(self.rows) and all(r.ok for r in self.memory or ())
        return 0 if ok else 1


def memory_rows(job: Job, samples: Sequence[Sample]) -> list[MemRow] | None:
    """The running program's memory (the samples that hold it) against each rank's planned
    memory; None when the plan places none (or has groups of nodes)."""
    plan = job.shape.plan
    if job.shape.groups or all(r.memory is None for r in plan.ranks):
        return None
    with_memory = [s for s in samples if s.memory is not None]
    return check_memory(plan, with_memory) if with_memory else []


def run_job(
    plan: Plan,
    program: Sequence[str],
    opts: RunOptions,
    stages: Stages,
    *,
    verify: bool = False,
    verify_running: bool = False,
    groups: Sequence[NodePlan] = (),
    evidence: bool = False,
) -> Outcome:
    """Run ``program`` in this job: check it is here, prepare the launch in one scratch
    directory (removed at the end), run the probe first (``verify``), launch, and compare
    the running program's samples with the plan (``verify_running``; not after Ctrl-C or
    SIGTERM, exit 130 or 143). ``groups``: a plan per group of nodes (``plan``: the first's);
    ``evidence``: each rank's evidence, gathered after the launch (:func:`gather_evidence`)."""
    check_program(program[0])
    with scratch(allocation=opts.allocation) as where:
        job = prepare(plan, program, opts, where, sample=verify_running, groups=groups,
                      evidence=evidence)  # fmt: skip
        stages.prepared(job)
        if verify:
            stages.probed(verify_groups(groups, job) if groups else verify_first(plan, job))
        if not verify_running:
            status = exit_status(execute(job.launch).returncode)
            return Outcome(job, status, evidence=gather_evidence(where) if evidence else None)
        # from the launch on: a Ctrl-C or SIGTERM after the program ended and before the wait
        # for its samples (or one topobind.runner passes on) ends with one line, not a traceback
        with stop_on_signals(WAITING):
            status = exit_status(execute(job.launch).returncode)
            if status in (130, 143):
                return Outcome(job, status)
            rows, samples = sampled_rows(job.shape.plan, job, opts.sample_ms)
        gathered = gather_evidence(where) if evidence else None
        return Outcome(job, status, rows, samples, memory_rows(job, samples), gathered)


@dataclass(frozen=True)
class Checked:
    """``topobind verify``'s outcome: the launch command's exit status (not 0: nothing was
    compared), each thread's row, the device variables' rows and the probe's memory rows."""

    status: int
    rows: list[Row] = field(default_factory=list)
    env_rows: list[EnvRow] = field(default_factory=list)
    memory: list[ProbeRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all_ok(self.rows) and all(r.ok for r in (*self.env_rows, *self.memory))


def verify_command(
    command: Sequence[str],
    plan: Plan | None = None,
    planned: Sequence[PlannedRank] = (),
    groups: Sequence[NodePlan] | None = None,
    nodes: int | None = None,
    allocation: Allocation | None = None,
) -> Checked:
    """Run the probe under a launch command and compare its output with ``plan`` (or the
    ``planned`` ranks of a plan file, or each group's plan); ``nodes``: the nodes the
    command spans (default: the allocation's inside one, else the hosts the probe reports). The
    probe's memory policy is judged where it decides something (several NUMA nodes)."""
    given = Launch(argv=[*command, probe()], env={}, launcher="given")
    done = execute(given, capture=True)
    if done.returncode != 0:
        return Checked(exit_status(done.returncode) or 1)
    if groups is not None:
        found = parse_probe_output(done.stdout)
        return Checked(0, compare_per_node(groups, found), check_env_per_node(groups, done.stdout))
    planned = planned_ranks(plan) if plan is not None else list(planned)
    alloc = _alloc(allocation)
    if nodes is None and alloc.inside:
        nodes = alloc.nodes
    rows = compare(planned, parse_probe_output(done.stdout), nnodes=nodes)
    memory: list[ProbeRow] = []
    if plan is not None:
        topo = plan.topology
        several = len(topo.numa_nodes) + len(topo.cpuless_numa) > 1
        memory = probe_rows(plan, done.stdout, judge=several)
    return Checked(0, rows, check_env(planned, done.stdout), memory)
