"""The interface every launcher implements (:class:`Launcher`), and what it reports.

A launcher is one module in this package with one subclass of :class:`Launcher`, listed in
:data:`topobind.launch.mpi_launchers.REGISTRY`. It says:

- whether it is here and which version (:meth:`Launcher.detect`; :meth:`Launcher.find`
  raises naming the package that installs it);
- the command for a job shape (:meth:`Launcher.command`: one plan on every node;
  :meth:`Launcher.command_groups`: a plan per group of nodes, where it can), given the
  per-rank step (:class:`topobind.launch.shape.RankStep`: its variables, files and argv; a
  launcher imports only :mod:`topobind.launch.shape`, never the builder, which imports it);
- the per-rank variables it gives each rank (``local_rank_vars``, ``rank_vars``,
  ``size_vars``: rankstep/rankexec.c and the probes read the same names, innermost launcher
  first);
- what it expresses natively (:class:`Native`), and so where the per-rank step
  (rankstep/bin/rankexec) does the rest: :meth:`Launcher.masks` is the CPU mask each rank
  gets from the launcher's own binding; where ``OMP_PLACES=threads`` inside that mask is not
  each rank's exact places, every rank runs through the step;
- the flags ``topobind plan --format NAME`` prints (:meth:`Launcher.emit`).

Nothing here runs per rank: a launcher is asked once, on the batch host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from topobind.errors import TopobindError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, RankStep
    from topobind.plan.model import Plan


@dataclass(frozen=True)
class Launch:
    """A command ready to run: ``argv``, the variables to export on top of the caller's
    environment, the launcher's name (``mpi``: its MPI), the files to write first (path,
    text; mode 0600), notes for the user, and the nodes it spans."""

    argv: list[str]
    env: dict[str, str]
    launcher: str
    mpi: str | None = None
    files: tuple[tuple[str, str], ...] = ()
    notes: list[str] = field(default_factory=list)
    nodes: int = 1


class Native(NamedTuple):
    """What a launcher expresses by itself (the docs' launcher table is made from these).

    ``masks``: an explicit CPU set per rank; ``map_by``: a mapping by hardware object
    (``--map-by ppr:N:l3cache``); ``rankfile``: a file placing each rank; ``memory``: a
    memory binding; ``per_node``: different placements on different nodes in one launch;
    ``adds``: what topobind adds on top (the per-rank step's exact places, ...)."""

    masks: str
    map_by: str = "no"
    rankfile: str = "no"
    memory: str = "no"
    per_node: str = "no"
    adds: str = ""


@dataclass(frozen=True)
class Found:
    """A launcher found on this machine: its program, version text, and an extra
    environment its ranks need (an MPI's ``lib/`` directory, its root)."""

    path: str
    version: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Emitted:
    """``topobind plan --format NAME``: the command, the variables to export before it,
    a file it reads (path, text), and notes."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def real_dir(path: str) -> str:
    """``path`` in its directory's real location, its own name kept: ``/bin/mpirun`` on a
    usr-merged system (``/bin`` a link to ``usr/bin``, before ``/usr/bin`` in PATH) is
    ``/usr/bin/mpirun``. OpenMPI takes its prefix from the directory it was started from, and
    refuses ``/`` ("A prefix was supplied to mpirun that only contained slashes")."""
    head, name = os.path.split(path)
    return os.path.join(os.path.realpath(head), name) if head else path


class Launcher:
    """One launcher. Subclasses set the class attributes and implement :meth:`command`."""

    #: ``--launcher NAME`` (and the site file's ``launcher:``)
    name: str = ""
    #: one line for ``--help`` and the docs
    help: str = ""
    #: the MPI ABI family of the programs it starts (``openmpi``, ``mpich``: MPICH, Intel
    #: MPI, Cray MPICH, MVAPICH share libmpi.so.12), or ``""``: any program (srun, none)
    family: str = ""
    #: what installs it, for the message when it is missing
    package: str = ""
    #: ReFrame's name of the same launcher (``tb_launcher_args``, ReFrame site config)
    reframe: str = "local"
    #: ``topobind plan --format`` name, or ``""``
    plan_format: str = ""
    local_rank_vars: tuple[str, ...] = ()
    rank_vars: tuple[str, ...] = ()
    size_vars: tuple[str, ...] = ()
    native: Native = Native(masks="no")
    #: the program it runs: (name on PATH, or paths in order)
    programs: tuple[str, ...] = ()
    #: the MPI placement probe built with this launcher's MPI (kernels/bin/NAME), or ""
    probe: str = ""
    #: the resource manager it runs inside only (``slurm``, ``flux``), or ``""``
    needs_manager: str = ""

    def detect(self) -> Found | None:
        """This launcher here, or None. Default: the first of ``programs`` that exists
        (an absolute path, a path relative to the repository, or a name on PATH)."""
        path = self.locate()
        if path is None:
            return None
        try:
            return Found(path, self.version_of(path))
        except TopobindError:  # another program of that name (MPICH's mpiexec.hydra, ...)
            return None

    def locate(self) -> str | None:
        import shutil  # lazily: shutil imports re, which 'topobind plan' never pays for

        for p in self.programs:
            full = p if os.path.isabs(p) else shutil.which(p)
            if full and os.access(full, os.X_OK):
                return real_dir(full)
        return None

    def version_of(self, path: str) -> str:
        """The version text of ``path``; raises when it is not this launcher."""
        return ""

    def find(self, path: str | None = None) -> Found:
        """The launcher to use (``path``: the one given); raises naming the package."""
        if path is not None:
            return Found(path, self.version_of(path), self.runtime_env(path))
        found = self.detect()
        if found is None:
            raise TopobindError(
                f"--launcher {self.name}: not installed here; install {self.package}"
            )
        return Found(found.path, found.version, found.env or self.runtime_env(found.path))

    def runtime_env(self, path: str) -> dict[str, str]:
        """Variables the launcher and its ranks need (library path, root); default none."""
        return {}

    def masks(self, plan: Plan) -> list[tuple[int, ...]]:
        """The CPU set each rank gets from this launcher's binding; default: the planned
        PUs (launchers given an explicit set per rank)."""
        return [r.cpus for r in plan.ranks]

    def needs_step(self, plan: Plan) -> bool:
        """True when the per-rank step must run whatever the places (it binds)."""
        return False

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        """The launch of ``program`` in ``shape`` (one plan on every node); ``step``: the
        per-rank step's variables, files and argv (:class:`topobind.launch.shape.RankStep`)."""
        raise NotImplementedError

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        """``program`` launched as a user would without topobind: ``ranks`` tasks on each of
        ``nodes`` nodes, no binding asked for (the launcher's own defaults); ``path``: the
        launcher's program as found (None: its usual name). ``topobind tune``'s baseline."""
        raise TopobindError(f"--launcher {self.name} has no plain launch")

    def command_groups(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        """The launch of ``program`` with a plan per group of nodes (``shape.groups``)."""
        other = "--launcher srun or mpirun" if self.family == "openmpi" else "--launcher srun"
        raise TopobindError(
            f"--launcher {self.name} cannot place different plans on different nodes in one "
            f"launch (the job's nodes hold different shares); use {other}, or a job holding "
            "the same share of every node"
        )

    def emit(self, plan: Plan, rankfile_path: str, host: str | None) -> Emitted:
        """The flags ``topobind plan --format NAME`` prints for one node."""
        raise TopobindError(f"--launcher {self.name} has no plan format")
