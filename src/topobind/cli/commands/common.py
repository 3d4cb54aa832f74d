"""Arguments shared by the commands that read a topology and plan a layout."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from topobind.cli.arguments import (  # noqa: F401 (the topology options, re-exported)
    TOPOLOGY_HELP,
    add_topology_arg,
    choice_arg,
    count_arg,
    topology_from,
)
from topobind.plan import layouts, memory, request
from topobind.plan.model import Plan
from topobind.plan.request import PlanRequest
from topobind.topo import cpukinds
from topobind.topo.manager import detect
from topobind.topo.topology import Topology, load


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
        help=help_prefix + layouts.layout_help() + "; auto: the choice of topobind tune's "
        "record for this program and node type (else compact)",
    )
    for layout in layouts.REGISTRY:
        for opt in layout.options:
            most, choices = opt.most, opt.choices
            kind = count_arg(opt.flag, 1, most) if most else choice_arg(opt.flag, choices)
            parser.add_argument(
                opt.flag,
                dest=opt.dest,
                type=kind,
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
    add_memory_args(parser)


def size_arg(text: str) -> int:
    """``--pages-min SIZE``: bytes, or a number with K, M, G or T (powers of 1024)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in memory.SIZE_UNITS and t[-1:] else ""
    digits = t[: len(t) - len(unit)]
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 12 or int(digits) == 0:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a size: give bytes or a number with K, M, G (e.g. 512M)"
        )
    return int(digits) * memory.SIZE_UNITS[unit]


