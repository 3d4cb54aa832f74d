"""The per-gpu layout's options: what the layout registry (:mod:`topobind.layouts`) offers on
the command line and the planner (:mod:`topobind.layout_gpu`) reads. Apart from both, so the
registry needs no GPU planning code to list them."""

from __future__ import annotations

from dataclasses import dataclass

#: per-gpu's help in the layout registry
GPU_HELP = (
    "one rank per GPU (--gpus-per-rank G), threads on the cores local to it, with its NIC; "
    "--reserve, --order gpu|cpu"
)
RESERVES = ("none", "first-core-per-l3", "first-core-per-numa")
ORDERS = ("gpu", "cpu")


@dataclass(frozen=True)
class GpuOptions:
    gpus_per_rank: int = 1
    reserve: str = "none"
    order: str = "gpu"
