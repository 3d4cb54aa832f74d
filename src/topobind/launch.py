"""One launch path: from the job's shape to the command line (run, verify, bench, HPL).

:class:`JobShape` holds the whole job: the plan of every node (or a plan per group of hosts),
the nodes, the launcher, the MPI flavour, the per-rank step and the extra variables. One
builder, :func:`build`, turns it into a :class:`Launch` (argv, environment, the files to
write); :func:`topobind.runner.run_process` runs it.

- Inside a Slurm allocation (``SLURM_JOB_ID`` set) the default launcher is ``srun``;
  outside, ``mpirun`` for several ranks and no launcher for one.
- The OpenMPI flavour (4.x or 5.x) is read from ``mpirun --version``.
- The per-rank step is ``kernels/bin/rankexec`` (C, no interpreter): it reads the line of its
  local rank in a file prepared once by ``topobind run`` (exact ``OMP_PLACES`` and any other
  per-rank variable) and execs the program. It is left out where the launcher's mask and one
  uniform environment already give every thread its planned PU.
- On several Slurm nodes the plan is applied on each: ``srun --nodes=N --ntasks=R*N``,
  ``mpirun -np R*N``, and a rankfile with one block per node (host names from
  ``scontrol show hostnames``) when the flags need one.
- When the job's nodes hold different shares (:mod:`topobind.pernode` makes a plan per group
  of nodes), ``groups`` carries them: one plain srun step (tasks in node order from
  ``SLURM_HOSTFILE``, ``--cpu-bind=none``; one step file with a section per group, whose
  lines bind each rank to its CPUs and export its places), or one rankfile naming every
  host and one mpirun application context per group, each group's ranks running the
  per-rank step with the group's own file ``rankexec-K.txt``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from topobind import slurm
from topobind.emit.omp import omp_env, rank_env
from topobind.emit.openmpi import affinity_restricted, openmpi_argv
from topobind.emit.srun import STEP_NOTE, srun_argv
from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text
from topobind.kernels import find_kernel
from topobind.plan import Plan
from topobind.topology import Topology, format_list

LAUNCHERS = ("srun", "mpirun", "none")
RANK_STEP_HEADER = "topobind-rankexec 1"
#: Version 2 adds ``%cpus=LIST`` fields: rankexec binds the rank itself (a rankexec built
#: before it refuses the file instead of ignoring the binding).
RANK_STEP_HEADER_BIND = "topobind-rankexec 2"


@dataclass(frozen=True)
class NodePlan:
    """The plan of a group of the job's nodes when the nodes hold different shares: each of
    ``hosts`` runs ``plan``; ``first_rank``: the global rank of the plan's rank 0 on
    ``hosts[0]`` (ranks in node order, block); ``node``: the whole node's topology (not
    restricted to the CPUs the job holds; OpenMPI 5 rankfiles number its cores);
    ``about``: the group's share in words (see :func:`topobind.pernode.describe`)."""

    hosts: tuple[str, ...]
    plan: Plan
    first_rank: int = 0
    node: Topology | None = None
    about: str = ""


@dataclass(frozen=True)
class JobShape:
    """Everything the command line depends on.

    ``plan``: every node's plan; ``groups``: instead, a plan per group of nodes (the nodes
    hold different shares; ``plan`` is then the first group's). ``nodes``: how many nodes;
    ``hosts``: their names when known (needed by rankfiles that span nodes). ``rank_step``:
    run the per-rank step (rankexec) with the file ``rank_file`` (a group's under mpirun:
    ``rankexec-K.txt`` beside it); ``sample_ms``: the step also samples where the program's
    threads run that many ms after start (written to ``sample_dir``). ``env``: extra
    variables for every rank; ``forward``: variables mpirun must pass by name (``-x``)."""

    plan: Plan
    launcher: str = "none"
    nodes: int = 1
    hosts: tuple[str, ...] = ()
    groups: tuple[NodePlan, ...] = ()
    mpirun: str | None = None
    mpi: str | None = None  # "openmpi4" | "openmpi5"
    rank_step: bool = False
    rank_file: str = "rankexec.txt"
    rankfile_path: str = "topobind.rankfile"
    sample_ms: int | None = None
    sample_dir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    forward: tuple[str, ...] = ()


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]  # variables to export on top of the caller's environment
    launcher: str
    mpi: str | None = None  # "openmpi4" | "openmpi5"
    files: tuple[tuple[str, str], ...] = ()  # (path, text) to write (mode 0600) before
    notes: list[str] = field(default_factory=list)
    nodes: int = 1  # nodes the launch spans


