"""``topobind bench KERNEL``: run a kernel (or HPL) on a planned layout and keep the results."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from topobind.bench import hpl
from topobind.bench import runs as bench
from topobind.cli.arguments import count_arg
from topobind.cli.commands.common import add_layout_arg, add_topology_arg, topology_from
from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text, output_dir
from topobind.measure import registry as kernel_registry
from topobind.measure.programs import KernelError
from topobind.measure.results import load_result
from topobind.plan import memory, request
from topobind.plan.model import Plan
from topobind.topo.topology import Topology, synthetic_description
from topobind.validation import progress

DESCRIPTION = (
    "Plan a layout on this node (live topology), run a benchmark kernel with it, save each "
    "result JSON and print a summary of the repeats."
)

EPILOG = """\
examples:
  topobind bench stream --repeat 10                    # all cores, compact, 10 runs
  topobind bench stream --layout every-other-core -- --elements 20M --trials 10
  topobind bench dgemm --threads 2 --pages 2M --strict -- --n 1024 --reps 5
  topobind bench latency --threads 1 --pages 1G -- --sizes 1G
  topobind bench c2c
  topobind bench hpl --ranks 2 --n 2000               # real HPL (from Debian's hpcc)
  topobind bench hpl --ranks 2 --n 2000 --repeat 3    # 3 runs, one result file each
  topobind bench hpl --ranks 2 --mem-fraction 0.5 --pages 1G

Each run's result (JSON, schema topobind.result/1) is saved as
RESULTS/<host>/<kernel>/<UTC timestamp>-<layout>.json; a progress line per run goes to
stderr and a summary (median, best, CV of the headline) to stdout. Arguments after '--' go
to the kernel (see kernels/bin/KERNEL --help). A kernel failure (e.g. --strict and the page
size could not be obtained) prints the kernel's one-line message, writes nothing and exits
with the kernel's status (3 for pages).

hpl: writes hpccinf.txt (HPL.dat plus HPCC's 4 PTRANS lines) into a scratch directory and
runs Debian's hpcc under /usr/bin/mpirun (OpenMPI 4, which hpcc is linked against) with the
plan's --map-by/--bind-to flags. hpcc always runs all HPC Challenge tests (HPL is the last
one); only the HPL section of hpccoutf.txt is read (xhpl on PATH is used instead if present).
N defaults to --mem-fraction of the total RAM, rounded down to a multiple of NB; P x Q is the
most square grid with P <= Q and P*Q = ranks.
"""


def _names() -> list[str]:
    return [k.name for k in kernel_registry.KERNELS]


def add_subparser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help=f"run a kernel ({', '.join(_names())}) and save its results",
        description=DESCRIPTION,
        epilog=EPILOG,
        usage="topobind bench KERNEL [options] [-- kernel arguments]",
    )
    # argparse (3.11) mishandles '--' below nested subparsers: take the rest verbatim and
    # parse it in run() after splitting at the first '--'.
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="KERNEL ...", help=", ".join(_names()))
    p.set_defaults(func=run)


def inner_parser() -> argparse.ArgumentParser:
    """Parser of everything after 'topobind bench' (up to a '--')."""
    from topobind.cli.main import OneLineParser  # the project's one-line errors

    common = argparse.ArgumentParser(add_help=False)
    _add_options(common)
    p = OneLineParser(
        prog="topobind bench",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kernels = p.add_subparsers(
        dest="kernel", metavar="KERNEL", required=True, parser_class=OneLineParser
    )
    for spec in kernel_registry.KERNELS:  # one subcommand per row of the kernel registry
        name, text = spec.name, spec.summary
        k = kernels.add_parser(
            name,
            parents=[common],
            help=text,
            description=f"topobind bench {name}: {text}.",
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "hpl":
            _add_hpl_options(k)
    return p


#: the most runs --repeat takes (one result file each; 10^9 ran until the disk was full)
MAX_REPEAT = 1000


def _add_options(p: argparse.ArgumentParser) -> None:
    add_topology_arg(p)
    add_layout_arg(p, required=False, help_prefix="layout (default compact); ")
    p.add_argument(
        "--ranks",
        "-r",
        type=count_arg("--ranks"),
        metavar="R",
        help="ranks (default 1; hpl: required)",
    )
    p.add_argument(
        "--threads",
        "-T",
        type=count_arg("--threads"),
        metavar="T",
        help="OpenMP threads per rank (default: all)",
    )
    p.add_argument("--smt", action="store_true", help="use every PU (hardware thread) of a core")
    p.add_argument(
        "--pages",
        metavar="P",
        help="page size of the big buffers: 1G|2M|thp|4k|auto (kernels); 1G|2M|none (hpl, via the "
        "libtbhugepages.so LD_PRELOAD shim; default none)",
    )
    p.add_argument(
        "--mem",
        choices=memory.POLICIES,
        default="local",
        help="memory policy of the rank over its NUMA nodes (as topobind run): local (default), "
        "bind, interleave, preferred, none",
    )
    p.add_argument("--strict", action="store_true", help="fail when the pages are not obtained")
    p.add_argument(
        "--repeat",
        "-n",
        type=count_arg("--repeat", 1, MAX_REPEAT),
        default=1,
        metavar="N",
        help=f"runs (at most {MAX_REPEAT})",
    )
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress lines (for cron); the summary is still printed",
    )
    p.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="root of the saved results (default ./results in a checkout, else results/ in the "
        "state folder: see topobind --version)",
    )


def _add_hpl_options(p: argparse.ArgumentParser) -> None:
    hpl = p.add_argument_group("hpl")
    hpl.add_argument("--n", type=int, metavar="N", help="HPL matrix order (rounded down to NB)")
    hpl.add_argument("--nb", type=int, default=192, metavar="NB", help="HPL block size (192)")
    hpl.add_argument(
        "--mem-fraction",
        type=float,
        default=0.02,
        metavar="F",
        help="without --n: N from F x total RAM for the matrix (default 0.02, small)",
    )


def run(outer: argparse.Namespace) -> int:
    argv = list(outer.argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = inner_parser().parse_args(argv)
    if args.results is None:
        from topobind.paths import bench_results_default

        args.results = str(bench_results_default())
    output_dir(args.results, "--results")  # before any run: each run's result is saved there
    topo = topology_from(args)
    if args.kernel == "hpl":
        return _run_hpl(args, topo, extra)
    plan = bench_plan(args, topo, ranks=args.ranks or 1, threads=args.threads, pages=args.pages)
    memory_of = plan.ranks[0].memory
    step = _progress(args, f"{args.kernel} {plan.layout}")
    try:
        runs = bench.run_repeats(
            args.kernel,
            plan,
            repeat=args.repeat,
            pages=memory_of.pages if args.pages and memory_of else args.pages,
            strict=args.strict,
            extra=extra,
            results_root=args.results,
            progress=step,
            topology=synthetic_description(topo),
        )
    except KernelError as exc:
        exc.exit_status = exc.returncode  # the kernel's own status
        raise
    print(bench.summary_text(runs))
    return 0 if all(r.result.valid for r in runs) else 4


def bench_plan(
    args: argparse.Namespace,
    topo: Topology,
    *,
    ranks: int | None,
    threads: int | None,
    pages: str | None,
) -> Plan:
    """The plan of a bench run, through the one planning entry (``request.plan``): the
    layout with ``--mem`` and the kernels' ``--pages`` (checked against this machine's pools
    as for ``topobind run``; hpl's pages go through its own shim, so its plan keeps the
    kernel's)."""
    if pages is not None and pages not in memory.PAGES:
        raise TopobindError(f"--pages {pages!r}: choose one of {', '.join(memory.PAGES)}")
    req = request.parse(
        args.layout,
        topology=args.topology,
        ranks=ranks,
        threads=threads,
        smt=args.smt,
        mem=args.mem,
        pages=pages or "thp",
    )
    return request.plan(topo, req)


