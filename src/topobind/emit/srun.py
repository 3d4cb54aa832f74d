"""Slurm ``srun`` flags: one ``--cpu-bind=mask_cpu`` mask per task, OS PU indexes.

Known traps (each also written into the plan's notes):
- Slurm applies ``mask_cpu`` only when the step holds every CPU of the node; allocate the
  whole node (``--exclusive``) or Slurm silently binds otherwise.
- ``--hint`` cannot be combined with ``--cpu-bind``; none is emitted.
- A mask holding every CPU of the node means "unbound" to Slurm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topobind.plan import Plan


@dataclass(frozen=True)
class SrunLaunch:
    argv: list[str]
    masks: list[str]
    notes: list[str] = field(default_factory=list)


def cpu_mask(cpus: tuple[int, ...] | list[int]) -> str:
    """OS PU indexes -> Slurm hex mask (``0x5`` for CPUs 0 and 2)."""
    value = 0
    for c in cpus:
        value |= 1 << c
    return hex(value)


def decode_mask(mask: str) -> list[int]:
    value = int(mask, 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def srun_argv(plan: Plan) -> SrunLaunch:
    masks = [cpu_mask(r.cpus) for r in plan.ranks]
    cpus_per_task = max(len(plan.core_pus(r)) for r in plan.ranks)
    argv = [
        "srun",
        f"--ntasks-per-node={plan.nranks}",
        f"--cpus-per-task={cpus_per_task}",
        f"--cpu-bind=mask_cpu:{','.join(masks)}",
    ]
    notes = [
        "srun applies --cpu-bind=mask_cpu only when the step holds every CPU of the node "
        "(allocate the node with --exclusive); --hint cannot be combined with --cpu-bind"
    ]
    all_pus = set(plan.topology.pus)
    if any(set(r.cpus) == all_pus for r in plan.ranks) and plan.nranks == 1:
        notes.append("a mask holding every CPU of the node is treated by Slurm as unbound")
    return SrunLaunch(argv=argv, masks=masks, notes=notes)
