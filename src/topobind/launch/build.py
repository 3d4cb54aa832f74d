"""One launch path: from the job's shape to the command line (run, verify, bench, HPL).

Two functions: :func:`job_shape` makes the :class:`~topobind.launch.shape.JobShape` of this
job (the plan of every node or a plan per group of hosts, the nodes, the launcher and MPI
chosen by :mod:`topobind.launch.resolve`, whether the per-rank step runs); :func:`build`
has the shape's launcher turn it into a :class:`Launch` (argv, environment, the files to
write), handing it the per-rank step (:class:`topobind.launch.rank_step.StepFiles`);
:func:`topobind.launch.run.write_files` writes the files and
:func:`topobind.runner.run_process` runs it.

- Inside an allocation (:class:`topobind.topo.allocation.Allocation`, ``RunOptions.allocation``)
  the default launcher is its manager's (``srun`` in Slurm, ``flux`` in Flux); outside,
  ``mpirun`` for several ranks and no launcher for one.
- The OpenMPI flavour (4.x or 5.x) is read from ``mpirun --version``.
- The per-rank step is ``rankstep/bin/rankexec`` (C, no interpreter): it reads the line of its
  local rank in a file prepared once by ``topobind run`` (exact ``OMP_PLACES`` and any other
  per-rank variable) and execs the program. It is left out where the launcher's mask and one
  uniform environment already give every thread its planned PU.
- On several Slurm nodes the plan is applied on each: ``srun --nodes=N --ntasks=R*N``,
  ``mpirun -np R*N``, and a rankfile with one block per node (host names from
  ``scontrol show hostnames``) when the flags need one.
- When the job's nodes hold different shares (:mod:`topobind.launch.node_groups` makes a
  plan per group of nodes), ``groups`` carries them: one plain srun step (tasks in node order from
  ``SLURM_HOSTFILE``, ``--cpu-bind=none``; one step file with a section per group, whose
  lines bind each rank to its CPUs and export its places), or one rankfile naming every
  host and one mpirun application context per group, each group's ranks running the
  per-rank step with the group's own file ``rankexec-K.txt``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from topobind.errors import TopobindError
from topobind.launch import mpi_launchers as launchers
from topobind.launch.mpi_launchers.base import Launch, Launcher
from topobind.launch.rank_step import StepFiles
from topobind.launch.resolve import launch_args, resolve
from topobind.launch.shape import JobShape, NodePlan, RunOptions
from topobind.plan.model import Plan
from topobind.topo.manager import detect


def job_shape(
    plan: Plan,
    opts: RunOptions | None = None,
    *,
    workdir: str = ".",
    sample: bool = False,
    groups: Sequence[NodePlan] = (),
    program: str | None = None,
    nodes: int | None = None,
    env: Mapping[str, str] | None = None,
    forward: Sequence[str] = (),
) -> JobShape:
    """The shape of this job: launcher, nodes (the allocation's), MPI flavour, per-rank step.

    ``opts``: what the user asked (``rank_step``: ``auto`` (only where needed, or to
    sample), ``always`` or ``never``; ``srun_args``, ``mpirun_args``: options for srun, or
    for mpirun/mpiexec, whichever launches); ``sample``: the step samples the program's
    threads ``opts.sample_ms`` after start; ``nodes``: default, the allocation's nodes
    (1 without a launcher); ``groups``: a plan per group of nodes (always with the per-rank
    step); ``program``: the program's path, read once (the MPI it links picks or checks the
    launcher, see :func:`topobind.launch.resolve.resolve`); ``env``, ``forward``: variables
    for every rank, and those mpirun must pass by name."""
    opts = opts or RunOptions()
    launcher, rank_step = opts.launcher, opts.rank_step
    sample_ms = opts.sample_ms if sample else None
    if groups and launcher == "none":
        raise TopobindError("--launcher none runs one process; the job spans several nodes")
    alloc = opts.allocation if opts.allocation is not None else detect()
    r = resolve(plan, launcher, opts.mpi, program=program, allocation=alloc)
    which = r.launcher
    if nodes is None:
        nodes = alloc.nodes if which.name != "none" else 1
    if which.name == "none" and plan.nranks > 1:
        raise TopobindError(
            f"the plan has {plan.nranks} ranks; --launcher none runs one process "
            "(use --ranks 1 or a launcher)"
        )
    if rank_step not in ("auto", "always", "never"):
        raise TopobindError(f"rank step {rank_step!r}: choose auto, always or never")
    step = rank_step == "always" or sample_ms is not None or bool(groups)
    exact = which.name != "none" and uniform_env_is_exact(plan, which)
    if rank_step == "auto" and which.name != "none":
        step = step or which.needs_step(plan) or not exact
    if rank_step == "never" and sample_ms is not None:
        raise TopobindError("sampling the program's threads needs the per-rank step")
    step = step or _memory_step(plan, rank_step)
    srun_args, mpirun_args = opts.srun_args, opts.mpirun_args
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
        uniform_places=exact,
        allocation=alloc,
    )


def uniform_env_is_exact(plan: Plan, launcher: Launcher) -> bool:
    """True when ``OMP_PLACES=threads`` inside each rank's mask from ``launcher``'s binding
    (:meth:`~topobind.launch.mpi_launchers.base.Launcher.masks`) gives every thread its planned
    PU (libgomp and LLVM build that list in increasing OS order): no per-rank step needed.
    Per-rank variables (per-gpu plans' device variables) always need it."""
    if plan.nranks == 1:
        return True  # its exact places (and variables) are exported to it directly
    if any(r.env for r in plan.ranks):
        return False
    return all(
        list(r.places) == [(pu,) for pu in sorted(mask)]
        for r, mask in zip(plan.ranks, launcher.masks(plan), strict=True)
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


def build(shape: JobShape, program: Sequence[str]) -> Launch:
    """The command (and the files to write first) that runs ``program`` in this job shape:
    the shape's launcher (:mod:`topobind.launch.mpi_launchers`) builds it."""
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    which = launchers.get(shape.launcher, shape.mpi)
    make = which.command_groups if shape.groups else which.command
    launch = make(shape, program, StepFiles(shape))
    if shape.notes:
        launch.notes[:0] = list(shape.notes)
    return launch
