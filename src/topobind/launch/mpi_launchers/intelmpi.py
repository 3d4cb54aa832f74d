"""Intel MPI's ``mpiexec.hydra``: pinning by variables it reads at start-up.

- one PU per rank: ``I_MPI_PIN_PROCESSOR_LIST=A,B,...`` (rank *k* on the *k*-th entry);
- several PUs per rank: ``I_MPI_PIN_DOMAIN=[0x3,0xc,...]`` (one hexadecimal mask per
  domain) with ``I_MPI_PIN_ORDER=range`` (rank *k* in the *k*-th domain, as listed).

Under an affinity mask that hides PUs (a Slurm step's, ``taskset``) Intel MPI's own pinning
is turned off (``I_MPI_PIN=off``: a pin outside the mask made its proxy spin here) and the
per-rank step binds each rank (``%cpus=``, version-2 step file).

Found in ``.venv-impi/`` (PyPI ``impi-rt`` + ``impi-devel``, ``make setup-mpis``). With
``I_MPI_DEBUG=4`` rank 0 prints the pinning table (``Rank Pid Node name Pin cpu``), the
oracle of tests/launch/test_mpi_families.py."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from topobind.launch.mpi_launchers.base import Emitted, Launch, Launcher, Native
from topobind.launch.mpi_launchers.mpich import LOCAL, RANK, SIZE, hydra_version, repo_prefix

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, RankStep
    from topobind.plan.model import Plan


def pin_env(plan: Plan) -> dict[str, str]:
    """The ``I_MPI_PIN_*`` variables that put every rank on its planned PUs."""
    if all(len(r.cpus) == 1 for r in plan.ranks):
        return {
            "I_MPI_PIN": "1",
            "I_MPI_PIN_PROCESSOR_LIST": ",".join(str(r.cpus[0]) for r in plan.ranks),
        }
    masks = ",".join(hex(sum(1 << pu for pu in r.cpus)) for r in plan.ranks)
    return {"I_MPI_PIN": "1", "I_MPI_PIN_DOMAIN": f"[{masks}]", "I_MPI_PIN_ORDER": "range"}


class IntelMpi(Launcher):
    name = "intelmpi"
    help = "Intel MPI's mpiexec.hydra: I_MPI_PIN_PROCESSOR_LIST / I_MPI_PIN_DOMAIN masks"
    family = "mpich"
    package = "PyPI 'impi-rt' and 'impi-devel' ('make setup-mpis' makes .venv-impi/)"
    reframe = "mpiexec"
    plan_format = "intelmpi"
    probe = "whereami-mpi-intelmpi"
    local_rank_vars = LOCAL
    rank_vars = RANK
    size_vars = SIZE
    native = Native(
        masks="yes (I_MPI_PIN_PROCESSOR_LIST, I_MPI_PIN_DOMAIN=[mask,...])",
        map_by="I_MPI_PIN_DOMAIN=core|cache3|numa|socket|omp, I_MPI_PIN_ORDER",
        rankfile="no (machine file: nodes and counts only)",
        memory="no general one (I_MPI_HBW_POLICY: high-bandwidth memory)",
        per_node="one launch over a host file (node:ranks), I_MPI_PIN=off; topobind's "
        "per-rank step binds",
        adds="the pin list or domain masks from the plan; under a restricted mask, the "
        "per-rank step binds instead; exact OMP_PLACES per rank (rankexec)",
    )

    @property
    def programs(self) -> tuple[str, ...]:  # type: ignore[override]
        root = os.environ.get("I_MPI_ROOT")  # set by Intel's oneAPI setvars.sh / modules
        here = os.path.join(repo_prefix(".venv-impi"), "bin", "mpiexec.hydra")
        return (here, *([os.path.join(root, "bin", "mpiexec.hydra")] if root else []))

    def version_of(self, path: str) -> str:
        return hydra_version(path, "Intel")

    def runtime_env(self, path: str) -> dict[str, str]:
        """``I_MPI_ROOT`` (its libraries, providers and tuning files) and its lib/ first on
        ``LD_LIBRARY_PATH`` (programs it ships carry no run path)."""
        root = os.path.dirname(os.path.dirname(path))
        libs = [os.path.join(root, "lib"), os.path.join(root, "lib", "release")]
        old = os.environ.get("LD_LIBRARY_PATH")
        return {"I_MPI_ROOT": root, "LD_LIBRARY_PATH": ":".join([*libs, *([old] if old else [])])}

    def needs_step(self, plan: Plan) -> bool:
        from topobind.emit.openmpi import affinity_restricted

        return affinity_restricted(plan.topology)

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        per_node = ["-ppn", str(ranks)] if nodes > 1 else []
        return Launch(
            argv=[path or "mpiexec.hydra", "-n", str(nodes * ranks), *per_node, *program],
            env={},
            launcher=self.name,
        )

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        from topobind.emit.openmpi import affinity_restricted

        plan = shape.plan
        restricted = affinity_restricted(plan.topology)
        env, files, prefix = step.parts(bind=restricted)
        pin = {"I_MPI_PIN": "off"} if restricted else pin_env(plan)
        argv = [shape.mpirun or "mpiexec.hydra", "-n", str(plan.nranks * shape.nodes)]
        if shape.nodes > 1:
            argv += ["-ppn", str(plan.nranks)]
        notes = (
            ["this process's affinity mask hides PUs: Intel MPI's pinning is off and the "
             "per-rank step binds each rank (I_MPI_PIN=off)"]
            if restricted
            else []
        )  # fmt: skip
        return Launch(
            argv=[*argv, *shape.extra_args, *prefix, *program],
            env=env | dict(shape.runtime_env) | pin,
            launcher=self.name,
            mpi=self.name,
            files=tuple(files),
            notes=notes,
            nodes=shape.nodes,
        )

    def command_groups(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        """Nodes holding different shares: Intel MPI's pinning off, the per-rank step binds
        each rank (:func:`topobind.launch.mpi_launchers.mpich.hydra_groups`)."""
        from topobind.launch.mpi_launchers.mpich import hydra_groups

        return hydra_groups(
            self, shape, program, step, ["-bootstrap", "slurm"], {"I_MPI_PIN": "off"}
        )

    def emit(self, plan: Plan, rankfile_path: str, host: str | None) -> Emitted:
        from topobind.launch.mpi_launchers.mpich import _exact_note

        argv = ["mpiexec.hydra", "-n", str(plan.nranks)]
        return Emitted(argv=argv, env=pin_env(plan), notes=_exact_note(plan))
