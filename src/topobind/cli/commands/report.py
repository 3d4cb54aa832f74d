"""``topobind report``: fleet report from kernel result files."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from topobind.cli.arguments import add_number_arg, count_arg
from topobind.report.analysis import MAX_SLOW_LIMIT, MAX_WARMUP, Options
from topobind.report.build import build_report

EPILOG = """\
Reads kernel results (topobind.result/1 JSON, one per run; JSON Lines too) from files and
directories (searched recursively for *.json, *.jsonl), groups them by host, kernel, layout
and page size, and writes into DIR:
  summary.txt   the summary printed here      summary.md   the same for a CI comment
  report.json   every figure, machine-readable (docs/report.md)
  index.html    one self-contained page (pictures embedded; no network needed)
  *.png         per-host spread, ECDF, page-size and matrix pictures, and a drawing of
                every layout in the results where its threads ran (layout-*.png)
DIR is replaced as a whole (never half-written); an existing non-empty DIR must be an old
report (hold report.json).

Slow host: its median is worse than the fleet median (median of host medians) by more than
--slow-mads robust standard deviations (MAD x 1.4826) AND by more than --slow-pct percent.

Layouts: results that name a layout are drawn from their placement (the PU each thread
ran on) on the node topology: --topology SRC, else the results' params.topology, else this
machine's for results made on it; what cannot be drawn is listed with the reason.

exit status: 0 report written; 1 slow hosts found and --fail-on-slow given; 2 bad input
(corrupt/truncated file, mixed units, no results: one line naming the file, DIR untouched).

examples:
  topobind report results/ -o report/
  topobind report results/*/stream-*.json -o /tmp/stream-report --slow-pct 8
  topobind report results/ -o report/ --format markdown --fail-on-slow   # in CI
  python tests/fleetgen.py --hosts 40 --runs 7 --slow gen-node0007:1.12 -o /tmp/fleet
  topobind report /tmp/fleet -o /tmp/fleet-report        # a generated (synthetic) fleet
  topobind report results/ -o report/ --topology node042.xml   # draw the layouts on it
"""


def add_subparser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="fleet report from kernel results: tables, slow hosts, pictures, HTML",
        description=(
            "Summarise kernel results across a fleet: per host and kernel the runs, median, "
            "best, worst, CV, max slowdown and the median's confidence interval; slow hosts "
            "first; ECDF, per-host, page-size and matrix pictures; one HTML page."
        ),
        epilog=EPILOG,
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="result files or directories")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="report directory")
    p.add_argument(
        "--format",
        "-f",
        choices=("text", "markdown"),
        default="text",
        help="what to print: the text summary (default) or markdown for a CI comment",
    )
    slow_bounds = (0.0, MAX_SLOW_LIMIT)
    add_number_arg(p, "--slow-mads", slow_bounds, 3.0, "K",
                   "slow needs a host median more than K fleet MADs worse")  # fmt: skip
    add_number_arg(p, "--slow-pct", slow_bounds, 5.0, "P",
                   "... and more than P percent worse than the fleet median")  # fmt: skip
    p.add_argument("--fail-on-slow", action="store_true", help="exit 1 when any slow host is found")
    p.add_argument(
        "--warmup",
        type=count_arg("--warmup", 0, MAX_WARMUP, "default 0"),
        default=0,
        metavar="W",
        help="report each host's first W runs (by timestamp) apart as warm-up and leave them "
        "out of every figure (default 0: every result file is a complete run that did its "
        "own warm-up; use 1 when runs were back to back in one job and the first was cold)",
    )
    p.add_argument("--title", default="topobind fleet report", help="title of the HTML page")
    p.add_argument(
        "--topology",
        "-t",
        metavar="SRC",
        default=None,
        help="node topology to draw the results' layouts on, for every host: an hwloc XML "
        "file (lstopo-no-graphics --of xml on a compute node), synthetic:'...' or 'live' "
        "(default: the results' params.topology, or this machine for results made here)",
    )
    p.set_defaults(func=run)


def _check_output(output: str) -> None:
    """-o DIR under the rule of every output (:mod:`topobind.fsutil`), before the results are
    read: the new report is made beside DIR, so DIR's parent must take it too."""
    from topobind.fsutil import output_dir, writable_dir

    if output in ("", "-") or not os.path.isdir(output):  # an old report: only its parent
        output_dir(output, "-o")
    parent = os.path.dirname(os.path.abspath(output))
    if os.path.isdir(parent):
        writable_dir(parent, f"-o {output}", "give another -o DIR")


def run(args: argparse.Namespace) -> int:
    _check_output(args.output)
    opts = Options(warmup=args.warmup, slow_mads=args.slow_mads, slow_pct=args.slow_pct)
    built = build_report(args.results, args.output, opts, title=args.title, topology=args.topology)
    if os.environ.get("TOPOBIND_REPORT_TIMING"):
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in built.seconds.items())
        print(f"topobind report: timing: {phases}", file=sys.stderr)
    sys.stdout.write(built.markdown if args.format == "markdown" else built.text)
    if args.format == "text":
        sys.stdout.write(f"report written to {built.directory}/ (index.html, report.json)\n")
    return 1 if args.fail_on_slow and built.report.slow else 0
