"""Arguments shared by the commands that read a topology and plan a layout."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from topobind import cpukinds, layouts, slurm
from topobind.errors import PlanError, TopobindError, plural
from topobind.inputs import count_arg
from topobind.layouts import one_rank_per_domain
from topobind.plan import Plan
from topobind.topology import NAMED_TOPOLOGIES, Topology, load

TOPOLOGY_HELP = (
    "where the node topology comes from: 'live' (default: this machine, only the PUs this "
    "job/cgroup may use), an hwloc XML file (lstopo-no-graphics --of xml > node.xml on a "
    "compute node), synthetic:'pack:2 numa:4 l3:4 core:4 pu:2', or a named node: "
    + ", ".join(NAMED_TOPOLOGIES)
)


def add_topology_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", "-t", default="live", metavar="SRC", help=TOPOLOGY_HELP)


def add_layout_arg(
    parser: argparse.ArgumentParser, required: bool = True, help_prefix: str = ""
) -> None:
    """--layout (help from the layout registry) and the options some layouts read."""
    parser.add_argument(
        "--layout",
        "-l",
        required=required,
        default=None if required else "compact",
        metavar="L",
        help=help_prefix + layouts.layout_help(),
    )
    for layout in layouts.REGISTRY:
        for opt in layout.options:
            parser.add_argument(
                opt.flag,
                dest=opt.dest,
                type=opt.type,
                metavar=opt.metavar,
                help=f"({layout.usage}) {opt.help}",
            )


def add_layout_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    add_layout_arg(parser, required)
    parser.add_argument(
        "--ranks", "-r", type=count_arg("--ranks"), metavar="R", help="MPI ranks on the node"
    )
    parser.add_argument(
        "--threads",
        "-T",
        type=count_arg("--threads"),
        metavar="T",
        help="OpenMP threads per rank",
    )
    parser.add_argument(
        "--smt",
        action="store_true",
        help="use every PU (hardware thread) of a core; default: one thread per core, on its "
        "first PU",
    )
    add_device_args(parser)


def add_device_args(parser: argparse.ArgumentParser) -> None:
    """--cpukind: every layout (the per-gpu layout's own options come from the registry)."""

    parser.add_argument(
        "--cpukind",
        choices=cpukinds.CHOICES,
        default=cpukinds.DEFAULT,
        help="on nodes with several kinds of cores: plan on the most performant kind "
        "(default), the most efficient one, or all",
    )


def topology_from(args: argparse.Namespace) -> Topology:
    return load(args.topology)


def plan_from(args: argparse.Namespace, topo: Topology | None = None) -> Plan:
    topo = topo if topo is not None else topology_from(args)
    return layouts.plan_for_options(topo, args, args.ranks)


#: environment variable: "1" = plan without the allocation's task count (see plan_for_job)
IGNORE_ALLOCATION_TASKS = "TOPOBIND_IGNORE_ALLOCATION_TASKS"


def plan_for_job(args: argparse.Namespace, topo: Topology | None = None) -> Plan:
    """:func:`plan_from` for commands that launch inside this job (run, env, verify).

    Inside Slurm, without --ranks, the ranks per node are the tasks per node the job asked
    for (``SLURM_NTASKS_PER_NODE``, or ``SLURM_NTASKS`` / ``SLURM_JOB_NUM_NODES``) unless the
    layout sets the count itself (one rank per domain). An explicit --ranks wins. When the
    plan's ranks per node differ from the allocation's, the plan carries a warning.
    ``TOPOBIND_IGNORE_ALLOCATION_TASKS=1`` turns this off (the layout's own default applies):
    for wrappers such as the ReFrame checks, whose job holds the node with one task and
    launches every step itself."""
    fixed = one_rank_per_domain(args.layout)
    if os.environ.get(IGNORE_ALLOCATION_TASKS) == "1":
        return plan_from(args, topo)

    try:
        alloc = slurm.tasks_per_node()
    except TopobindError:
        if args.ranks is None and not fixed:
            raise
        alloc = None  # not needed for the plan; an uneven allocation is the user's call
    ranks = args.ranks
    from_alloc = ranks is None and alloc is not None and not fixed
    if from_alloc:
        assert alloc is not None
        ranks = alloc.count
    topo = topo if topo is not None else topology_from(args)
    try:
        plan = layouts.plan_for_options(topo, args, ranks)
    except PlanError as exc:
        if not from_alloc:
            raise
        assert alloc is not None
        raise PlanError(
            f"{exc} (the {alloc.count} ranks per node come from the allocation, "
            f"{alloc.source}; give --ranks to override)"
        ) from exc
    if alloc is not None and plan.nranks != alloc.count:
        why = (
            f"--ranks {args.ranks} is used"
            if args.ranks is not None
            else f"layout {args.layout} sets one rank per domain; give --ranks to change it"
        )
        warning = (
            f"the plan has {plural(plan.nranks, 'rank')} per node but the allocation has "
            f"{plural(alloc.count, 'task')} per node ({alloc.source}); {why}"
        )
        plan = replace(plan, warnings=(*plan.warnings, warning))
    return plan


def print_warnings(plan: Plan, notes: list[str] | tuple[str, ...] = ()) -> None:
    """The plan's warnings (and launch notes) on stderr, so job logs show them."""
    for warning in plan.warnings:
        print(f"topobind: warning: {warning}", file=sys.stderr)
    for note in (*plan.notes, *notes):
        print(f"topobind: note: {note}", file=sys.stderr)
