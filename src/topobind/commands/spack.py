"""``topobind spack check`` and ``topobind spack externals``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EPILOG = """\
examples:
  topobind spack check                       # spack.yaml, every overlay, topobind's recipe
  topobind spack check site_configs/mysite/spack-packages.yaml
  topobind spack externals > site_configs/mysite/spack-packages.yaml

'check' validates against Spack's environment schema and the versions/variants/virtuals of
Spack's builtin recipes (../shared/spack); only a real 'spack concretize' on the cluster can
confirm the rest. Exit status 1 when anything is wrong, one line per problem.
"""


def add_subparser(subparsers: Any) -> None:
    sp = subparsers.add_parser(
        "spack",
        help="check spack.yaml and the Spack recipe; print this machine's externals",
        description="Spack support: checks without Spack, and externals for site overlays.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = sp.add_subparsers(dest="spack_command", metavar="check|externals", required=True)
    check = sub.add_parser("check", help="check environment files and the recipe")
    check.add_argument("files", nargs="*", type=Path, help="default: all of the project's")
    check.set_defaults(func=run_check)
    ext = sub.add_parser("externals", help="print a packages: section for this machine")
    ext.set_defaults(func=run_externals)


def run_check(args: argparse.Namespace) -> int:
    from topobind.spackcheck import check_all

    errors = check_all([p.resolve() for p in args.files] or None)
    for e in errors:
        print(e)
    if not errors:
        print("spack check: all files valid", file=sys.stderr)
    return 1 if errors else 0


def run_externals(args: argparse.Namespace) -> int:
    from topobind.spack_externals import detect, packages_yaml

    found = detect()
    if not found:
        print(
            "topobind: no externals found on this machine (hwloc, openmpi, slurm, munge, "
            "openblas, pmix, python)",
            file=sys.stderr,
        )
        return 0
    sys.stdout.write(packages_yaml(found))
    return 0
