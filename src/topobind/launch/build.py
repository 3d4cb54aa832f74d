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
- When the job's nodes hold different shares (:mod:`topobind.launch.node_groups` makes a plan per
group
  of nodes), ``groups`` carries them: one plain srun step (tasks in node order from
  ``SLURM_HOSTFILE``, ``--cpu-bind=none``; one step file with a section per group, whose
  lines bind each rank to its CPUs and export its places), or one rankfile naming every
  host and one mpirun application context per group, each group's ranks running the
  per-rank step with the group's own file ``rankexec-K.txt``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from topobind.emit.omp import omp_env
from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text
from topobind.kernels.programs import find_kernel
from topobind.launch import launchers
from topobind.launch.launchers.base import Launch
from topobind.launch.resolve import launch_args, resolve
from topobind.launch.shape import JobShape, NodePlan
from topobind.launch.step_file import Section, step_text
from topobind.plan.model import Plan
from topobind.topo import slurm_allocation as slurm

#: ``--launcher`` choices (the registry's names and aliases: :mod:`topobind.launch.launchers`)
LAUNCHERS = launchers.names()


def in_slurm(env: dict[str, str] | None = None) -> bool:
    return slurm.in_slurm(env)


def slurm_nodes(env: dict[str, str] | None = None) -> int:
    return slurm.nodes(env)


def launcher_masks(plan: Plan, launcher: str) -> list[tuple[int, ...]]:
    """The CPU mask each rank gets from the launcher's binding (each launcher's
    :meth:`~topobind.launch.launchers.base.Launcher.masks`)."""
    return launchers.get(launcher).masks(plan)


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
    program: str | None = None,
    srun_args: Sequence[str] = (),
    mpirun_args: Sequence[str] = (),
) -> JobShape:
    """The shape of this job: launcher, nodes (from Slurm), MPI flavour, per-rank step.

    ``rank_step``: ``auto`` (only where needed, or to sample), ``always`` or ``never``;
    ``nodes``: default, the job's nodes inside Slurm (1 without a launcher); ``groups``: a
    plan per group of nodes (always with the per-rank step); ``program``: the program's
    path, read once (the MPI it links picks or checks the launcher, see
    :func:`topobind.launch.resolve.resolve`); ``srun_args``, ``mpirun_args``: options for srun,
    or for mpirun/mpiexec (whichever launches)."""
    if groups and launcher == "none":
        raise TopobindError("--launcher none runs one process; the job spans several nodes")
    r = resolve(plan, launcher, mpi, mpirun=mpirun, program=program)
    which = r.launcher
    if nodes is None:
        nodes = slurm_nodes() if in_slurm() and which.name != "none" else 1
    if which.name == "none" and plan.nranks > 1:
        raise TopobindError(
            f"the plan has {plan.nranks} ranks; --launcher none runs one process "
            "(use --ranks 1 or a launcher)"
        )
    if rank_step not in ("auto", "always", "never"):
        raise TopobindError(f"rank step {rank_step!r}: choose auto, always or never")
    step = rank_step == "always" or sample_ms is not None or bool(groups)
    if rank_step == "auto" and which.name != "none":
        step = step or which.needs_step(plan) or not uniform_env_is_exact(plan, which.name)
    if rank_step == "never" and sample_ms is not None:
        raise TopobindError("sampling the program's threads needs the per-rank step")
    step = step or _memory_step(plan, rank_step)
    given = srun_args if which.name == "srun" else mpirun_args if which.family else ()
    unused = _unused_launcher_args(which.name, srun_args if given is not srun_args else (),
                                   mpirun_args if given is not mpirun_args else ())  # fmt: skip
    extra, mpi_env, notes = launch_args(which, r.linked, given)
    notes = [*unused, *notes]
    return JobShape(
        plan=plan,
        launcher=r.shape_name,
        nodes=nodes,
        groups=tuple(groups),
        mpirun=r.path,
        mpi=r.mpi,
        rank_step=step,
        rank_file=os.path.join(workdir, "rankexec.txt"),
        rankfile_path=os.path.join(workdir, "rankfile"),
        sample_ms=sample_ms,
        sample_dir=workdir if sample_ms is not None else None,
        env=dict(env or {}),
        forward=tuple(forward),
        extra_args=tuple(extra),
        runtime_env={**r.env, **mpi_env},
        notes=(*r.notes, *notes),
        probe=r.probe,
    )


def _unused_launcher_args(launcher: str, srun: Sequence[str], mpirun: Sequence[str]) -> list[str]:
    """Notes on launcher options the launch does not use (``srun``, ``mpirun``: the unused
    ones); with no launcher at all they are refused: nothing would take them."""
    unused = [flag for flag, v in (("--srun-args", srun), ("--mpirun-args", mpirun)) if v]
    if unused and launcher == "none":
        raise TopobindError(
            f"{unused[0]}: --launcher none starts the program itself, with no launcher to "
            "take them; leave them out, or choose a launcher (--launcher srun|mpirun)"
        )
    return [f"{flag} not used: the launch is {launcher}'s" for flag in unused]


