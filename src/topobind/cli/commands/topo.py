"""``topobind plan`` (``topobind show`` is :mod:`topobind.cli.commands.show`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

# Only what building the parser needs: each format imports its emitter when it runs (inside
# the function that prints it), so 'topobind plan -f json' in a job script loads no drawing,
# gres, GPU or shell-quoting code.
from topobind.cli.arguments import host_arg
from topobind.cli.commands.common import (
    add_layout_args,
    add_topology_arg,
    plan_from,
    print_warnings,
)
from topobind.emit.openmpi import DEFAULT_RANKFILE
from topobind.errors import TopobindError, plural
from topobind.fsutil import atomic_write_text, output_file
from topobind.plan.model import Plan
from topobind.topo.topology import format_list

#: the launchers' formats (``plan_format`` of topobind.launch.mpi_launchers.REGISTRY, in its order),
#: named here so that a plan in another format imports no launcher (tests/cli/test_cli_plan.py
#: holds the two equal)
LAUNCHER_FORMATS = ("openmpi", "openmpi4", "mpich", "intelmpi", "srun")

PLAN_EPILOG = """\
examples:
  # 64 MPI ranks on every other core of a 2x EPYC 7742 node, Slurm flags:
  topobind plan -t synthetic:'pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)' \\
      --layout every-other-core --format srun
  # hybrid: one rank per L3 domain, OpenMP threads on its cores, OpenMPI 5 flags:
  topobind plan --layout per-l3 --format openmpi
  # OpenMP only, in a job script:
  eval "$(topobind plan --layout spread --threads 8 --format env)"

