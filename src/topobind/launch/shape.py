"""The job's shape, data only: what a launch is built from (:func:`topobind.launch.build.build`)
and what a launcher (:mod:`topobind.launch.mpi_launchers`) reads. No behaviour, no imports of the
launch code: the launchers import this module and nothing above it.

- :class:`RunOptions`: what the user asked of the launch (launcher, MPI, per-rank step,
  sampling, the launcher's own options).
- :class:`JobShape`: the plan of every node (or a plan per group of nodes), the nodes, the
  launcher, the MPI flavour, the per-rank step, the extra variables and options.
- :class:`NodePlan`: the plan of a group of nodes when the job's nodes hold different shares
  (:mod:`topobind.launch.node_groups` makes them).
- :class:`RankStep`: the per-rank step as a launcher uses it to build its command (its
  variables, files and argv); :class:`topobind.launch.rank_step.StepFiles` is the one there is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from topobind.plan.model import Plan
from topobind.topo.allocation import Allocation
from topobind.topo.topology import Topology


@dataclass(frozen=True)
class RunOptions:
    """What the user asked of a launch (``topobind run``'s options; HPL's launcher), read
    once by :func:`topobind.launch.build.job_shape`."""

    launcher: str | None = None  # --launcher (None: chosen, see topobind.launch.resolve)
    mpi: str | None = None  # --mpi openmpi4|openmpi5
    rank_step: str = "auto"  # auto | always | never
    sample_ms: int = 1000  # when the program's threads are sampled (--verify-running)
    srun_args: tuple[str, ...] = ()  # --srun-args: options for srun itself
    mpirun_args: tuple[str, ...] = ()  # --mpirun-args: options for mpirun / mpiexec
    #: the job's allocation, made once by the command (None: detected where needed)
    allocation: Allocation | None = None


@dataclass(frozen=True)
class NodePlan:
    """The plan of a group of the job's nodes when the nodes hold different shares: each of
    ``hosts`` runs ``plan``; ``first_rank``: the global rank of the plan's rank 0 on
    ``hosts[0]`` (ranks in node order, block); ``node``: the whole node's topology (not
    restricted to the CPUs the job holds; OpenMPI 5 rankfiles number its cores);
    ``about``: the group's share in words (see :func:`topobind.launch.node_groups.describe`)."""

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
    variables for every rank; ``forward``: variables mpirun must pass by name (``-x``).
    ``extra_args``: options for the launcher itself (``--srun-args``, ``--mpirun-args``,
    srun's ``--mpi``); ``runtime_env``: what the launcher's MPI needs (its root, libraries);
    ``notes``: what choosing the launcher found (told with the launch's notes); ``probe``:
    the placement probe for ``--verify`` (the MPI probe of the program's MPI);
    ``uniform_places``: one ``OMP_PLACES=threads`` inside each rank's mask from the
    launcher's binding gives every thread its planned PU (decided once, by
    :func:`topobind.launch.build.job_shape`)."""

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
    extra_args: tuple[str, ...] = ()
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    probe: str = "whereami"
    uniform_places: bool = False  # OMP_PLACES=threads in each launcher mask is exact
    allocation: Allocation | None = None  # the job's (host names for rankfiles spanning nodes)


class RankStep(Protocol):
    """The per-rank step of a shape as a launcher builds its command with it."""

    def parts(self, bind: bool = False) -> tuple[dict[str, str], list[tuple[str, str]], list[str]]:
        """The ranks' variables, the files to write (the step file) and the step's argv."""
        ...

    def argv(self, rank_file: str | None = None) -> list[str]:
        """The step's argv prefix (``rankexec FILE --``)."""
        ...

    def text(self, plan: Plan | None = None, bind: bool = False) -> str:
        """The step file of ``plan`` (default: the shape's)."""
        ...

    def groups_text(self) -> str:
        """One step file with a section per group of nodes."""
        ...

    def groups_launch(self, hosts: str) -> tuple[dict[str, str], str, tuple[tuple[str, str], ...]]:
        """Variables, host file path and files of a launch over the groups by a host file."""
        ...

    def group_file(self, k: int) -> str:
        """The step file of group ``k``."""
        ...