def in_slurm(env: dict[str, str] | None = None) -> bool:
    return slurm.in_slurm(env)


def slurm_nodes(env: dict[str, str] | None = None) -> int:
    return slurm.nodes(env)


def find_mpirun(prefer: str | None = None) -> tuple[str, str]:
    """(path, flavour) of the mpirun to use: ``openmpi4`` or ``openmpi5``."""
    candidates: list[str] = []
    if prefer == "openmpi4":
        candidates = ["/usr/bin/mpirun"]
    elif prefer == "openmpi5":
        candidates = [os.path.join(os.path.dirname(sys.executable), "mpirun")]
    found = [c for c in candidates if os.path.exists(c)] or [
        p for p in [shutil.which("mpirun")] if p
    ]
    if not found:
        raise TopobindError("mpirun not found; install OpenMPI (make setup) or use --launcher srun")
    return found[0], mpi_flavour(found[0])


def mpi_flavour(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Open MPI\)?\s+(\d+)\.", out)
    if not m:
        raise TopobindError(f"{path} is not OpenMPI (its --version says {out.strip()[:60]!r})")
    major = int(m.group(1))
    if major not in (4, 5):
        raise TopobindError(f"{path} is OpenMPI {major}.x; topobind emits flags for 4.x and 5.x")
    return f"openmpi{major}"


def choose_launcher(plan: Plan, requested: str | None) -> str:
    if requested == "srun" and not in_slurm():
        raise TopobindError(
            "--launcher srun needs a Slurm allocation (SLURM_JOB_ID unset); use salloc/sbatch "
            "or --launcher mpirun"
        )
    if requested:
        if requested not in LAUNCHERS:
            raise TopobindError(
                f"unknown launcher {requested!r}; choose one of {', '.join(LAUNCHERS)}"
            )
        return requested
    if in_slurm():
        return "srun"
    return "mpirun" if plan.nranks > 1 else "none"


def launcher_masks(plan: Plan, launcher: str) -> list[tuple[int, ...]]:
    """The CPU mask each rank gets from the launcher's binding: srun masks and hwthread
    bindings (and rankfiles under a restricted mask) are the planned PUs; ``--bind-to core``
    whole cores."""
    if (
        launcher == "srun"
        or plan.smt
        or plan.topology.smt == 1
        or affinity_restricted(plan.topology)
    ):
        return [r.cpus for r in plan.ranks]
    return [plan.core_pus(r) for r in plan.ranks]


def uniform_env_is_exact(plan: Plan, launcher: str) -> bool:
    """True when ``OMP_PLACES=threads`` inside each rank's launcher mask gives every thread
    its planned PU (libgomp and LLVM build that list in increasing OS order): no per-rank
    step needed. Per-rank variables (per-gpu plans' device variables) always need it."""
    if plan.nranks == 1:
        return True  # its exact places (and variables) are exported to it directly
    if any(r.env for r in plan.ranks):
        return False
    return all(
        list(r.places) == [(pu,) for pu in sorted(mask)]
        for r, mask in zip(plan.ranks, launcher_masks(plan, launcher), strict=True)
    )


def job_shape(
    plan: Plan,
    launcher: str | None = None,
    mpi: str | None = None,
    *,
    rank_step: str = "auto",
    workdir: str = ".",
    sample_ms: int | None = None,
    env: Mapping[str, str] | None = None,
    forward: Sequence[str] = (),
    mpirun: str | None = None,
    groups: Sequence[NodePlan] = (),
    nodes: int | None = None,
) -> JobShape:
    """The shape of this job: launcher, nodes (from Slurm), MPI flavour, per-rank step.

    ``rank_step``: ``auto`` (only where needed, or to sample), ``always`` or ``never``;
    ``nodes``: default, the job's nodes inside Slurm (1 without a launcher); ``groups``: a
    plan per group of nodes (always with the per-rank step)."""
    if groups and launcher == "none":
        raise TopobindError("--launcher none runs one process; the job spans several nodes")
    which = choose_launcher(plan, launcher)
    if nodes is None:
        nodes = slurm_nodes() if in_slurm() and which != "none" else 1
    if which == "none" and plan.nranks > 1:
        raise TopobindError(
            f"the plan has {plan.nranks} ranks; --launcher none runs one process "
            "(use --ranks 1 or a launcher)"
        )
    path, flavour = None, None
    if which == "mpirun":
        path, flavour = (mpirun, mpi_flavour(mpirun)) if mpirun else find_mpirun(mpi)
    if rank_step not in ("auto", "always", "never"):
        raise TopobindError(f"rank step {rank_step!r}: choose auto, always or never")
    step = rank_step == "always" or sample_ms is not None or bool(groups)
    if rank_step == "auto" and which != "none":
        step = step or not uniform_env_is_exact(plan, which)
    if rank_step == "never" and sample_ms is not None:
        raise TopobindError("sampling the program's threads needs the per-rank step")
    return JobShape(
        plan=plan,
        launcher=which,
        nodes=nodes,
        groups=tuple(groups),
        mpirun=path,
        mpi=flavour,
        rank_step=step,
        rank_file=os.path.join(workdir, "rankexec.txt"),
        rankfile_path=os.path.join(workdir, "rankfile"),
        sample_ms=sample_ms,
        sample_dir=workdir if sample_ms is not None else None,
        env=dict(env or {}),
        forward=tuple(forward),
    )