class _Given(argparse.Action):
    """Stores the value and notes the option as given (``--layout auto`` keeps it)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.given_options = {*getattr(namespace, "given_options", ()), self.dest}


def add_memory_args(parser: argparse.ArgumentParser) -> None:
    """``--mem``, ``--pages``, ``--pages-min`` (plan, run, env, verify, draw)."""
    parser.add_argument(
        "--mem",
        choices=memory.POLICIES,
        default="local",
        action=_Given,
        help="memory policy of each rank over its NUMA nodes: local (default: bind on one "
        "node, interleave over several), bind, interleave, preferred, none (kernel default)",
    )
    parser.add_argument(
        "--pages",
        choices=memory.PAGES,
        default="thp",
        action=_Given,
        help="page size of the program's large allocations: 1G, 2M (hugetlb, through the "
        "shim libtbhugepages.so), thp (default: the kernel's), 4k (THP off), auto (the "
        "largest whose free pool holds --pages-min)",
    )
    parser.add_argument(
        "--pages-min",
        type=size_arg,
        metavar="SIZE",
        help="memory each rank needs on large pages (e.g. 4G): the pools must hold it",
    )


def add_device_args(parser: argparse.ArgumentParser) -> None:
    """--cpukind: every layout (the per-gpu layout's own options come from the registry)."""

    parser.add_argument(
        "--cpukind",
        choices=cpukinds.CHOICES,
        default=cpukinds.DEFAULT,
        help="on nodes with several kinds of cores: plan on the most performant kind "
        "(default), the most efficient one, or all",
    )


def request_from(args: argparse.Namespace, *, job: bool = False) -> PlanRequest:
    """The typed request of a planning command's options, made here once: the layout parsed,
    each field of :class:`~topobind.plan.request.PlanRequest` taken from the option of its name, the
    per-layout options that were given. ``job``: a command that launches inside this job, whose
    ranks per node follow the allocation unless ``TOPOBIND_IGNORE_ALLOCATION_TASKS=1`` (read
    here only); its allocation is made here, once (:func:`topobind.topo.allocation.detect`:
    the adapter of the manager it runs under), and rides on the request."""
    auto = args.layout == "auto"
    if auto:  # topobind tune's record for this program and node type
        args.layout = _auto_layout(args)
    req = _request(args, job)
    if auto:
        req = _auto_honoured(args, req, job)
    return req


def _request(args: argparse.Namespace, job: bool) -> PlanRequest:
    given = vars(args)
    dests = sorted({opt.dest for layout in layouts.REGISTRY for opt in layout.options})
    plain = set(PlanRequest._fields) - {"layout", "parameter", "options"}
    return request.parse(
        args.layout,
        options={d: given[d] for d in dests if given.get(d) is not None},
        **{name: given[name] for name in plain if name in given},
        follow_allocation=job and os.environ.get(request.IGNORE_ALLOCATION_TASKS) != "1",
        allocation=detect() if job else None,
    )


def _auto_layout(args: argparse.Namespace) -> str:
    """``--layout auto``: the layout (and --mem, --pages, ranks, threads not given) of the
    tune record for this program (run's; env and plan name none) and node type, said on
    stderr in one line (with the record's fields the user's options replaced); compact when
    there is none."""
    from topobind.tune.auto import FIELDS, apply, choose  # only for --layout auto

    words = list(getattr(args, "program", None) or [])
    words = words[1:] if words[:1] == ["--"] else words
    choice, line = choose(load(args.topology), words or None)
    explicit = set(getattr(args, "given_options", ()))
    explicit |= {n for n in ("ranks", "threads") if getattr(args, n, None) is not None}
    args.auto_user = {n: getattr(args, n, None) for n in FIELDS}  # for the fallback
    values, said = apply(choice, vars(args), explicit)
    for name, value in values.items():
        if hasattr(args, name):
            setattr(args, name, value)
    print(f"topobind: {line}{said}", file=sys.stderr)
    return choice.layout


def _auto_honoured(args: argparse.Namespace, req: PlanRequest, job: bool) -> PlanRequest:
    """The record's choice planned and checked here; when this node cannot honour it now,
    compact with the user's own options, said in one line."""
    from topobind.tune.auto import honoured

    program = list(getattr(args, "program", None) or [])
    program = program[1:] if program[:1] == ["--"] else program
    why = honoured(req, program[0] if program else None)
    if why is None:
        return req
    chosen = {n: getattr(args, n, None) for n in ("layout", *args.auto_user)}
    args.layout = "compact"
    for name, value in args.auto_user.items():
        if hasattr(args, name):
            setattr(args, name, value)
    fallback = _request(args, job)
    if fallback == req:  # the user's own options: their error, as without auto
        for name, value in chosen.items():
            setattr(args, name, value)
        return req
    print(f"topobind: --layout auto: this node cannot honour the record's choice now ({why}): "
          "compact with your options", file=sys.stderr)  # fmt: skip
    return fallback


def plan_from(args: argparse.Namespace, topo: Topology | None = None, *, job: bool = False,
              req: PlanRequest | None = None) -> Plan:  # fmt: skip
    """The plan of a planning command's options through the one planning entry
    (:func:`topobind.plan.request.plan`). ``job``: a command that launches inside this job
    (run, env, verify), whose ranks per node follow the allocation and whose plan carries the
    warnings of :func:`thread_warnings`; otherwise (show, plan, draw) the layout's own rank
    default unless --ranks is given. ``req``: the request of these options, where the command
    made it already."""
    req = req if req is not None else request_from(args, job=job)
    topo = topo if topo is not None else load(req.topology)
    plan = request.plan(topo, req)
    if not job:
        return plan

    def plans_with(threads: int) -> bool:  # the advice --threads N must lead to a plan
        from topobind.errors import TopobindError

        try:
            request.plan(topo, req._replace(threads=threads))
        except TopobindError:
            return False
        return True

    cpt = req.allocation.cpus_per_task if req.allocation is not None else ""
    threads = thread_warnings(plan.threads, args.threads, os.environ, plans_with, cpt)
    return plan._replace(warnings=(*plan.warnings, *threads)) if threads else plan


def thread_warnings(
    planned: int,
    given: int | None,
    env: Mapping[str, str],
    plans_with: Callable[[int], bool] = lambda threads: True,
    cpus_per_task: str = "",
) -> list[str]:
    """Warnings when the plan's threads per rank disagree with what the job says: the
    CPUs Slurm gives each task (``cpus_per_task``: the allocation's, ``SLURM_CPUS_PER_TASK``)
    or an exported ``OMP_NUM_THREADS``
    (which topobind replaces). ``given``: ``--threads``, None when the layout chose.
    ``plans_with(n)``: whether the same request plans with ``--threads n`` (advised only then;
    otherwise the advice is ``-c`` of the plan's threads)."""
    out = []
    src = "--threads" if given is not None else "chosen by the layout"
    cpt = cpus_per_task
    if cpt.isdigit() and int(cpt) != planned:
        cpus = int(cpt)
        fix = (
            f"{cpus - planned} CPU(s) of each task idle"
            if cpus > planned
            else "threads beyond the task's CPUs"
        )
        advice = (
            f"give --threads {cpus} or change -c"
            if plans_with(cpus)
            else f"--threads {cpus} does not fit this layout here: ask Slurm for -c {planned}"
        )
        out.append(
            f"{planned} thread(s) per rank ({src}) but Slurm gives each task {cpus} CPU(s) "
            f"(SLURM_CPUS_PER_TASK={cpt}): {fix}; {advice}"
        )
    omp = env.get("OMP_NUM_THREADS", "")
    if omp and omp != str(planned):
        keep = "" if given is not None else f"; give --threads {omp} to keep it"
        out.append(
            f"OMP_NUM_THREADS={omp} is exported but {planned} thread(s) per rank are planned "
            f"({src}): topobind exports OMP_NUM_THREADS={planned}{keep}"
        )
    return out


def print_warnings(plan: Plan, notes: list[str] | tuple[str, ...] = ()) -> None:
    """The plan's warnings (and launch notes) on stderr, so job logs show them."""
    for warning in plan.warnings:
        print(f"topobind: warning: {warning}", file=sys.stderr)
    for note in (*plan.notes, *notes):
        print(f"topobind: note: {note}", file=sys.stderr)
