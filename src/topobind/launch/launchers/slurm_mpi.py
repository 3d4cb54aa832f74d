"""srun and MPI programs: the ``--mpi`` plugin srun must load for a program that links an
MPI when the cluster's ``MpiDefault`` is ``none`` (else every rank fails in MPI_Init, e.g.
OpenMPI's "OMPI was not built with SLURM's PMI support"). Asked once per job, on the batch
host: ``scontrol show config`` (MpiDefault) and ``srun --mpi=list`` (the plugins)."""

from __future__ import annotations

import os
import re
import subprocess

from topobind.errors import TopobindError
from topobind.launch.launchers.linked import Linked

#: the plugins each MPI family starts under, best first (OpenMPI: PMIx; MPICH ABI: PMI-2)
PLUGINS = {"openmpi": ("pmix", "pmi2"), "mpich": ("pmi2", "pmix")}


def srun_mpi_args(linked: Linked, extra: list[str]) -> tuple[list[str], list[str]]:
    """(srun options, notes): ``extra`` with ``--mpi=TYPE`` first when the cluster's
    MpiDefault starts no MPI, the user said nothing (``--srun-args '--mpi=...'``,
    ``SLURM_MPI_TYPE``), and srun has a plugin for the program's MPI; an error naming
    ``--mpi``/``SLURM_MPI_TYPE`` when it has none."""
    if any(a == "--mpi" or a.startswith("--mpi=") for a in extra):
        return extra, []
    if os.environ.get("SLURM_MPI_TYPE"):
        return extra, []
    default = _output(["scontrol", "show", "config"], r"^MpiDefault\s*=\s*(\S+)")
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


def _output(argv: list[str], pattern: str | None) -> str | None:
    """The command's stdout (or the first group of ``pattern`` in it); None when it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout + done.stderr
    if pattern is None:
        return text
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else None
