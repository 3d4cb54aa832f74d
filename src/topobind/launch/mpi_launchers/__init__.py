"""The launchers topobind starts programs with: one module each, one registry.

:data:`REGISTRY` maps ``--launcher`` names to :class:`~topobind.launch.mpi_launchers.base.Launcher`
objects (the interface is in :mod:`.base`). Everything that names launchers is derived from
it: ``topobind run --launcher`` choices and help, ``topobind plan --format`` launcher
formats, the site schema's ``launcher`` enum (tests/launch/test_launchers.py checks the JSON file
against :func:`site_launchers`), ReFrame's launcher arguments and the docs' launcher table
(:func:`table_markdown`). To add a launcher (Flux, PRRTE's DVM): one module here with a
``Launcher`` subclass, one line in :data:`REGISTRY`, and its tests.

``mpirun`` is an alias: the OpenMPI on PATH (4 or 5, from its ``--version``), or the one
``--mpi openmpi4|openmpi5`` names. Which launcher and MPI a job gets is chosen in
:mod:`topobind.launch.resolve`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers.base import Launcher
from topobind.launch.mpi_launchers.flux import Flux
from topobind.launch.mpi_launchers.intelmpi import IntelMpi
from topobind.launch.mpi_launchers.mpich import Mpich
from topobind.launch.mpi_launchers.none import NoLauncher
from topobind.launch.mpi_launchers.openmpi import OpenMpi4, OpenMpi5
from topobind.launch.mpi_launchers.srun import Srun

#: innermost launcher first (its rank variables win over those it inherits): an mpirun or
#: mpiexec inside a Slurm job passes the batch step's SLURM_LOCALID=0 to every rank, and a
#: Flux instance started by srun passes its broker's SLURM_LOCALID to every task of flux run.
REGISTRY: dict[str, Launcher] = {
    launcher.name: launcher
    for launcher in (OpenMpi5(), OpenMpi4(), Mpich(), IntelMpi(), Flux(), Srun(), NoLauncher())
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
    return "; ".join(lines) + (
        ". Default: srun in Slurm, flux in Flux, else the MPI the program links (mpirun)"
    )


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
    """Every launcher's local-rank variables, innermost launcher first (rankstep/rankexec.c
    reads the same list: tests/launch/test_launchers.py compares them)."""
    return _ordered("local_rank_vars")


def local_rank(env: Mapping[str, str] | None = None) -> int | None:
    """This process's local rank from the launcher's variables, innermost launcher first
    (:func:`local_rank_vars`, then :func:`rank_vars`): an mpirun inside a Slurm job inherits
    the batch step's SLURM_PROCID=0 and SLURM_LOCALID=0 in every rank it starts, so
    OpenMPI's own variables and PMIx's must win over Slurm's (rankstep/rankexec.c reads them
    in the same order). A value that is not :func:`plain_rank` is skipped, as
    ``tb_env_number`` does without BAD."""
    e = os.environ if env is None else env
    for var in (*local_rank_vars(), *rank_vars()):
        number = plain_rank(e.get(var, ""))
        if number is not None:
            return number
    return None


#: the largest rank read from the environment (TB_MAX_RANK, libtb/include/tb/env.h)
MAX_RANK = 100_000_000


def plain_rank(text: str) -> int | None:
    """``text`` as a rank: plain ASCII digits, 0 .. :data:`MAX_RANK` (the rule of
    libtb/src/tb_env.c ``plain_number``); None otherwise ("", " 1", "+1", "-1", a
    Unicode digit such as "\u0661" or "\u00b2", which ``str.isdigit`` accepts)."""
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= MAX_RANK else None


def rank_vars() -> tuple[str, ...]:
    return _ordered("rank_vars")


def size_vars() -> tuple[str, ...]:
    return _ordered("size_vars")


def _ordered(attr: str) -> tuple[str, ...]:
    out: list[str] = []
    for launcher in REGISTRY.values():
        out += [v for v in getattr(launcher, attr) if v not in out]
    return tuple(out)


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