formats: text (table, default), picture (one cell per core, holding its rank), json (the
plan, docs/plan-format.md), env (bash exports), openmpi (OpenMPI 5 mpirun argv),
openmpi4, srun, mpich (Hydra's mpiexec -bind-to user:...), intelmpi (I_MPI_PIN_* exports
and mpiexec.hydra), rankfile, rankfile4, gres (Slurm gres.conf lines for the node's GPUs),
rank-env (per-gpu: a sh wrapper exporting each local rank's GPU/NIC variables), rankexec
(the per-rank step file: each local rank's %cpus= and variables; what the SPANK plugin
reads), numactl (a sh wrapper running each local rank under its numactl line: CPUs and
--mem policy; docs/memory.md).
When no --map-by expresses the plan, the openmpi formats refer to a rankfile, which is
written to --rankfile PATH (default ./topobind.rankfile; stderr says where). An existing file
there is not replaced unless --force is given.
"""


def add_subparser(subparsers: Any) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="plan a layout and print its OMP/mpirun/srun flags",
        description="Plan where every rank and thread runs, and emit the flags that do it.",
        epilog=PLAN_EPILOG,
    )
    add_topology_arg(plan)
    add_layout_args(plan)
    plan.add_argument(
        "--format",
        "-f",
        choices=(
            "text",
            "picture",
            "json",
            "env",
            *LAUNCHER_FORMATS,
            "rankfile",
            "rankfile4",
            "gres",
            "rank-env",
            "rankexec",
            "numactl",
        ),
        default="text",
    )
    plan.add_argument(
        "--check",
        action="store_true",
        help="only check the layout and its options, print nothing (srun's check of "
        "--topobind=LAYOUT before the step starts)",
    )
    plan.add_argument(
        "--slurm-cores",
        metavar="LIST",
        help="plan on these cores only, in Slurm's numbering (what the SPANK plugin passes: "
        "the cores its step holds on this node)",
    )
    plan.add_argument(
        "--rankfile",
        default=DEFAULT_RANKFILE,
        metavar="PATH",
        help="where the openmpi formats write a rankfile when one is needed",
    )
    plan.add_argument(
        "--force", action="store_true", help="replace an existing rankfile at --rankfile PATH"
    )
    plan.add_argument(
        "--host", type=host_arg, help="host name in rankfiles (default: the topology's host)"
    )
    plan.set_defaults(func=run_plan)


# --------------------------------------------------------------------------- plan
def plan_text(plan: Plan) -> str:
    # The text table's own printers (shell quoting, OMP places, memory, devices).
    import shlex

    from topobind.emit import launch_dict
    from topobind.emit.devices import device_lines
    from topobind.emit.omp import format_places
    from topobind.plan.memory import memory_text

    lines = [
        f"layout {plan.layout} on {plan.topology.source}: {plural(plan.nranks, 'rank')} x "
        f"{plural(plan.threads, 'thread')}"
        + (" (SMT: every PU)" if plan.smt else " (one PU per core)"),
        "PUs and NUMA nodes are OS indexes; L3 domains are hwloc logical indexes (L#).",
        f"{'rank':>4}  {'PUs (OS)':<24} {'NUMA':<8} {'L3 L#':<8} {'memory':<18} OMP places",
    ]

    for r in plan.ranks:
        lines.append(
            f"{r.rank:>4}  {format_list(r.cpus):<24} {format_list(r.numa):<8} "
            f"{format_list(r.l3):<8} {memory_text(r.memory):<18} {format_places(list(r.places))}"
        )
    lines.extend(device_lines(plan))  # per-gpu plans: GPUs, NIC, variables per rank
    launch = launch_dict(plan)
    lines.append("")
    lines.extend(f"export {k}={shlex.quote(v)}" for k, v in launch["env"].items())
    lines.append("OpenMPI 5: " + shlex.join(launch["openmpi"]))
    lines.append("OpenMPI 4: " + shlex.join(launch["openmpi4"]))
    lines.append("Slurm:     " + shlex.join(launch["srun"]))
    for note in (*plan.notes, *launch["notes"]):
        lines.append(f"note: {note}")
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def run_plan(args: argparse.Namespace) -> int:
    if args.check:
        from topobind.plan.layouts import parse_layout

        parse_layout(args.layout)
        return 0
    topo = None
    if args.slurm_cores is not None:
        from topobind.launch.spank_step import slurm_cores_topology

        topo = slurm_cores_topology(args.topology, args.slurm_cores)
    plan = plan_from(args, topo)
    notes = _print_plan(plan, args)  # launch notes of the flags printed
    print_warnings(plan, notes)
    return 0


def _print_plan(plan: Plan, args: argparse.Namespace) -> list[str]:
    """Print the plan in ``args.format``; the notes of the launch flags printed (text and
    json carry theirs)."""
    fmt = args.format
    if fmt == "json":
        from topobind import jsonfmt
        from topobind.emit import launch_dict

        print(jsonfmt.dumps(plan.to_dict(launch_dict(plan))))
    elif fmt == "text":
        print(plan_text(plan))
    elif fmt == "picture":
        from topobind.draw.boxes import text_grid

        print(text_grid(plan))
    elif fmt == "env":
        return _print_env(plan)
    elif fmt in LAUNCHER_FORMATS:
        return _print_argv(plan, args)
    elif fmt == "rank-env":
        from topobind.emit.devices import rank_env_script

        sys.stdout.write(rank_env_script(plan))
    elif fmt == "rankexec":
        from topobind.launch.spank_step import step_text

        sys.stdout.write(step_text(plan))
    elif fmt == "numactl":
        from topobind.emit.memory import numactl_script

        sys.stdout.write(numactl_script(plan))
    elif fmt == "gres":
        from topobind.emit.gres import gres_conf

        sys.stdout.write(gres_conf(plan.topology))
    elif fmt in ("rankfile", "rankfile4"):
        from topobind.emit.openmpi import rankfile_text

        sys.stdout.write(rankfile_text(plan, 5 if fmt == "rankfile" else 4, args.host))
    return []


def _print_env(plan: Plan) -> list[str]:
    import shlex

    from topobind.emit.devices import env_notes
    from topobind.emit.omp import omp_env, omp_notes

    for k, v in omp_env(plan).items():
        print(f"export {k}={shlex.quote(v)}")
    return omp_notes(plan) + env_notes(plan)


def _print_argv(plan: Plan, args: argparse.Namespace) -> list[str]:
    """A launcher's flags (``--format NAME``: the launcher's ``plan_format``): the variables
    to export, the command; its rankfile written to --rankfile PATH."""
    import shlex

    from topobind.launch.mpi_launchers import by_plan_format

    out = by_plan_format(args.format).emit(plan, args.rankfile, args.host)
    for path, text in out.files:
        _write_rankfile(path, text, args.force)
        print(f"topobind: wrote rankfile {os.path.abspath(path)}", file=sys.stderr)
    for k, v in out.env.items():
        print(f"export {k}={shlex.quote(v)}")
    print(shlex.join(out.argv))
    return out.notes


def _write_rankfile(path: str, text: str, force: bool = False) -> None:
    """Write the rankfile into an existing directory; never create directories, never
    replace a file silently."""

    if os.path.lexists(path) and not force:
        raise TopobindError(
            f"rankfile {path} exists; give --force to replace it, or another --rankfile PATH"
        )
    output_file(path, "--rankfile", "give another --rankfile PATH")  # never a FIFO, /dev/null
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise TopobindError(
            f"cannot write rankfile {path}: {exc.strerror or exc}; give another --rankfile PATH"
        ) from exc
