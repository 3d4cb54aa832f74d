"""The ``topobind`` command: one argparse parser over the command modules.

Each command lives in a module of ``topobind.cli.commands`` that exposes
``add_subparser(subparsers)``; that function registers the command's parser and sets
``func`` (a callable taking the parsed namespace and returning an exit status). A command
line naming a command imports only that command's module (a plan in a job script loads no
report or ReFrame code); ``topobind --help`` and unknown commands build the whole parser.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from topobind import __version__
from topobind.errors import TopobindError

#: the module that declares each command, in the order --help lists them
COMMANDS: dict[str, str] = {
    "show": "topobind.cli.commands.show",
    "plan": "topobind.cli.commands.topo",
    "run": "topobind.cli.commands.run",
    "env": "topobind.cli.commands.env",
    "verify": "topobind.cli.commands.run",
    "spack": "topobind.cli.commands.spack",
    "report": "topobind.cli.commands.report",
    "draw": "topobind.cli.commands.draw",
    "bench": "topobind.cli.commands.bench",
    "site": "topobind.cli.commands.site",
    "validate": "topobind.cli.commands.validate",
    "calibrate": "topobind.cli.commands.validate",
    "tune": "topobind.cli.commands.tune",
}

#: the commands a job script runs at every start, bounded by the topology's size (MAX_PUS):
#: the collector stays off for them (see :func:`main`)
BOUNDED_COMMANDS = frozenset({"show", "plan", "env"})

#: every module that declares commands, each once, in --help order
SUBCOMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: COLUMNS when it is a positive number, else
    the width of the terminal on stdout, else 80. Here because argparse's formatter imports
    shutil (and its archive modules) for every option a parser adds, which a job script's
    ``topobind plan`` would pay on every call (``make bench-plan``)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, its default width (the terminal's, less 2) from
    :func:`terminal_columns`."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """argparse's RawDescriptionHelpFormatter with :class:`HelpFormatter`'s width."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with the project's error form: one line, naming the argument and where the
    help is (argparse's own form prints the whole usage first), exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"topobind: error: {message} (see '{self.prog} --help')\n")


class CommandParser(OneLineParser):
    """The parser of a command (and of its subcommands): its description and epilog keep
    their line breaks (examples, tables), as every command writes them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)


class _Version(argparse.Action):
    """``topobind X.Y.Z``, then one line saying where sites, references and state live (as
    written: argparse's own version action would rewrap the paths)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        from topobind.paths import locations_line

        print(f"topobind {__version__}\n{locations_line()}")
        parser.exit()


def build_parser(modules: Sequence[str] = SUBCOMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser of the commands that ``modules`` declare (``add_subparser``)."""
    parser = OneLineParser(
        prog="topobind",
        description=(
            "Topology-aware binding for HPC jobs: detect the node (hwloc), plan a layout, "
            "emit OMP_*/mpirun/srun flags, run and verify kernels, report."
        ),
        epilog="Run 'topobind COMMAND --help' for the options and examples of each command.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        help="show the version and where sites, references and state live, then exit",
    )
    subparsers = parser.add_subparsers(
        dest="topobind_command", metavar="COMMAND", parser_class=CommandParser
    )
    for name in modules:
        importlib.import_module(name).add_subparser(subparsers)
    _in_order(subparsers)
    return parser


def _in_order(subparsers: Any) -> None:
    """List the commands in :data:`COMMANDS` order (--help, argparse's choices), whichever
    module registered them first (``run`` and ``verify`` share a module, ``env`` between
    them has its own)."""
    rank = {name: i for i, name in enumerate(COMMANDS)}
    subparsers._choices_actions.sort(key=lambda action: rank.get(action.dest, len(rank)))
    ordered = sorted(subparsers.choices.items(), key=lambda kv: rank.get(kv[0], len(rank)))
    subparsers.choices.clear()
    subparsers.choices.update(ordered)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser for ``argv``: its command's module alone when it names a known command."""
    if list(argv) == ["--version"]:  # no command module (a Spack install checks this line)
        return build_parser(())
    module = COMMANDS.get(argv[0]) if argv else None
    return build_parser((module,) if module else SUBCOMMAND_MODULES)


def main(argv: Sequence[str] | None = None, *, start_up: bool = False) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command, return its exit
    status; a :class:`TopobindError` becomes one stderr line and its status. ``start_up``:
    the process's collector was turned off for the imports (:func:`entry`); it is turned on
    again before the command runs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = parser_for(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if start_up:
        # What the imports made lives to the end: no collection walks it again (gc.freeze);
        # the command's own objects are collected as usual (a long 'run' or 'report'), but
        # for the job-script commands, whose work the topology's size bounds and which make
        # no reference cycles (reference counting frees what they drop).
        gc.freeze()
        if args.topobind_command not in BOUNDED_COMMANDS:
            gc.enable()
    try:
        return int(args.func(args))
    except TopobindError as exc:  # the one place errors are printed
        for line in exc.error_lines():
            print(f"topobind: error: {line}", file=sys.stderr)
        if exc.summary:
            print(f"topobind: {exc.summary}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:
        _reader_gone()
        return 0


def _reader_gone() -> None:
    """The reader of our output left (``topobind plan | head``): send what is left of stdout
    to /dev/null, so the flush at exit does not fail again (the recipe in Python's signal
    documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def entry() -> None:
    """The ``topobind`` command (pyproject's console script).

    Start-up costs instructions a job script pays on every call (``make bench-plan``): the
    cyclic garbage collector is off while the modules and the parser are made (their
    objects are never garbage), and the objects left at exit are frozen, so the
    interpreter's last collection does not walk them (the memory goes back with the
    process)."""
    gc.disable()
    status = main(start_up=True)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_gone()
    gc.freeze()
    sys.exit(status)


def run_entry() -> None:
    """``topobind-run ARGS``: ``topobind run ARGS`` (a wheel's console script; a checkout's
    launchers/topobind-run does the same in bash)."""
    sys.argv[1:1] = ["run"]
    entry()


def env_entry() -> None:
    """``topobind-env ARGS``: ``topobind env ARGS``."""
    sys.argv[1:1] = ["env"]
    entry()


if __name__ == "__main__":
    entry()
