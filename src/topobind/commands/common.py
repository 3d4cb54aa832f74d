"""Arguments shared by the commands that read a topology and plan a layout."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields

from topobind import cpukinds, layouts, request
from topobind.inputs import count_arg
from topobind.plan import Plan
from topobind.request import PlanRequest
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


def request_from(args: argparse.Namespace, *, job: bool = False) -> PlanRequest:
    """The typed request of a planning command's options, made here once: the layout parsed,
    each field of :class:`~topobind.request.PlanRequest` taken from the option of its name, the
    per-layout options that were given. ``job``: a command that launches inside this job, whose
    ranks per node follow the Slurm allocation unless ``TOPOBIND_IGNORE_ALLOCATION_TASKS=1``
    (read here only)."""
    given = vars(args)
    dests = sorted({opt.dest for layout in layouts.REGISTRY for opt in layout.options})
    plain = {f.name for f in fields(PlanRequest)} - {"layout", "parameter", "options"}
    return request.parse(
        args.layout,
        options={d: given[d] for d in dests if given.get(d) is not None},
        **{name: given[name] for name in plain if name in given},
        follow_allocation=job and os.environ.get(request.IGNORE_ALLOCATION_TASKS) != "1",
    )


def plan_from(args: argparse.Namespace, topo: Topology | None = None) -> Plan:
    """The plan of a command that plans (show, plan, draw): the layout's own rank default
    unless --ranks is given."""
    req = request_from(args)
    return request.plan(topo if topo is not None else load(req.topology), req, req.ranks)


def plan_for_job(args: argparse.Namespace, topo: Topology | None = None) -> Plan:
    """The plan of a command that launches inside this job (run, env, verify): see
    :func:`topobind.request.plan_for_job`."""
    return request.plan_for_job(request_from(args, job=True), topo)


def print_warnings(plan: Plan, notes: list[str] | tuple[str, ...] = ()) -> None:
    """The plan's warnings (and launch notes) on stderr, so job logs show them."""
    for warning in plan.warnings:
        print(f"topobind: warning: {warning}", file=sys.stderr)
    for note in (*plan.notes, *notes):
        print(f"topobind: note: {note}", file=sys.stderr)