def rank_step_text(shape: JobShape, plan: Plan | None = None) -> str:
    """The file rankexec reads: one line per local rank of ``plan`` (default: the shape's)
    with its variables (see kernels/rankexec.c)."""
    plan = plan or shape.plan
    lines = _step_prologue(
        shape, RANK_STEP_HEADER, f"layout {plan.layout}; one line per local rank"
    )
    lines.append("@*")
    lines += _rank_lines(shape, plan, bind=False)
    return "\n".join(lines) + "\n"


def groups_step_text(shape: JobShape) -> str:
    """One rankexec file for every group of nodes (version 2): a section per group, each
    local rank's line binding it to its planned CPUs (``%cpus=``) before its variables."""
    about = f"layout {shape.groups[0].plan.layout}; a section per group of nodes"
    lines = _step_prologue(shape, RANK_STEP_HEADER_BIND, about)
    for g in shape.groups:
        lines += [f"# {g.about}" if g.about else "#", "@" + ",".join(g.hosts)]
        lines += _rank_lines(shape, g.plan, bind=True)
    return "\n".join(lines) + "\n"


def _step_prologue(shape: JobShape, header: str, about: str) -> list[str]:
    """A step file's first lines: its header, a comment, the ``%sample`` directive if any."""
    lines = [header, f"# {about}"]
    if shape.sample_ms is not None:
        lines.append(f"%sample {shape.sample_dir} {shape.sample_ms}")
    return lines


def _rank_lines(shape: JobShape, plan: Plan, bind: bool) -> list[str]:
    """``RANK<TAB>[%cpus=MASK<TAB>]NAME=VALUE...`` for each local rank of ``plan``."""
    lines = []
    masks = launcher_masks(plan, "srun") if bind else [()] * plan.nranks
    for r, mask in zip(plan.ranks, masks, strict=True):
        env = {**rank_env(plan, r.rank), **shape.env}
        for k, v in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or "\t" in v or "\n" in v:
                raise TopobindError(f"per-rank variable {k}={v!r} cannot be passed on")
        fields = [str(r.rank), *([f"%cpus={format_list(mask)}"] if bind else [])]
        lines.append("\t".join([*fields, *(f"{k}={v}" for k, v in env.items())]))
    return lines


def group_rank_file(shape: JobShape, k: int) -> str:
    """The per-rank step file of group ``k`` (beside the shape's own step file)."""
    return os.path.join(os.path.dirname(shape.rank_file), f"rankexec-{k}.txt")


def rank_step_argv(shape: JobShape, rank_file: str | None = None) -> list[str]:
    try:
        exe = find_kernel("rankexec")
    except TopobindError as exc:
        raise TopobindError(f"the per-rank step is not built ({exc})") from exc
    return [str(exe), rank_file or shape.rank_file, "--"]


def job_env(shape: JobShape) -> dict[str, str]:
    """The variables every rank gets (the per-rank step adds each rank's exact places). Without
    a known launcher (``topobind env``: the script launches) the places are ``cores``."""
    plan = shape.plan
    exact = shape.launcher != "none" and uniform_env_is_exact(plan, shape.launcher)
    uniform = "threads" if not shape.rank_step and plan.nranks > 1 and exact else None
    one = dict(plan.ranks[0].env) if plan.nranks == 1 else {}  # a single rank's variables
    return {**omp_env(plan, uniform), **one, "TOPOBIND_LAYOUT": plan.layout, **shape.env}


