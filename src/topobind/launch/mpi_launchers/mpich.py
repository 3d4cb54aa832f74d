"""MPICH's Hydra ``mpiexec``: each rank bound to its planned PUs with ``-bind-to
user:A+B,C+D`` (OS indexes, one entry per local rank, in rank order).

Found in ``.venv-mpich/`` (PyPI ``mpich``, ``make setup-mpis``), else ``mpiexec.hydra`` on
PATH (Debian's ``mpich``). Hydra gives every rank ``PMI_RANK``, ``PMI_SIZE`` and
``MPI_LOCALRANKID``; ``HYDRA_TOPO_DEBUG=1`` makes it print each process's binding
(``process 0 binding: 01``, one character per PU), the oracle of
tests/launch/test_mpi_families.py.

On several Slurm nodes Hydra starts its proxies through Slurm (its slurm bootstrap runs srun):
``-ppn R`` puts the plan's ranks on every node; nodes holding different shares get one launch
over a host file whose per-rank step binds each rank (:func:`hydra_groups`, also Intel MPI's;
tests/launch/test_mpi_multinode.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers.base import Emitted, Launch, Launcher, Native

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, RankStep
    from topobind.plan.model import Plan

#: Hydra's (and Intel MPI's Hydra's) rank variables
LOCAL = ("MPI_LOCALRANKID",)
RANK = ("PMI_RANK",)
SIZE = ("PMI_SIZE",)


def repo_prefix(name: str) -> str:
    """``.venv-NAME`` beside the running .venv (``make setup-mpis`` makes them)."""
    import sys

    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(sys.executable))), name)


def hydra_version(path: str, want: str) -> str:
    """The first line of ``mpiexec.hydra --version`` (or ``-V``) when it names ``want``."""
    import subprocess

    for flag in ("--version", "-V"):
        try:
            done = subprocess.run(
                [path, flag], capture_output=True, text=True, errors="replace", timeout=60
            )
        except OSError as exc:
            raise TopobindError(f"cannot run {path}: {exc.strerror or exc}") from exc
        text = done.stdout + done.stderr
        if want.lower() in text.lower():
            lines = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
            return next((ln for ln in lines if "ersion" in ln), lines[0])
    raise TopobindError(f"{path} is not {want}'s mpiexec (its --version does not say {want})")


def user_binding(plan: Plan) -> str:
    """``user:0+1,2+3``: local rank *k* bound to the PUs of entry *k* (OS indexes)."""
    return "user:" + ",".join("+".join(str(pu) for pu in r.cpus) for r in plan.ranks)


class Mpich(Launcher):
    name = "mpich"
    help = "MPICH's Hydra mpiexec: -bind-to user:PU+PU,... (one entry per rank)"
    family = "mpich"
    package = "PyPI 'mpich' ('make setup-mpis' makes .venv-mpich/) or Debian 'mpich'"
    reframe = "mpiexec"
    plan_format = "mpich"
    probe = "whereami-mpi-mpich"
    local_rank_vars = LOCAL
    rank_vars = RANK
    size_vars = SIZE
    native = Native(
        masks="yes (-bind-to user:0+1,2+3)",
        map_by="-bind-to/-map-by core|l3cache|numa|socket[:n]",
        rankfile="no (a host file: nodes and counts only)",
        memory="-membind (hwloc policies)",
        per_node="one launch over a host file (node:ranks); topobind's per-rank step binds",
        adds="the user list from the plan, exact OMP_PLACES per rank (rankexec) where "
        "threads do not fill their mask in order",
    )

    @property
    def programs(self) -> tuple[str, ...]:  # type: ignore[override]
        return (os.path.join(repo_prefix(".venv-mpich"), "bin", "mpiexec.hydra"), "mpiexec.hydra")

    def version_of(self, path: str) -> str:
        return "MPICH Hydra " + hydra_version(path, "HYDRA").rpartition(":")[2].strip()

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        per_node = ["-ppn", str(ranks)] if nodes > 1 else []
        return Launch(
            argv=[path or "mpiexec", "-n", str(nodes * ranks), *per_node, *program],
            env={},
            launcher=self.name,
        )

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        env, files, prefix = step.parts()
        plan = shape.plan
        argv = [shape.mpirun or "mpiexec", "-n", str(plan.nranks * shape.nodes)]
        if shape.nodes > 1:
            argv += ["-ppn", str(plan.nranks)]
        argv += ["-bind-to", user_binding(plan), *shape.extra_args]
        # Hydra passes the launching environment to every rank ('-genvall' is its default).
        return Launch(
            argv=[*argv, *prefix, *program],
            env=env | dict(shape.runtime_env),
            launcher=self.name,
            mpi=self.name,
            files=tuple(files),
            nodes=shape.nodes,
        )

    def command_groups(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        """Nodes holding different shares: Hydra binds nothing, the per-rank step binds
        each rank (:func:`hydra_groups`)."""
        return hydra_groups(self, shape, program, step, ["-launcher", "slurm", "-bind-to", "none"])

    def emit(self, plan: Plan, rankfile_path: str, host: str | None) -> Emitted:
        argv = ["mpiexec", "-n", str(plan.nranks), "-bind-to", user_binding(plan)]
        return Emitted(argv=argv, notes=_exact_note(plan))


def hydra_groups(
    launcher: Launcher,
    shape: JobShape,
    program: Sequence[str],
    step: RankStep,
    flags: Sequence[str],
    env: dict[str, str] | None = None,
) -> Launch:
    """One Hydra launch over the groups of nodes (``shape.groups``): a host file
    (``host:ranks``, nodes in order, so ranks are numbered node by node as the groups
    expect), proxies started through Slurm (``flags``: the launcher's option for it and for
    no binding of its own), and the per-rank step whose one file holds a section per group:
    each rank (``MPI_LOCALRANKID``) binds itself to its planned CPUs and exports its places."""
    counts = [(h, g.plan.nranks) for g in shape.groups for h in g.hosts]
    variables, hostfile, files = step.groups_launch("".join(f"{h}:{n}\n" for h, n in counts))
    argv = [shape.mpirun or "mpiexec", *flags, "-f", hostfile,
            "-n", str(sum(n for _, n in counts)), *shape.extra_args]  # fmt: skip
    return Launch(
        argv=[*argv, *step.argv(), *program],
        env=variables | (env or {}),
        launcher=launcher.name,
        mpi=launcher.name,
        files=files,
        nodes=len(counts),
    )


def _exact_note(plan: Plan) -> list[str]:
    if plan.nranks > 1 and any(
        list(r.places) != [(pu,) for pu in sorted(r.cpus)] for r in plan.ranks
    ):
        return [
            "each rank's threads must take its PUs in the planned order: export each rank's "
            "OMP_PLACES from ranks[].places, or launch with 'topobind run' (its per-rank step)"
        ]
    return []
