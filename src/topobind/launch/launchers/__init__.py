"""The launchers topobind starts programs with: one module each, one registry.

:data:`REGISTRY` maps ``--launcher`` names to :class:`~topobind.launch.launchers.base.Launcher`
objects (the interface is in :mod:`.base`). Everything that names launchers is derived from
it: ``topobind run --launcher`` choices and help, ``topobind plan --format`` launcher
formats, the site schema's ``launcher`` enum (tests/launch/test_launchers.py checks the JSON file
against :func:`site_launchers`), ReFrame's launcher arguments and the docs' launcher table
(:func:`table_markdown`). To add a launcher (Flux, PRRTE's DVM): one module here with a
``Launcher`` subclass, one line in :data:`REGISTRY`, and its tests.

``mpirun`` is an alias: the OpenMPI on PATH (4 or 5, from its ``--version``), or the one
``--mpi openmpi4|openmpi5`` names.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from topobind.errors import TopobindError
from topobind.launch.launchers.base import Launcher, real_dir
from topobind.launch.launchers.intelmpi import IntelMpi
from topobind.launch.launchers.mpich import Mpich
from topobind.launch.launchers.none import NoLauncher
from topobind.launch.launchers.openmpi import OpenMpi4, OpenMpi5
from topobind.launch.launchers.srun import Srun

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.launchers.linked import Linked
    from topobind.plan.model import Plan

#: innermost launcher first (its rank variables win over those it inherits): an mpirun or
#: mpiexec inside a Slurm job passes the batch step's SLURM_LOCALID=0 to every rank.
REGISTRY: dict[str, Launcher] = {
    launcher.name: launcher
    for launcher in (OpenMpi5(), OpenMpi4(), Mpich(), IntelMpi(), Srun(), NoLauncher())
}
#: names that pick a launcher by what is installed
ALIASES = {"mpirun": "the OpenMPI mpirun on PATH (4.x or 5.x, detected; --mpi picks one)"}
#: the MPI flavours ``--mpi`` names (OpenMPI's major versions)
OPENMPI = ("openmpi4", "openmpi5")


def names() -> tuple[str, ...]:
    """``--launcher`` choices: every registered launcher, then the aliases."""
    return (*REGISTRY, *ALIASES)


def get(name: str, mpi: str | None = None) -> Launcher:
    """The launcher called ``name`` (``mpirun``: the OpenMPI ``mpi`` names, default 5)."""
    if name == "mpirun":
        return REGISTRY[mpi if mpi in OPENMPI else "openmpi5"]
    try:
        return REGISTRY[name]
    except KeyError:
        raise TopobindError(unknown("launcher", name, names())) from None


def unknown(what: str, given: str, choices: tuple[str, ...] | list[str]) -> str:
    """``unknown launcher 'srn' (did you mean 'srun'?); choose one of ...``."""
    from topobind.errors import did_you_mean

    hint = did_you_mean(given, choices)
    return f"unknown {what} {given!r}{hint}; choose one of {', '.join(choices)}"


def help_text() -> str:
    """``--launcher`` help: every choice with its line."""
    lines = [f"{n}: {launcher.help}" for n, launcher in REGISTRY.items()]
    lines += [f"{n}: {about}" for n, about in ALIASES.items()]
    return "; ".join(lines) + ". Default: srun in Slurm, else the MPI the program links (mpirun)"


def plan_formats() -> tuple[str, ...]:
    return tuple(L.plan_format for L in REGISTRY.values() if L.plan_format)


def by_plan_format(fmt: str) -> Launcher:
    return next(L for L in REGISTRY.values() if L.plan_format == fmt)


def site_launchers() -> list[str]:
    """The site file's ``launcher:`` values: ``local`` (ReFrame's; no launcher for one rank,
    mpirun for more), every registered launcher but ``none``, and the aliases."""
    return ["local", *(n for n in REGISTRY if n != "none"), *ALIASES]


def reframe_name(site_launcher: str) -> str:
    """ReFrame's launcher for a site file's ``launcher:`` value."""
    if site_launcher in ("local", "none"):
        return "local"
    return "mpirun" if site_launcher in ALIASES else REGISTRY[site_launcher].reframe


def from_reframe(name: str) -> str:
    """The site launcher for a ReFrame launcher (a partition not from a site file):
    ReFrame's ``srun`` and ``local`` are topobind's; its mpirun/mpiexec are ``mpirun``."""
    return name if name in ("srun", "local") else "mpirun"


def local_rank_vars() -> tuple[str, ...]:
    """Every launcher's local-rank variables, innermost launcher first (kernels/rankexec.c
    reads the same list: tests/launch/test_launchers.py compares them)."""
    return _ordered("local_rank_vars")


def rank_vars() -> tuple[str, ...]:
    return _ordered("rank_vars")


def size_vars() -> tuple[str, ...]:
    return _ordered("size_vars")


def _ordered(attr: str) -> tuple[str, ...]:
    out: list[str] = []
    for launcher in REGISTRY.values():
        out += [v for v in getattr(launcher, attr) if v not in out]
    return tuple(out)


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

    from topobind.launch.launchers.openmpi import mpi_flavour

    candidates = list(REGISTRY[prefer].programs[:1]) if prefer in OPENMPI else []
    found = [c for c in candidates if os.path.exists(c)] or [
        real_dir(p) for p in [shutil.which("mpirun")] if p
    ]
    if not found:
        raise TopobindError("mpirun not found; install OpenMPI (make setup) or use --launcher srun")
    return found[0], mpi_flavour(found[0])


def choose(plan: Plan, requested: str | None, family: str | None = None) -> Launcher:
    """The launcher asked for, else srun inside Slurm, else for several ranks the MPI
    family the program links (``family``; OpenMPI when unknown), else none."""
    from topobind.topo.slurm_allocation import in_slurm

    if requested is not None:
        which = get(requested)
        if which.needs_slurm and not in_slurm():
            raise TopobindError(
                f"--launcher {requested} needs a Slurm allocation (SLURM_JOB_ID unset); use "
                "salloc/sbatch or --launcher mpirun"
            )
        return which
    if in_slurm():
        return REGISTRY["srun"]
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
) -> Resolved:
    """The launcher for this job, found on this machine, checked against the MPI the
    program links: a launcher of another MPI family is refused (naming the right one); with
    no launcher asked for outside Slurm, the one installed with the program's MPI is used,
    with a note when the ``mpirun`` on PATH is another."""
    from topobind.launch.launchers.linked import linked_mpi

    linked = linked_mpi(program) if program and os.path.isfile(program) else None
    which = choose(plan, requested, linked.family if linked else None)
    notes: list[str] = []
    owner = installed_with(linked) if linked is not None else None
    if linked is not None and which.family and requested is None and which.family != linked.family:
        which = owner or _installed_of(linked.family) or which  # the program's own MPI
    if linked is not None and which.family:
        if which.family != linked.family:
            raise TopobindError(_family_error(which, linked, owner))
        if requested is None or requested == "mpirun":
            if owner is not None and owner.name != which.name and mpi is None and mpirun is None:
                import shutil

                on_path = shutil.which("mpirun") or "none"
                notes.append(
                    f"{linked.program} links {linked.library} ({owner.name}); launching with "
                    f"--launcher {owner.name}, not the mpirun on PATH ({on_path})"
                )
                which = owner
        elif owner is not None and owner.name != which.name:
            notes.append(
                f"{linked.program} links {linked.library}, installed with {owner.name}, but "
                f"--launcher {which.name} starts it: the MPI versions may not match"
            )
    probe, why = mpi_probe(linked, owner or (which if which.family else None))
    notes += why
    if which.name in OPENMPI:
        prefer = mpi or (requested if requested in OPENMPI else which.name if notes else None)
        if mpirun:
            from topobind.launch.launchers.openmpi import mpi_flavour

            path, flavour = mpirun, mpi_flavour(mpirun)
        else:
            path, flavour = find_openmpi(prefer)
        return Resolved(REGISTRY[flavour], path, flavour, {}, linked, tuple(notes), probe)
    if which.family:
        found = which.find(mpirun)
        return Resolved(which, found.path, which.name, found.env, linked, tuple(notes), probe)
    return Resolved(which, None, None, {}, linked, tuple(notes), probe)


def mpi_probe(linked: Linked | None, owner: Launcher | None) -> tuple[str, list[str]]:
    """The placement probe for ``--verify``: an MPI program's is the MPI probe built with
    its MPI (``whereami-mpi-NAME``), so a launch that cannot start MPI fails verification;
    the plain probe (and a note) when that one is not built."""
    if linked is None:
        return "whereami", []
    name = owner.probe if owner is not None and owner.probe else ""
    if name:
        from topobind.kernels.programs import find_kernel

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
    variables its MPI needs there (:mod:`topobind.launch.launchers.slurm_mpi`)."""
    if which.name != "srun" or linked is None:
        return list(extra), {}, []
    from topobind.launch.launchers.slurm_mpi import srun_mpi

    got = srun_mpi(linked, list(extra))
    return got.args, got.env, got.notes


def masks(plan: Plan, name: str) -> list[tuple[int, ...]]:
    return get(name).masks(plan)


def table_markdown() -> str:
    """The docs' launcher table: what each launcher expresses, what topobind adds."""
    heads = ("launcher", "CPU masks", "map by object", "rankfile", "memory binding",
             "per-node plans", "topobind adds")  # fmt: skip
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for n, L in REGISTRY.items():
        v = L.native
        cells = (f"`{n}`", v.masks, v.map_by, v.rankfile, v.memory, v.per_node, v.adds)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"
