"""Options every command shares: ``--topology`` (what ``show`` needs, without the layouts),
and the argparse ``type=`` helpers of the command layer: each turns a bad option value into
argparse's one-line error naming the option, from the bounded checks of
:mod:`topobind.inputs` (which the layers below use on their own)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from topobind.errors import TopobindError
from topobind.inputs import host_name, real_number, whole_number
from topobind.topo.topology import NAMED_TOPOLOGIES, Topology, load

T = TypeVar("T")

TOPOLOGY_HELP = (
    "where the node topology comes from: 'live' (default: this machine, only the PUs this "
    "job/cgroup may use), an hwloc XML file (lstopo-no-graphics --of xml > node.xml on a "
    "compute node), synthetic:'pack:2 numa:4 l3:4 core:4 pu:2', or a named node: "
    + ", ".join(NAMED_TOPOLOGIES)
)


def add_topology_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", "-t", default="live", metavar="SRC", help=TOPOLOGY_HELP)


def topology_from(args: argparse.Namespace) -> Topology:
    return load(args.topology)


def checked_arg(parse: Callable[[str], T], flag: str = "") -> Callable[[str], T]:
    """An argparse ``type=`` from ``parse``, a check raising :class:`TopobindError` (one of
    :mod:`topobind.inputs`, or a command's own): its message becomes argparse's one-line error,
    which names the option itself (so a leading ``flag`` is taken off the message)."""

    def typed(text: str) -> T:
        try:
            return parse(text)
        except TopobindError as exc:
            why = str(exc)
            for head in (f"{flag} ", f"{flag}: ") if flag else ():
                why = why.removeprefix(head)
            raise argparse.ArgumentTypeError(why) from None

    typed.__name__ = flag or getattr(parse, "__name__", "value")  # argparse names the type
    return typed


def count_arg(flag: str, lo: int = 1, hi: int = 1 << 20, hint: str = "") -> Callable[[str], int]:
    """An argparse ``type=`` for a count option: a bad value is one line naming ``flag``."""
    return checked_arg(lambda text: whole_number(text, flag, lo, hi, hint), flag)


def number_arg(flag: str, lo: float, hi: float, example: str = "") -> Callable[[str], float]:
    """An argparse ``type=`` for a number option (a fraction, a percentage): ASCII digits with
    an optional point (:func:`topobind.inputs.real_number`), within ``lo..hi``."""
    return checked_arg(lambda text: real_number(text, flag, lo, hi, example=example), flag)


def add_number_arg(
    parser: argparse.ArgumentParser,
    flag: str,
    bounds: tuple[float, float],
    default: float,
    metavar: str,
    help: str,
) -> None:
    """Add ``flag``, a number from ``bounds`` (:func:`number_arg`) that is ``default`` when not
    given: its help ends with the default and the bounds, ``(default 5; 0 to 1000)``, and a
    bad value's one-line error gives the default as its example."""
    lo, hi = bounds
    parser.add_argument(
        flag,
        type=number_arg(flag, lo, hi, f"{default:g}, the default"),
        default=default,
        metavar=metavar,
        help=f"{help} (default {default:g}; {lo:g} to {hi:g})",
    )


def add_command(
    subparsers: Any, name: str, run: Callable[[argparse.Namespace], int], **parser_args: Any
) -> argparse.ArgumentParser:
    """Subcommand ``name`` (``help``, ``description``, ``epilog`` ... as argparse's
    ``add_parser`` takes them), run by ``run(args)``: the parser and its function in one place."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, **parser_args)
    parser.set_defaults(func=run)
    return parser


def choice_arg(flag: str, choices: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type=`` for one word of ``choices`` (a layout's option)."""

    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{flag} {text[:40]!r}: choose one of {', '.join(choices)}")
        return text

    parse.__name__ = flag.lstrip("-")  # argparse names the option's type in its errors
    return parse


#: argparse ``type=`` of ``--host``
host_arg = checked_arg(host_name, "--host")
