"""The per-rank step of a job shape (rankstep/bin/rankexec), as the launchers build their
commands with it (:class:`StepFiles`, the one :class:`topobind.launch.shape.RankStep`):
the variables every rank gets (:func:`job_env`; whether one uniform environment is exact
without the step, ``shape.uniform_places``, is decided by :mod:`topobind.launch.build`
from the launcher's own masks), the step file's text for a shape (written by
:mod:`topobind.launch.step_file`, each binding line with its rank's planned CPUs) and the
step's argv. :func:`topobind.launch.build.build` hands a :class:`StepFiles` to the
launcher; a launcher imports only :mod:`topobind.launch.shape`, never this module, and
this module calls no launcher back.
"""

from __future__ import annotations

import os

from topobind.emit.omp import omp_env
from topobind.errors import TopobindError
from topobind.launch.shape import JobShape
from topobind.launch.step_file import Section, planned_masks, step_text
from topobind.measure.programs import find_kernel
from topobind.plan.model import Plan


def job_env(shape: JobShape) -> dict[str, str]:
    """The variables every rank gets (the per-rank step adds each rank's exact places).
    Without a launcher (``topobind env``: the script launches) the places are ``cores``;
    ``threads`` where the shape's launcher masks make them exact (``shape.uniform_places``)."""
    plan = shape.plan
    exact = shape.launcher != "none" and shape.uniform_places
    uniform = "threads" if not shape.rank_step and plan.nranks > 1 and exact else None
    one = dict(plan.ranks[0].env) if plan.nranks == 1 else {}  # a single rank's variables
    return {**omp_env(plan, uniform), **one, "TOPOBIND_LAYOUT": plan.layout, **shape.env}


class StepFiles:
    """The per-rank step of ``shape`` as a launcher builds its command with it (the one
    :class:`topobind.launch.shape.RankStep`; a launcher does not import this module): the
    ranks' variables with the step file and argv (:meth:`parts`), or the pieces a per-node
    launch puts together (group files, one file with a section per group)."""

    def __init__(self, shape: JobShape) -> None:
        self.shape = shape

    def parts(self, bind: bool = False) -> tuple[dict[str, str], list[tuple[str, str]], list[str]]:
        """What every launcher's command starts from: the ranks' variables, the files to
        write (the per-rank step file when the shape has the step) and the step's argv."""
        env = job_env(self.shape)
        if not self.shape.rank_step:
            return env, [], []
        return env, [(self.shape.rank_file, self.text(bind=bind))], self.argv()

    def argv(self, rank_file: str | None = None) -> list[str]:
        """The step's argv prefix: ``rankexec FILE --`` (default: the shape's file)."""
        try:
            exe = find_kernel("rankexec")
        except TopobindError as exc:
            raise TopobindError(f"the per-rank step is not built ({exc})") from exc
        return [str(exe), rank_file or self.shape.rank_file, "--"]

    def text(self, plan: Plan | None = None, bind: bool = False) -> str:
        """The file rankexec reads: one line per local rank of ``plan`` (default: the
        shape's) with its variables (see rankstep/rankexec.c); ``bind``: each line also binds
        its rank to its planned CPUs (version 2: a launcher whose own binding is off)."""
        plan = plan or self.shape.plan
        section = Section(("*",), plan, planned_masks(plan) if bind else None)
        about = f"layout {plan.layout}; one line per local rank"
        return step_text(about, [section], self.shape.env, self._sample())

    def groups_text(self) -> str:
        """One rankexec file for every group of nodes (version 2): a section per group, each
        local rank's line binding it to its planned CPUs (``%cpus=``) before its variables."""
        groups = self.shape.groups
        about = f"layout {groups[0].plan.layout}; a section per group of nodes"
        sections = [Section(g.hosts, g.plan, planned_masks(g.plan), g.about) for g in groups]
        return step_text(about, sections, self.shape.env, self._sample())

    def _sample(self) -> tuple[str, int] | None:
        """The ``%sample`` directive's directory and delay, when the shape samples."""
        s = self.shape
        return None if s.sample_ms is None else (str(s.sample_dir), s.sample_ms)

    def groups_launch(self, hosts: str) -> tuple[dict[str, str], str, tuple[tuple[str, str], ...]]:
        """What a launch over the groups of nodes by a host file (srun's, Hydra's) shares:
        its variables, the host file's path, and its files: the one step file with a
        section per group, and the host file holding ``hosts``."""
        s = self.shape
        hostfile = os.path.join(os.path.dirname(s.rank_file), "hostfile")
        env = {"TOPOBIND_LAYOUT": s.plan.layout, **s.env, **s.runtime_env}
        return env, hostfile, ((s.rank_file, self.groups_text()), (hostfile, hosts))

    def group_file(self, k: int) -> str:
        """The per-rank step file of group ``k`` (beside the shape's own step file)."""
        return os.path.join(os.path.dirname(self.shape.rank_file), f"rankexec-{k}.txt")
