"""argparse ``type=`` helpers of the command layer: each turns a bad option value into
argparse's one-line error naming the option, from the bounded checks of
:mod:`topobind.inputs` (which the layers below use on their own)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from topobind.errors import TopobindError
from topobind.inputs import host_name, whole_number


def count_arg(flag: str, lo: int = 1, hi: int = 1 << 20) -> Callable[[str], int]:
    """An argparse ``type=`` for a count option: a bad value is one line naming ``flag``."""

    def parse(text: str) -> int:
        try:
            return whole_number(text, flag, lo, hi)
        except TopobindError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from exc

    parse.__name__ = flag  # argparse names the type in some messages
    return parse


def choice_arg(flag: str, choices: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type=`` for one word of ``choices`` (a layout's option)."""

    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{flag} {text[:40]!r}: choose one of {', '.join(choices)}")
        return text

    parse.__name__ = flag.lstrip("-")  # argparse names the option's type in its errors
    return parse


def host_arg(text: str) -> str:
    """argparse ``type=`` of ``--host``."""
    try:
        return host_name(text)
    except TopobindError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--host ")) from exc
