"""The per-gpu layout's command-line vocabulary, apart from its planner
(:mod:`topobind.plan.gpu_layout`): the layout registry offers these options on every planning
command, and a plan without GPUs must not import the GPU planner to build its parser."""

from __future__ import annotations

#: per-gpu's help in the layout registry
GPU_HELP = (
    "one rank per GPU (--gpus-per-rank G), threads on the cores local to it, with its NIC; "
    "--reserve, --order gpu|cpu"
)
RESERVES = ("none", "first-core-per-l3", "first-core-per-numa")
ORDERS = ("gpu", "cpu")
