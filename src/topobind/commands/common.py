"""Arguments shared by the commands that read a topology and plan a layout."""

from __future__ import annotations

import argparse

from topobind.layouts import LAYOUTS, make_plan
from topobind.plan import Plan
from topobind.topology import Topology, load

TOPOLOGY_HELP = (
    "where the node topology comes from: 'live' (default: this machine, only the PUs this "
    "job/cgroup may use), an hwloc XML file (lstopo-no-graphics --of xml > node.xml on a "
    "compute node), or synthetic:'pack:2 numa:4 l3:4 core:4 pu:2'"
)


def add_topology_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", "-t", default="live", metavar="SRC", help=TOPOLOGY_HELP)


def add_layout_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "--layout",
        "-l",
        required=required,
        default=None if required else "compact",
        metavar="L",
        help="; ".join(f"{k}: {v}" for k, v in LAYOUTS.items()),
    )
    parser.add_argument("--ranks", "-r", type=int, metavar="R", help="MPI ranks on the node")
    parser.add_argument("--threads", "-T", type=int, metavar="T", help="OpenMP threads per rank")
    parser.add_argument(
        "--smt",
        action="store_true",
        help="use every PU (hardware thread) of a core; default: one thread per core, on its "
        "first PU",
    )


def topology_from(args: argparse.Namespace) -> Topology:
    return load(args.topology)


def plan_from(args: argparse.Namespace, topo: Topology | None = None) -> Plan:
    topo = topo if topo is not None else topology_from(args)
    return make_plan(topo, args.layout, ranks=args.ranks, threads=args.threads, smt=args.smt)
