"""The ``topobind`` command: thin argparse front end over the engine modules.

Each subcommand lives in the module that owns its concept and exposes
``add_subparser(subparsers)``; that function registers the parser and sets
``func`` (a callable taking the parsed namespace and returning an exit status).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from topobind import __version__
from topobind.errors import TopobindError
from topobind.inputs import OneLineParser

# Modules that provide subcommands, in the order --help lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "topobind.commands.topo",  # show, plan
    "topobind.commands.run",  # run, env, verify
    "topobind.commands.spack",  # spack check, spack externals
    "topobind.commands.report",  # report
    "topobind.commands.draw",  # draw
    "topobind.commands.bench",  # bench
    "topobind.commands.site",  # site list, site check
    "topobind.commands.validate",  # validate, calibrate
)


# Commands that job scripts call on every launch: their parser is built alone, so a plan
# does not pay for importing the report/ReFrame modules (see `make bench-plan`).
FAST_COMMANDS: dict[str, str] = {
    "show": "topobind.commands.topo",
    "plan": "topobind.commands.topo",
    "env": "topobind.commands.run",
}


class _Parser(OneLineParser):
    """argparse's formatter asks shutil for the terminal width, and shutil imports the zlib,
    bz2 and lzma modules: a few ms at every start-up, for every plan. Ask os directly."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=_width())  # type: ignore[call-arg]


def _width() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size().columns
    except (ValueError, OSError):
        columns = 80
    return max(columns - 2, 20)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="topobind",
        description=(
            "Topology-aware binding for HPC jobs: detect the node (hwloc), plan a layout, "
            "emit OMP_*/mpirun/srun flags, run and verify kernels, report."
        ),
        epilog="Run 'topobind COMMAND --help' for the options and examples of each command.",
    )
    parser.add_argument("--version", action="version", version=f"topobind {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only else SUBCOMMAND_MODULES:
        importlib.import_module(name).add_subparser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    fast = bool(argv) and argv[0] in FAST_COMMANDS
    if fast:  # a plan makes ~10^4 objects and no garbage cycles: no collector passes
        gc.disable()
    try:
        return _dispatch(argv)
    finally:
        if fast:
            gc.enable()


def _dispatch(argv: list[str]) -> int:
    parser = build_parser(FAST_COMMANDS.get(argv[0]) if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except TopobindError as exc:  # the one place errors are printed
        for line in exc.error_lines():
            print(f"topobind: error: {line}", file=sys.stderr)
        if exc.summary:
            print(f"topobind: {exc.summary}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:
        return 0


def entry() -> None:
    """The ``topobind`` command (pyproject's console script): :func:`main`, then exit.

    After the commands job scripts call on every launch (show, plan, env), it flushes the
    output and leaves with ``os._exit``: Python's teardown of every module and object would
    add about 6 % to a plan (``make bench-plan``), and these commands leave no temporary
    file, thread or exit handler behind."""
    status = main()
    if len(sys.argv) > 1 and sys.argv[1] in FAST_COMMANDS:
        for stream in (sys.stdout, sys.stderr):
            try:  # (not contextlib.suppress: importing contextlib costs start-up time)  # noqa: SIM105
                stream.flush()
            except (BrokenPipeError, ValueError):  # the reader is gone (| head), or closed
                pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()