def _progress(args: argparse.Namespace, check: str) -> Any:
    """A callback for each finished run: a progress line per run (live on a terminal, plain
    otherwise, none with --quiet), with the runs done of planned and the time left."""
    prog = progress.make(quiet=args.quiet)
    node = os.uname().nodename
    prog.plan(node, check, args.repeat)
    prog.start(node, check)
    done = 0

    def step(line: str) -> None:
        nonlocal done
        done += 1
        prog.finish(node, check, note=line.split("] ", 1)[-1])
        if done < args.repeat:
            prog.start(node, check)
        else:
            prog.close()

    return step


def _run_hpl(args: argparse.Namespace, topo: Any, extra: list[str]) -> int:
    if args.ranks is None:
        raise TopobindError("topobind bench hpl needs --ranks R (MPI ranks, e.g. --ranks 2)")
    if extra:
        raise TopobindError(
            f"hpl takes no kernel arguments (got '-- {' '.join(extra)}'): use --n, --nb, "
            "--mem-fraction"
        )
    if args.strict and (args.pages or "none") == "none":
        raise TopobindError("hpl --strict needs --pages 1G or 2M (it fails when they are not got)")
    if args.repeat < 1:
        raise TopobindError(f"--repeat {args.repeat}: give 1 run or more")
    plan = bench_plan(args, topo, ranks=args.ranks, threads=args.threads or 1, pages=None)
    valid = 0
    step = _progress(args, f"hpl {plan.layout}")
    for i in range(args.repeat):
        out = hpl.run_hpl(
            plan,
            n=args.n,
            nb=args.nb,
            mem_fraction=args.mem_fraction,
            pages=args.pages or "none",
            progress=None if args.quiet else bench.stderr_progress,
        )
        pages = out.doc.get("pages") or {}
        if args.strict and pages.get("fallback"):
            err = TopobindError(
                f"hpl run {i + 1}: asked for {args.pages} pages with --strict, got "
                f"{pages.get('kib')} KiB pages ({str(pages.get('note', ''))[:160]}); "
                "nothing written for this run"
            )
            err.exit_status = 3
            raise err
        dest = bench.result_path(args.results, out.doc["host"], "hpl", plan.layout)
        atomic_write_text(dest, json.dumps(out.doc, indent=1) + "\n")
        res = load_result(dest)
        valid += res.valid
        o = out.output
        print(
            f"hpl run {i + 1}/{args.repeat} N={o.n} NB={o.nb} P={o.p} Q={o.q}: "
            f"{o.gflops:.6g} GFLOP/s in {o.time:.3f} s, residual {o.residual:.4g} "
            f"{'PASSED' if o.passed else 'FAILED'} ({out.program})"
        )
        print(f"result: {dest}")
        step(f"{o.gflops:.6g} GFLOP/s")
    return 0 if valid == args.repeat else 4
