"""Which launcher and which MPI a job gets (:func:`resolve`): the one asked for, else srun
inside Slurm, else for several ranks the MPI family the program links (OpenMPI when unknown),
else none; checked against the MPI the program links (a launcher of another family is
refused, naming the right one), found on this machine, with the placement probe for
``--verify`` and the launcher's options (:func:`launch_args`). The launchers themselves are
the registry of :mod:`topobind.launch.mpi_launchers`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers import OPENMPI, REGISTRY, get
from topobind.launch.mpi_launchers.base import Launcher, real_dir
from topobind.topo.allocation import Allocation
from topobind.topo.manager import detect

if TYPE_CHECKING:
    from topobind.launch.mpi_launchers.linked import Linked
    from topobind.plan.model import Plan


class Resolved:
    """The launcher chosen for a job: the launcher, its program and version (``path``,
    ``mpi``), the name a :class:`~topobind.launch.shape.JobShape` carries (``mpirun`` for OpenMPI),
    what its ranks need (``env``), the MPI the program links, and notes."""

    def __init__(
        self,
        launcher: Launcher,
        path: str | None = None,
        mpi: str | None = None,
        env: dict[str, str] | None = None,
        linked: Linked | None = None,
        notes: tuple[str, ...] = (),
        probe: str = "whereami",
    ) -> None:
        self.launcher, self.path, self.mpi = launcher, path, mpi
        self.env, self.linked, self.notes, self.probe = env or {}, linked, notes, probe

    @property
    def shape_name(self) -> str:
        return "mpirun" if self.launcher.name in OPENMPI else self.launcher.name


def find_openmpi(prefer: str | None = None) -> tuple[str, str]:
    """(path, ``openmpi4``|``openmpi5``) of the mpirun to use: the one ``prefer`` names
    when installed, else ``mpirun`` on PATH."""
    import shutil

    from topobind.launch.mpi_launchers.openmpi import mpi_flavour

    candidates = list(REGISTRY[prefer].programs[:1]) if prefer in OPENMPI else []
    found = [c for c in candidates if os.path.exists(c)] or [
        real_dir(p) for p in [shutil.which("mpirun")] if p
    ]
    if not found:
        raise TopobindError("mpirun not found; install OpenMPI (make setup) or use --launcher srun")
    return found[0], mpi_flavour(found[0])


#: the launcher of each resource manager, the default inside its jobs
MANAGER_LAUNCHERS = {"slurm": "srun", "flux": "flux"}
_INSIDE = {
    "slurm": "a Slurm allocation (SLURM_JOB_ID unset); use salloc/sbatch",
    "flux": "a Flux instance (FLUX_URI unset); run inside one (flux start, alloc, batch)",
}


def choose(
    plan: Plan,
    requested: str | None,
    family: str | None = None,
    allocation: Allocation | None = None,
) -> Launcher:
    """The launcher asked for, else the allocation's manager's (srun inside Slurm, flux
    inside a Flux instance; not from a task of a Flux job, which plans from its job's cores
    and launches as outside), else for several ranks the MPI family the program links
    (``family``; OpenMPI when unknown), else none. ``allocation``: the job's (default:
    detected here)."""
    alloc = allocation if allocation is not None else detect()
    if requested is not None:
        which = get(requested)
        if which.needs_manager and alloc.manager != which.needs_manager:
            raise TopobindError(
                f"--launcher {requested} needs {_INSIDE[which.needs_manager]} or --launcher mpirun"
            )
        if which.needs_manager and alloc.in_job:
            raise TopobindError(
                f"--launcher {requested}: this is a task of {alloc.manager} job "
                f"{alloc.in_job}, whose {requested} run would wait for the cores the job itself "
                "holds; run topobind in the job's instance (flux batch, flux alloc), or give "
                "--launcher mpirun|none"
            )
        return which
    if alloc.manager in MANAGER_LAUNCHERS and not alloc.in_job:
        return REGISTRY[MANAGER_LAUNCHERS[alloc.manager]]
    if plan.nranks == 1:
        return REGISTRY["none"]
    return get("mpirun")


def resolve(
    plan: Plan,
    requested: str | None,
    mpi: str | None = None,
    *,
    mpirun: str | None = None,
    program: str | None = None,
    allocation: Allocation | None = None,
) -> Resolved:
    """The launcher for this job, found on this machine, checked against the MPI the
    program links: a launcher of another MPI family is refused (naming the right one); with
    no launcher asked for outside Slurm, the one installed with the program's MPI is used,
    with a note when the ``mpirun`` on PATH is another."""
    from topobind.launch.mpi_launchers.linked import linked_mpi

    linked = linked_mpi(program) if program and os.path.isfile(program) else None
    which = choose(plan, requested, linked.family if linked else None, allocation)
    notes: list[str] = []
    owner = installed_with(linked) if linked is not None else None
    if linked is not None and which.family and requested is None and which.family != linked.family:
        which = owner or _installed_of(linked.family) or which  # the program's own MPI
    if linked is not None and which.family:
        if which.family != linked.family:
            raise TopobindError(_family_error(which, linked, owner))
        if requested is None or requested == "mpirun":
            if owner is not None and owner.name != which.name and mpi is None and mpirun is None:
                which, mpirun, note = owner, *_owners_launcher(linked, owner)
                notes += [note] if note else []
        elif owner is not None and owner.name != which.name:
            notes.append(
                f"{linked.program} links {linked.library}, installed with {owner.name}, but "
                f"--launcher {which.name} starts it: the MPI versions may not match"
            )
    probe, why = mpi_probe(linked, owner or (which if which.family else None))
    notes += why
    if which.name == "flux" and owner is not None and owner.name == "openmpi5":
        notes.append(
            f"{linked.program if linked else 'the program'} links OpenMPI 5, which starts "
            "under flux run only with Flux's PMIx plugin (flux-pmix, not part of flux-core): "
            "without it each rank is an MPI world of its own; --launcher openmpi5 starts it "
            "with its own mpirun"
        )
    if which.name in OPENMPI:
        prefer = mpi or (requested if requested in OPENMPI else which.name if notes else None)
        if mpirun:
            from topobind.launch.mpi_launchers.openmpi import mpi_flavour

            path, flavour = mpirun, mpi_flavour(mpirun)
        else:
            path, flavour = find_openmpi(prefer)
        if mpi in OPENMPI and flavour != mpi:
            notes.append(
                f"--mpi {mpi}: {path} is {REGISTRY[flavour].help.split(':')[0]}, not "
                f"{REGISTRY[mpi].help.split(':')[0]}; it is launched with its own flags "
                f"(--mpi {flavour})"
            )
        return Resolved(REGISTRY[flavour], path, flavour, {}, linked, tuple(notes), probe)
    if which.family:
        found = which.find(mpirun)
        return Resolved(which, found.path, which.name, found.env, linked, tuple(notes), probe)
    return Resolved(which, None, None, {}, linked, tuple(notes), probe)


def _owners_launcher(linked: Linked, owner: Launcher) -> tuple[str | None, str]:
    """The launcher program of the installation that holds the program's MPI (the one the
    launch then runs, whatever PATH says), and a note when it is not the mpirun on PATH
    (none when it is that very program)."""
    import shutil

    chosen, on_path = owner.locate(), shutil.which("mpirun")
    same = chosen and on_path and os.path.realpath(chosen) == os.path.realpath(on_path)
    if chosen is None or same:
        return chosen, ""
    return chosen, (
        f"{linked.program} links {linked.library} ({owner.name}); launching {chosen} "
        f"(--launcher {owner.name}), not the mpirun on PATH ({on_path or 'none'})"
    )


def mpi_probe(linked: Linked | None, owner: Launcher | None) -> tuple[str, list[str]]:
    """The placement probe for ``--verify``: an MPI program's is the MPI probe built with
    its MPI (``whereami-mpi-NAME``), so a launch that cannot start MPI fails verification;
    the plain probe (and a note) when that one is not built."""
    if linked is None:
        return "whereami", []
    name = owner.probe if owner is not None and owner.probe else ""
    if name:
        from topobind.measure.programs import find_kernel

        try:
            find_kernel(name)
            return name, []
        except TopobindError:
            pass
    return "whereami", [
        f"{linked.program} links {linked.soname} but no MPI probe is built for it "
        f"({name or 'unknown MPI'}; make whereami-mpis): --verify runs the plain probe, "
        "which does not start MPI"
    ]


def _installed_of(family: str) -> Launcher | None:
    return next((L for L in REGISTRY.values() if L.family == family and L.locate()), None)


def installed_with(linked: Linked) -> Launcher | None:
    """The registered launcher whose installation holds the program's MPI library."""
    if linked.library is None:
        return None
    lib = os.path.realpath(linked.library)
    for L in REGISTRY.values():
        if L.family != linked.family:
            continue
        path = L.locate()
        if path is None:
            continue
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(path)))
        if lib.startswith(prefix.rstrip("/") + "/"):
            return L
    return None


