"""The argparse parser of ``topobind``: every command, its help and its errors.

:mod:`topobind.cli` builds it for any command line :mod:`topobind.quickargs` does not take
(help, errors, abbreviations, every command but show and plan), and for ``--help``.
"""

from __future__ import annotations

import argparse
import gettext
import importlib
import os

from topobind import __version__

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse with the project's error form: one line, naming the argument and where the
    help is (argparse's own form prints the whole usage first), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"topobind: error: {message} (see '{self.prog} --help')\n")


class _Parser(OneLineParser):
    """argparse's formatter asks shutil for the terminal width, and shutil imports the zlib,
    bz2 and lzma modules: a few ms at every start-up, for every plan. Ask os directly."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=_width())  # type: ignore[call-arg]


_WIDTH: list[int] = []  # the help width, asked once (argparse makes a formatter per option)


def _width() -> int:
    if not _WIDTH:
        try:
            columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size().columns
        except (ValueError, OSError):
            columns = 80
        _WIDTH.append(max(columns - 2, 20))
    return _WIDTH[0]


def _translate_once() -> None:
    """argparse translates each of its strings with ``gettext.gettext``, which searches the
    disk for the message catalogue at every call (several ``stat`` calls each; nothing is
    cached when there is none): 1.3 ms of every ``topobind plan``. Look it up once: the same
    catalogue, the same texts."""
    domain = gettext.textdomain()
    catalogue = gettext.translation(domain, gettext.bindtextdomain(domain), fallback=True)
    argparse._ = catalogue.gettext  # type: ignore[attr-defined]
    argparse.ngettext = catalogue.ngettext  # type: ignore[attr-defined]


def build_parser(modules: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of the commands that ``modules`` declare (``add_subparser``)."""
    _translate_once()
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
    for name in modules:
        importlib.import_module(name).add_subparser(subparsers)
    return parser