def build(shape: JobShape, program: Sequence[str]) -> Launch:
    """The command (and the files to write first) that runs ``program`` in this job shape."""
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    if shape.groups:
        return _build_groups(shape, program)
    plan = shape.plan
    env = job_env(shape)
    files: list[tuple[str, str]] = []
    step: list[str] = []
    if shape.rank_step:
        files.append((shape.rank_file, rank_step_text(shape)))
        step = rank_step_argv(shape)
    if shape.launcher == "none":
        return Launch(argv=[*step, *program], env=env, launcher="none", files=tuple(files))
    if shape.launcher == "srun":
        s = srun_argv(plan, nodes=shape.nodes)
        # The srun line is topobind's own (no -c/--exact/--hint, masks from the job's CPUs):
        # the advice for hand-written srun lines does not apply.
        notes = [n for n in s.notes if n != STEP_NOTE]
        return Launch(
            argv=[*s.argv, *step, *program],
            env=env,
            launcher="srun",
            files=tuple(files),
            notes=notes,
            nodes=shape.nodes,
        )
    return _build_mpirun(shape, program, env, files, step)


def _build_mpirun(
    shape: JobShape,
    program: Sequence[str],
    env: dict[str, str],
    files: list[tuple[str, str]],
    step: list[str],
) -> Launch:
    plan, version = shape.plan, (5 if shape.mpi == "openmpi5" else 4)
    m = openmpi_argv(
        plan, version, rankfile_path=shape.rankfile_path, exact_places=True, nodes=shape.nodes
    )
    if m.rankfile is not None:
        if shape.nodes > 1:  # the rankfile names every node
            hosts = list(shape.hosts) or slurm.hostnames()
            m = openmpi_argv(
                plan, version, rankfile_path=shape.rankfile_path, exact_places=True, hosts=hosts
            )
        files.append((shape.rankfile_path, m.rankfile or ""))
    forward = [a for v in shape.forward for a in ("-x", v)]
    env |= _root_env()
    # Exported variables reach the local ranks (OpenMPI forwards the launching environment);
    # ``forward`` names those that must also reach other nodes' ranks.
    return Launch(
        argv=[shape.mpirun or "mpirun", *m.argv[1:], *forward, *step, *program],
        env=env,
        launcher="mpirun",
        mpi=shape.mpi,
        files=tuple(files),
        notes=m.notes,
        nodes=shape.nodes,
    )


def _root_env() -> dict[str, str]:
    if os.geteuid() != 0:
        return {}
    return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _build_groups(shape: JobShape, program: Sequence[str]) -> Launch:
    """A plan per group of nodes: one plain srun step whose per-rank step binds each rank,
    or one mpirun with a rankfile and an application context per group (each group's
    per-rank step file)."""
    if shape.launcher not in ("srun", "mpirun"):
        raise TopobindError("--launcher none runs one process; the job spans several nodes")
    env = {"TOPOBIND_LAYOUT": shape.plan.layout, **shape.env}
    nodes = sum(len(g.hosts) for g in shape.groups)
    if shape.launcher == "srun":
        return _build_srun_groups(shape, program, env, nodes)
    files = [
        (group_rank_file(shape, k), rank_step_text(shape, g.plan))
        for k, g in enumerate(shape.groups)
    ]
    steps = [[*rank_step_argv(shape, path), *program] for path, _ in files]
    version = 5 if shape.mpi == "openmpi5" else 4
    files.append((shape.rankfile_path, rankfile_groups(shape.groups, version)))
    argv = mpirun_argv_groups(shape.groups, steps, version, shape.rankfile_path, shape.forward)
    return Launch(
        argv=[shape.mpirun or "mpirun", *argv[1:]],
        env=env | _root_env(),
        launcher="mpirun",
        mpi=shape.mpi,
        files=tuple(files),
        nodes=nodes,
    )


