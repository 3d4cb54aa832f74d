"""srun and MPI programs: the ``--mpi`` plugin srun must load for a program that links an
MPI when the cluster's ``MpiDefault`` is ``none`` (else every rank fails in MPI_Init, e.g.
OpenMPI's "OMPI was not built with SLURM's PMI support"), and for an Intel MPI program under
``--mpi=pmi2`` Slurm's PMI-2 library (``I_MPI_PMI_LIBRARY``). Asked once per job, on the
batch host: ``scontrol show config`` (MpiDefault) and ``srun --mpi=list`` (the plugins)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers.linked import Linked, find_library, is_intel_mpi

#: the plugins each MPI family starts under, best first (OpenMPI: PMIx; MPICH ABI: PMI-2)
PLUGINS = {"openmpi": ("pmix", "pmi2"), "mpich": ("pmi2", "pmix")}
#: Slurm's PMI-2 client library (Debian: libpmi2-0; Slurm's RPMs: slurm-libpmi)
PMI2_LIBS = ("libpmi2.so", "libpmi2.so.0")


@dataclass(frozen=True)
class SrunMpi:
    """What srun needs to start an MPI program: its options, variables for the ranks, notes."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def srun_mpi(linked: Linked, extra: list[str]) -> SrunMpi:
    """:func:`srun_mpi_args`, then for an Intel MPI program the PMI library it needs under
    the ``--mpi`` srun will use (:func:`intel_pmi`)."""
    args, notes = srun_mpi_args(linked, extra)
    if not is_intel_mpi(linked):
        return SrunMpi(args, {}, notes)
    env, more = intel_pmi(linked, mpi_type(args))
    return SrunMpi(args, env, [*notes, *more])


def srun_mpi_args(linked: Linked, extra: list[str]) -> tuple[list[str], list[str]]:
    """(srun options, notes): ``extra`` with ``--mpi=TYPE`` first when the cluster's
    MpiDefault starts no MPI, the user said nothing (``--srun-args '--mpi=...'``,
    ``SLURM_MPI_TYPE``), and srun has a plugin for the program's MPI; an error naming
    ``--mpi``/``SLURM_MPI_TYPE`` when it has none."""
    if _given_type(extra) is not None or os.environ.get("SLURM_MPI_TYPE"):
        return extra, []
    default = mpi_default()
    if default is None or default.lower() != "none":
        return extra, []
    listed = _output(["srun", "--mpi=list"], None) or ""
    have = set(re.findall(r"(?:^|\s|:)(pmix(?:_v\d+)?|pmi2|cray_shasta)\b", listed))
    for want in PLUGINS.get(linked.family, ()):
        if want in have:
            note = (
                f"{linked.program} links {linked.soname} and this cluster's MpiDefault is none: "
                f"srun --mpi={want} starts its MPI (set SLURM_MPI_TYPE or --srun-args "
                "'--mpi=TYPE' to choose another)"
            )
            return [f"--mpi={want}", *extra], [note]
    raise TopobindError(
        f"{linked.program} links {linked.soname} (an MPI), this cluster's MpiDefault is none "
        f"and srun offers no {'/'.join(PLUGINS.get(linked.family, ('pmix',)))} plugin "
        f"(srun --mpi=list: {' '.join(sorted(have)) or 'none'}): pass --srun-args "
        "'--mpi=TYPE' or export SLURM_MPI_TYPE=TYPE with a type your MPI supports"
    )


def mpi_type(args: list[str]) -> str | None:
    """The ``--mpi`` srun will use with ``args``: given there, else ``SLURM_MPI_TYPE``, else
    the cluster's MpiDefault (None when unknown)."""
    return _given_type(args) or os.environ.get("SLURM_MPI_TYPE") or mpi_default()


@functools.cache
def mpi_default() -> str | None:
    """The cluster's MpiDefault (``scontrol show config``), asked once per process: both
    :func:`srun_mpi_args` and :func:`mpi_type` need it."""
    return _output(["scontrol", "show", "config"], r"^MpiDefault\s*=\s*(\S+)")


def intel_pmi(linked: Linked, kind: str | None) -> tuple[dict[str, str], list[str]]:
    """({I_MPI_PMI_LIBRARY: Slurm's libpmi2}, notes) for an Intel MPI program under
    ``srun --mpi=pmi2`` (Intel MPI then speaks PMI-2; without it, its own PMI-1 client,
    which Slurm's pmi2 plugin also serves). Under ``pmix`` Intel MPI finds PMIx by itself;
    a PMI-2 library given there would fail every rank in MPI_Init: refused."""
    given = os.environ.get("I_MPI_PMI_LIBRARY")
    plugin = (kind or "").lower()
    if given:
        if plugin.startswith("pmix") and "pmi2" in os.path.basename(given):
            raise TopobindError(
                f"I_MPI_PMI_LIBRARY={given} is Slurm's PMI-2 library but srun starts "
                f"--mpi={kind}: every rank of {linked.program} would fail in MPI_Init; pass "
                "--srun-args '--mpi=pmi2' or unset I_MPI_PMI_LIBRARY"
            )
        return {}, []
    if plugin != "pmi2":
        return {}, []
    lib = slurm_pmi2_library()
    if lib is None:
        return {}, [
            f"{linked.program} links Intel MPI and srun starts --mpi=pmi2, but Slurm's PMI-2 "
            "library (libpmi2.so) is not found: Intel MPI falls back to its own PMI-1 client; "
            "install it (Debian: libpmi2-0, Slurm RPMs: slurm-libpmi) or export "
            "I_MPI_PMI_LIBRARY=/path/to/libpmi2.so"
        ]
    return {"I_MPI_PMI_LIBRARY": lib}, [
        f"{linked.program} links Intel MPI: I_MPI_PMI_LIBRARY={lib} (Slurm's PMI-2 library, "
        "for srun --mpi=pmi2)"
    ]


def slurm_pmi2_library() -> str | None:
    """Slurm's libpmi2: beside Slurm's own libraries (``<prefix>/lib{,64}`` of srun), then
    where the loader looks (``LD_LIBRARY_PATH``, the system's directories)."""
    srun = shutil.which("srun")
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(srun))) if srun else None
    slurm_dirs = [os.path.join(prefix, d) for d in ("lib", "lib64")] if prefix else []
    for name in PMI2_LIBS:
        found = find_library(name, slurm_dirs)
        if found is not None:
            return found
    return None


def _given_type(args: list[str]) -> str | None:
    """The type of a ``--mpi=TYPE`` / ``--mpi TYPE`` among srun's options, or None."""
    for i, a in enumerate(args):
        if a.startswith("--mpi="):
            return a.partition("=")[2]
        if a == "--mpi":
            return args[i + 1] if i + 1 < len(args) else ""
    return None


def _output(argv: list[str], pattern: str | None) -> str | None:
    """The command's stdout (or the first group of ``pattern`` in it); None when it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout + done.stderr
    if pattern is None:
        return text
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else None
