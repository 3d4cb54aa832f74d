"""The per-rank step of a job shape (rankstep/bin/rankexec), as the launchers build their
commands with it (:class:`StepFiles`, the one :class:`topobind.launch.shape.RankStep`):
the variables every rank gets (:func:`job_env`), whether one uniform environment is exact
without the step (:func:`uniform_env_is_exact`), the step file's text for a shape (the
launch's masks passed to :mod:`topobind.launch.step_file`, which writes it) and the step's
argv. :func:`topobind.launch.build.build` hands a :class:`StepFiles` to the launcher; a
launcher imports only :mod:`topobind.launch.shape`, never this module.
"""

from __future__ import annotations

import os

from topobind.emit.omp import omp_env
from topobind.errors import TopobindError
from topobind.kernels.programs import find_kernel
from topobind.launch import launchers
from topobind.launch.shape import JobShape
from topobind.launch.step_file import Section, step_text
from topobind.plan.model import Plan


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


def rank_step_text(shape: JobShape, plan: Plan | None = None, bind: bool = False) -> str:
    """The file rankexec reads: one line per local rank of ``plan`` (default: the shape's)
    with its variables (see rankstep/rankexec.c); ``bind``: each line also binds its rank
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