#: the MPI families' names in messages
FAMILY_NAMES = {"openmpi": "OpenMPI", "mpich": "MPICH-ABI (MPICH, Intel MPI, Cray MPICH)"}


def _family_error(which: Launcher, linked: Linked, owner: Launcher | None) -> str:
    same = [n for n, L in REGISTRY.items() if L.family == linked.family]
    use = owner.name if owner is not None else " or ".join(same)
    family = FAMILY_NAMES.get(linked.family, linked.family)
    return (
        f"{linked.program} links {linked.soname}, an {family} library; --launcher "
        f"{which.name} starts {FAMILY_NAMES.get(which.family, which.family)} programs: use "
        f"--launcher {use}"
    )


def launch_args(
    which: Launcher, linked: Linked | None, extra: Sequence[str]
) -> tuple[list[str], dict[str, str], list[str]]:
    """(options, variables, notes): the launcher's own options, ``extra`` (given by the
    user), and for an MPI program under srun the ``--mpi`` the cluster needs and the
    variables its MPI needs there (:mod:`topobind.launch.mpi_launchers.slurm_mpi`)."""
    if which.name != "srun" or linked is None:
        return list(extra), {}, []
    from topobind.launch.mpi_launchers.slurm_mpi import srun_mpi

    got = srun_mpi(linked, list(extra))
    return got.args, got.env, got.notes
