"""Which resource manager this command runs under, and its allocation: :func:`detect` picks
the adapter (:mod:`topobind.topo.flux_allocation`, :mod:`topobind.topo.slurm_allocation`) whose
manager holds this process and has it make the one
:class:`~topobind.topo.allocation.Allocation` record of the command (apart from the record's
module, so that the adapters import the record and nothing imports in a circle).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from topobind.topo.allocation import NONE, Allocation


def detect(env: Mapping[str, str] | None = None) -> Allocation:
    """This job's allocation, from the adapter of the manager it runs under: Flux first (a
    Flux instance started inside a Slurm job keeps the job's ``SLURM_*``; the instance is
    what launches), then Slurm, else :data:`~topobind.topo.allocation.NONE`. Reads only the
    environment here (Flux: and its R); Slurm's tools run when a field that needs them is
    first used."""
    e = os.environ if env is None else env
    from topobind.topo import flux_allocation, slurm_allocation  # the adapters

    if flux_allocation.in_flux(e):
        return flux_allocation.allocation(e)
    if slurm_allocation.in_slurm(e):
        return slurm_allocation.allocation(e)
    return NONE
