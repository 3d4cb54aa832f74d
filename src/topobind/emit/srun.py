"""Slurm ``srun`` flags: one ``--cpu-bind=mask_cpu`` mask per task, OS PU indexes.

Known traps (each also written into the plan's notes), as measured on Slurm 22.05 with
task/affinity (tests/launch/test_local_slurm.py):
- A mask is honoured only when all its CPUs belong to the step; otherwise the launch fails
  ("CPU binding outside of job step allocation"). A step holds all of the job's CPUs on the
  node unless ``--exact``, ``srun --exclusive`` or ``-c N`` (which implies ``--exact``) give
  it only the lowest free CPUs. So no ``--cpus-per-task`` is emitted, and the job should
  hold the whole node (``sbatch --exclusive``). (The srun manual says masks need the whole
  node; 22.05 is more lenient, the advice is the same.)
- ``--hint`` cannot be combined with ``--cpu-bind``; none is emitted.
- A mask holding every CPU of the node means "unbound" to Slurm.
"""

from typing import NamedTuple

from topobind.emit.devices import srun_extra
from topobind.plan.model import Plan

STEP_NOTE = (
    "srun applies --cpu-bind=mask_cpu only to CPUs the step holds: allocate the whole "
    "node (sbatch --exclusive) and add no -c/--exact to this srun; --hint cannot be "
    "combined with --cpu-bind"
)


class SrunLaunch(NamedTuple):
    argv: list[str]
    masks: list[str]
    notes: list[str]


def cpu_mask(cpus: tuple[int, ...] | list[int]) -> str:
    """OS PU indexes -> Slurm hex mask (``0x5`` for CPUs 0 and 2)."""
    value = 0
    for c in cpus:
        value |= 1 << c
    return hex(value)


def decode_mask(mask: str) -> list[int]:
    value = int(mask, 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def srun_argv(plan: Plan, nodes: int | None = None) -> SrunLaunch:
    """``srun`` flags; ``nodes``: a launch over that many nodes (``--nodes``, ``--ntasks``),
    the plan applied on each."""
    masks = [cpu_mask(r.cpus) for r in plan.ranks]
    argv = ["srun"]
    if nodes is not None:
        argv += [f"--nodes={nodes}", f"--ntasks={plan.nranks * nodes}"]
    argv += [f"--ntasks-per-node={plan.nranks}", f"--cpu-bind=mask_cpu:{','.join(masks)}"]
    notes = [STEP_NOTE]
    extra, device_notes = srun_extra(plan)  # per-gpu plans: --gpu-bind=none
    argv += extra
    notes += device_notes
    all_pus = set(plan.topology.pus)
    if any(set(r.cpus) == all_pus for r in plan.ranks) and plan.nranks == 1:
        notes.append("a mask holding every CPU of the node is treated by Slurm as unbound")
    return SrunLaunch(argv=argv, masks=masks, notes=notes)