def _build_srun_groups(
    shape: JobShape, program: Sequence[str], env: dict[str, str], nodes: int
) -> Launch:
    """One plain srun step over every group's nodes. ``SLURM_HOSTFILE`` with
    ``--distribution=arbitrary`` puts the tasks in node order (each group's ranks per node),
    ``--cpu-bind=none`` leaves the binding to the per-rank step, whose one file holds a
    section per group: each rank binds itself to its planned CPUs and exports its places.
    (Not a heterogeneous step, ``srun A : B``: Slurm 22.05's srun can hang at the end of one
    under mpi/pmix, see docs/job-scripts.md.)"""
    hostfile = os.path.join(os.path.dirname(shape.rank_file), "hostfile")
    hosts = [h for g in shape.groups for h in g.hosts for _ in range(g.plan.nranks)]
    files = ((shape.rank_file, groups_step_text(shape)), (hostfile, "\n".join(hosts) + "\n"))
    # The same count on every node overrides the job's SLURM_NTASKS_PER_NODE, which an
    # explicit --ranks may contradict (srun warns, then ignores it); different counts cannot
    # be said with it (srun warns that it ignores any).
    counts = {g.plan.nranks for g in shape.groups}
    per_node = [f"--ntasks-per-node={counts.pop()}"] if len(counts) == 1 else []
    argv = [
        "srun", f"--nodes={nodes}", f"--ntasks={len(hosts)}", *per_node,
        "--distribution=arbitrary", "--cpu-bind=none", *rank_step_argv(shape), *program,
    ]  # fmt: skip
    env = {**env, "SLURM_HOSTFILE": hostfile}
    return Launch(argv=argv, env=env, launcher="srun", files=files, nodes=nodes)


def _omp_prefix(plan: Plan) -> list[str]:
    """``env K=V ...`` with the plan's OpenMP variables (srun's --export cannot carry the
    commas of OMP_PLACES; mpirun's application contexts take no variables of their own)."""
    return ["env", *(f"{key}={value}" for key, value in omp_env(plan).items())]


def rankfile_groups(groups: Sequence[NodePlan], version: int) -> str:
    """One OpenMPI rankfile naming every host with its group's slots, ranks in node order.
    4.x: OS PU indexes (``--mca rmaps_rank_file_physical 1``). 5.x: hwloc logical core (PU
    with SMT) indexes of the WHOLE node: PRRTE numbers them over the node, not over the CPUs
    the job holds there (a plan restricted to CPU 1 of 2 must say slot=1, not 0)."""
    out = [f"# topobind rankfile for OpenMPI {version}.x, a plan per group of nodes"]
    rank = 0
    for g in groups:
        node = g.node if g.node is not None else g.plan.topology
        core_of = {pu: i for i, core in enumerate(node.cores) for pu in core.pus}
        pu_logical = node.pu_logical()
        out.append(f"# {g.about or ','.join(g.hosts)}")
        for host in g.hosts:
            for r in g.plan.ranks:
                if version == 5:
                    index = pu_logical if g.plan.smt else core_of
                    ids = sorted({index[pu] for pu in r.cpus})
                else:
                    ids = list(r.cpus) if g.plan.smt else list(g.plan.core_pus(r))
                out.append(f"rank {rank}={host} slot={format_list(ids)}")
                rank += 1
    return "\n".join(out) + "\n"


def mpirun_argv_groups(
    groups: Sequence[NodePlan],
    steps: Sequence[list[str]],
    version: int,
    rankfile_path: str,
    forward: Sequence[str] = (),
) -> list[str]:
    """``mpirun`` (argv[0] to be replaced by its path) with the rankfile of
    :func:`rankfile_groups` and one application context per group."""
    smt = any(g.plan.smt for g in groups)
    bind = "hwthread" if smt else "core"
    if version == 5:
        mod = ":hwtcpus" if smt else ""
        argv = ["mpirun", "--map-by", f"rankfile:file={rankfile_path}{mod}", "--bind-to", bind]
    else:
        argv = ["mpirun", "--rankfile", rankfile_path, "--mca", "rmaps_rank_file_physical", "1"]
    argv += [a for v in forward for a in ("-x", v)]
    for k, (g, cmd) in enumerate(zip(groups, steps, strict=True)):
        if k:
            argv.append(":")
        argv += ["-np", str(g.plan.nranks * len(g.hosts)), *_omp_prefix(g.plan), *cmd]
    return argv


def write_files(launch: Launch) -> None:
    """Write the launch's files (rankfile, per-rank step file), readable by the user only."""

    for path, text in launch.files:
        atomic_write_text(path, text)
        os.chmod(path, 0o600)


#: The launcher's rank variables, innermost launcher first: an mpirun inside a Slurm job
#: inherits the batch step's SLURM_PROCID=0 and SLURM_LOCALID=0 in every rank it starts, so
#: OpenMPI's own variables (set only by mpirun/prterun) and PMIx's must win over Slurm's.
#: kernels/rankexec.c reads them in the same order.
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "SLURM_LOCALID")
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def local_rank(env: dict[str, str] | None = None) -> int | None:
    e = os.environ if env is None else env
    for var in (*LOCAL_RANK_VARS, *RANK_VARS):
        if e.get(var, "").isdigit():
            return int(e[var])
    return None
