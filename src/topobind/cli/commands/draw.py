"""``topobind draw``: a picture of a plan on its topology (PNG, or text for terminals)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from topobind.cli.commands.common import add_layout_args, add_topology_arg, plan_from
from topobind.draw.boxes import text_tree
from topobind.draw.device_badges import draw_gpu_png
from topobind.draw.png import draw_png
from topobind.emit.devices import device_lines
from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_bytes, atomic_write_text, output_file

EPILOG = """\
Draws packages, NUMA nodes, L3 domains and cores as nested boxes; every rank has its own
colour and each core shows r<rank>:<OpenMP thread numbers> of the threads placed on it.
Cores are labelled by hwloc logical index (L#n) and the OS indexes of their PUs, SMT
siblings included (what Slurm masks, OMP_PLACES and /proc use); NUMA node numbers are OS
indexes; the legend (text format: the list below the tree) gives every rank's PUs.

examples:
  topobind draw --layout per-l3 -o per-l3.png
  topobind draw -t synthetic:'pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)' \\
      --layout every-other-core --ranks 4 -o eoc.png
  topobind draw -t node042.xml --layout spread --threads 8 --smt --format text
"""


def add_subparser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "draw",
        help="draw a layout on the node: packages, NUMA nodes, L3 domains, cores, ranks",
        description="Draw where every rank and thread of a layout runs on the node topology.",
        epilog=EPILOG,
    )
    add_topology_arg(p)
    add_layout_args(p)
    p.add_argument(
        "--format",
        "-f",
        choices=("png", "text"),
        default=None,
        help="png or text (default: from -o FILE.png / FILE.txt; text on stdout without -o)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write FILE.png (picture) or FILE.txt (text); other extensions are refused "
        "(default: text to stdout)",
    )
    p.add_argument("--title", help="title of the picture (default: layout, ranks, threads, node)")
    p.add_argument(
        "--colour",
        choices=("auto", "always", "never"),
        default="auto",
        help="ANSI colours in text format (auto: when stdout is a terminal and NO_COLOR unset)",
    )
    p.set_defaults(func=run)


OUTPUT_FORMATS = {".png": "png", ".txt": "text"}


def output_format(output: str | None, asked: str | None) -> str:
    """png or text, from -o's extension (only .png and .txt) and --format; one-line errors."""
    if output is None:
        if asked == "png":
            raise TopobindError(
                "--format png needs -o FILE.png (a PNG is not printed to a terminal)"
            )
        return "text"
    ext = os.path.splitext(output)[1]
    fmt = OUTPUT_FORMATS.get(ext.lower())
    if fmt is None:
        what = f"extension {ext!r}" if ext else "no extension"
        raise TopobindError(
            f"-o {output}: {what}; topobind draw writes FILE.png (picture) or FILE.txt (text)"
        )
    if asked is not None and asked != fmt:
        raise TopobindError(
            f"--format {asked} does not match -o {output} ({ext} is {fmt}); drop --format "
            f"or name the file .{'png' if asked == 'png' else 'txt'}"
        )
    return fmt


def run(args: argparse.Namespace) -> int:
    if args.output is not None:  # before the plan: a FIFO or /dev/null.png is never replaced
        output_file(args.output, "-o")
    fmt = output_format(args.output, args.format)
    plan = plan_from(args)
    if fmt == "png":
        if any(r.gpus for r in plan.ranks):  # per-gpu: ranks, GPUs and NICs together
            atomic_write_bytes(args.output, draw_gpu_png(plan, title=args.title))
            print(f"wrote {args.output}")
            return 0

        atomic_write_bytes(args.output, draw_png(plan, title=args.title))
        print(f"wrote {args.output}")
        return 0
    colour = args.colour == "always" or (
        args.colour == "auto"
        and not args.output
        and sys.stdout.isatty()
        and not os.environ.get("NO_COLOR")
    )
    text = text_tree(plan, colour=colour)

    text += "".join(line + "\n" for line in device_lines(plan))
    if args.output:
        atomic_write_text(args.output, text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0
