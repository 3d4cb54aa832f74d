"""``topobind env``: the OMP_* exports of a plan, for ``eval`` in job scripts.

A module of its own so that a job script's ``eval "$(topobind env ...)"`` imports the
planner and the OpenMP emitter only, not the launch stack of ``topobind run``
(:mod:`topobind.cli.commands.run`); a job spanning nodes that hold different shares imports
the per-node planning (:mod:`topobind.launch.run`) where it needs it.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from topobind.cli.commands.common import (
    add_layout_args,
    add_topology_arg,
    plan_from,
    print_warnings,
    request_from,
)
from topobind.emit.devices import env_notes
from topobind.emit.omp import omp_notes, script_env
from topobind.plan.model import Plan

if TYPE_CHECKING:
    from topobind.launch.shape import NodePlan
    from topobind.plan.request import PlanRequest


def add_subparser(subparsers: Any) -> None:
    env = subparsers.add_parser(
        "env",
        help="print the OMP_* exports of a plan, for eval in job scripts",
        description='For scripts that launch by themselves: eval "$(topobind env --layout L)". '
        "In a job whose nodes hold different shares the variables must fit every node: "
        "otherwise only inside a job step (srun), for that node, else an error.",
    )
    add_topology_arg(env)
    add_layout_args(env, required=False)
    env.set_defaults(func=run_env)


def _node_groups(req: PlanRequest) -> list[NodePlan] | None:
    """Plans per group of the job's nodes (None: one plan fits every node)."""
    alloc = req.allocation
    if alloc is None or (alloc.nodes < 2 and not alloc.restricted):
        return None
    # A job on several nodes: the per-node plans of the launch engine (imported only here).
    from topobind.launch import run as jobrun

    return jobrun.node_groups(req)


def run_env(args: argparse.Namespace) -> int:
    req = request_from(args, job=True)  # once: the allocation rides on it
    groups = _node_groups(req)
    if groups is not None:
        # the job's nodes differ: this node's group, when well defined
        from topobind.launch.node_groups import env_group

        plan = env_group(groups, req.allocation.step_host if req.allocation else None).plan
    else:
        plan = plan_from(args, job=True, req=req)
    # per-gpu: per-rank variables; the memory placement: where it is applied
    print_warnings(plan, omp_notes(plan) + env_notes(plan) + _env_memory_note(plan))
    for k, v in script_env(plan).items():
        print(f"export {k}={shlex.quote(v)}")
    return 0


def _env_memory_note(plan: Plan) -> list[str]:
    """``topobind env`` exports no memory placement: say where it is applied."""
    from topobind.plan.memory import needs_step

    if not needs_step(plan):
        return []
    return [
        "the memory placement (--mem, --pages) is not in these exports: launch with "
        "'topobind run' (its per-rank step applies it) or wrap the program with "
        "'topobind plan -f numactl'"
    ]