def _memory_step(plan: Plan, rank_step: str) -> bool:
    """Does the plan's memory placement need the per-rank step (see
    :func:`topobind.plan.memory.needs_step`)? ``--rank-step never`` cannot apply it."""
    from topobind.plan.memory import needs_step

    if not needs_step(plan):
        return False
    if rank_step == "never":
        raise TopobindError(
            "the memory placement (--mem, --pages) is applied by the per-rank step; drop "
            "--rank-step never, or give --mem none --pages thp"
        )
    return True


def rank_step_text(shape: JobShape, plan: Plan | None = None, bind: bool = False) -> str:
    """The file rankexec reads: one line per local rank of ``plan`` (default: the shape's)
    with its variables (see kernels/rankexec.c); ``bind``: each line also binds its rank
    to its planned CPUs (version 2: a launcher whose own binding is off)."""
    plan = plan or shape.plan
    masks = tuple(launcher_masks(plan, "srun")) if bind else None
    section = Section(("*",), plan, masks)
    about = f"layout {plan.layout}; one line per local rank"
    return step_text(about, [section], shape.env, _sample(shape))


def groups_step_text(shape: JobShape) -> str:
    """One rankexec file for every group of nodes (version 2): a section per group, each
    local rank's line binding it to its planned CPUs (``%cpus=``) before its variables."""
    about = f"layout {shape.groups[0].plan.layout}; a section per group of nodes"
    sections = [
        Section(g.hosts, g.plan, tuple(launcher_masks(g.plan, "srun")), g.about)
        for g in shape.groups
    ]
    return step_text(about, sections, shape.env, _sample(shape))


def _sample(shape: JobShape) -> tuple[str, int] | None:
    """The ``%sample`` directive's directory and delay, when the shape samples."""
    if shape.sample_ms is None:
        return None
    return (str(shape.sample_dir), shape.sample_ms)


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


def step_parts(
    shape: JobShape, bind: bool = False
) -> tuple[dict[str, str], list[tuple[str, str]], list[str]]:
    """What every launcher's command starts from: the ranks' variables, the files to write
    (the per-rank step file when the shape has the step) and the step's argv prefix."""
    env = job_env(shape)
    if not shape.rank_step:
        return env, [], []
    return env, [(shape.rank_file, rank_step_text(shape, bind=bind))], rank_step_argv(shape)


class StepFiles:
    """The per-rank step as a launcher builds its command (:class:`topobind.launch.shape.RankStep`;
    a launcher does not import this module): the ranks' variables with the step file and argv
    (:meth:`parts`), or the pieces a per-node launch puts together (group files, one file with
    a section per group)."""

    def __init__(self, shape: JobShape) -> None:
        self.shape = shape

    def parts(self, bind: bool = False) -> tuple[dict[str, str], list[tuple[str, str]], list[str]]:
        return step_parts(self.shape, bind)

    def argv(self, rank_file: str | None = None) -> list[str]:
        return rank_step_argv(self.shape, rank_file)

    def text(self, plan: Plan | None = None, bind: bool = False) -> str:
        return rank_step_text(self.shape, plan, bind)

    def groups_text(self) -> str:
        return groups_step_text(self.shape)

    def groups_launch(self, hosts: str) -> tuple[dict[str, str], str, tuple[tuple[str, str], ...]]:
        """What a launch over the groups of nodes by a host file (srun's, Hydra's) shares:
        its variables, the host file's path, and its files: the one step file with a
        section per group, and the host file holding ``hosts``."""
        s = self.shape
        hostfile = os.path.join(os.path.dirname(s.rank_file), "hostfile")
        env = {"TOPOBIND_LAYOUT": s.plan.layout, **s.env, **s.runtime_env}
        return env, hostfile, ((s.rank_file, self.groups_text()), (hostfile, hosts))

    def group_file(self, k: int) -> str:
        return group_rank_file(self.shape, k)


def build(shape: JobShape, program: Sequence[str]) -> Launch:
    """The command (and the files to write first) that runs ``program`` in this job shape:
    the shape's launcher (:mod:`topobind.launch.launchers`) builds it."""
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    which = launchers.get(shape.launcher, shape.mpi)
    make = which.command_groups if shape.groups else which.command
    launch = make(shape, program, StepFiles(shape))
    if shape.notes:
        launch.notes[:0] = list(shape.notes)
    return launch


def write_files(launch: Launch) -> None:
    """Write the launch's files (rankfile, per-rank step file), readable by the user only."""

    for path, text in launch.files:
        atomic_write_text(path, text)
        os.chmod(path, 0o600)


#: The launcher's rank variables, innermost launcher first: an mpirun inside a Slurm job
#: inherits the batch step's SLURM_PROCID=0 and SLURM_LOCALID=0 in every rank it starts, so
#: OpenMPI's own variables (set only by mpirun/prterun) and PMIx's must win over Slurm's.
#: kernels/rankexec.c reads them in the same order.
#: Derived from the launchers' registry (:func:`topobind.launch.launchers.local_rank_vars`).
LOCAL_RANK_VARS = launchers.local_rank_vars()
RANK_VARS = launchers.rank_vars()


def local_rank(env: dict[str, str] | None = None) -> int | None:
    e = os.environ if env is None else env
    for var in (*LOCAL_RANK_VARS, *RANK_VARS):
        if e.get(var, "").isdigit():
            return int(e[var])
    return None
