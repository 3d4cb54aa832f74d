"""Emitters: Plan -> launch text/argv. No topology parsing here; only the Plan is read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importing an emitter (emit.devices for show) imports no plan model
    from topobind.plan.model import Plan


def launch_dict(plan: Plan) -> dict[str, Any]:
    """The ``launch`` section of a plan's JSON: every launcher's flags for this plan."""
    # Here, not at the top: importing one emitter (emit.devices for show) loads this package.
    from topobind.emit.omp import omp_env
    from topobind.emit.openmpi import openmpi_argv
    from topobind.emit.srun import srun_argv

    ompi5 = openmpi_argv(plan, version=5)
    ompi4 = openmpi_argv(plan, version=4)
    srun = srun_argv(plan)
    out: dict[str, Any] = {
        "env": omp_env(plan),
        "openmpi": ompi5.argv,
        "openmpi4": ompi4.argv,
        "srun": srun.argv,
        "notes": sorted(set(ompi5.notes + ompi4.notes + srun.notes)),
    }
    _mem_bind(plan, out)
    if ompi5.rankfile is not None:
        out["rankfile"] = ompi5.rankfile
    if ompi4.rankfile is not None:
        out["rankfile4"] = ompi4.rankfile
    return out


def _mem_bind(plan: Plan, out: dict[str, Any]) -> None:
    """srun's ``--mem-bind`` for the plan's memory placement, or the note saying why not."""
    from topobind.emit.memory import srun_mem_bind

    flag, note = srun_mem_bind(plan)
    if flag:
        out["srun"] = [*out["srun"], flag]
    if note:
        out["notes"] = sorted({*out["notes"], note})
