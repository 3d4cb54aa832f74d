"""The usual command lines of ``topobind show`` and ``topobind plan``, parsed without argparse.

A job script runs ``topobind plan`` at every launch. argparse, with the modules it imports
(``re``, ``gettext``, ``locale``, ``enum``) and the parser it builds, is about a fifth of
that command's time (``make bench-plan``). The commands declare their options once, for
argparse (``add_subparser``); here the same declarations are recorded by a stand-in
(:class:`Recorder`) and a command line made only of those options, each spelled in full,
is parsed directly. Anything else goes to argparse, which parses it or prints its error: an
abbreviation, ``--help``, a value that starts with '-', a bad or missing value, a
positional argument, a short option with its value attached. The result is what argparse
gives for the same line (``tests/test_quickargs.py`` compares both on many lines).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Option:
    """One ``add_argument`` call, as argparse reads it."""

    __slots__ = ("flags", "dest", "store_true", "type", "default", "choices", "required")

    def __init__(self, flags: tuple[str, ...], kw: dict[str, Any]) -> None:
        longs = [f for f in flags if f.startswith("--")]
        self.flags = flags
        self.dest: str = kw.get("dest") or (longs[0] if longs else flags[0]).lstrip("-")
        self.dest = self.dest.replace("-", "_")
        self.store_true = kw.get("action") == "store_true"
        self.type: Callable[[str], Any] | None = kw.get("type")
        self.default = kw.get("default", False if self.store_true else None)
        self.choices = kw.get("choices")
        self.required = bool(kw.get("required"))


class Recorder:
    """Stands in for argparse's parser and sub-parsers while a command module declares its
    commands and options (``add_parser``, ``add_argument``, ``set_defaults``)."""

    def __init__(self) -> None:
        self.commands: dict[str, Recorder] = {}
        self.options: list[Option] = []
        self.defaults: dict[str, Any] = {}
        self.plain = True  # False: an action or argument this parser does not take

    def add_parser(self, name: str, **_kw: Any) -> Recorder:
        self.commands[name] = Recorder()
        return self.commands[name]

    def add_argument(self, *flags: str, **kw: Any) -> None:
        if not all(f.startswith("-") for f in flags) or kw.get("action") not in (
            None, "store", "store_true"
        ) or kw.get("nargs") is not None:  # fmt: skip
            self.plain = False
        self.options.append(Option(flags, kw))

    def set_defaults(self, **kw: Any) -> None:
        self.defaults.update(kw)


def parse(argv: list[str], module: str) -> SimpleNamespace | None:
    """``argv`` (``COMMAND OPTION...``) parsed as argparse would parse it, when every
    argument is one of the command's options spelled in full (``module`` declares it);
    None otherwise (argparse's turn)."""
    commands = Recorder()
    importlib.import_module(module).add_subparser(commands)
    command = commands.commands.get(argv[0])
    if command is None or not command.plain:
        return None
    values = _values(command, argv[1:])
    return None if values is None else SimpleNamespace(command=argv[0], **values)


def _values(command: Recorder, args: list[str]) -> dict[str, Any] | None:
    by_flag = {flag: opt for opt in command.options for flag in opt.flags}
    values: dict[str, Any] = {opt.dest: opt.default for opt in command.options}
    values.update(command.defaults)  # as argparse: set_defaults over the options' defaults
    given: set[str] = set()
    i = 0
    while i < len(args):
        long = args[i].startswith("--")
        flag, eq, attached = args[i].partition("=") if long else (args[i], "", "")
        opt = by_flag.get(flag)
        if opt is None or (opt.store_true and eq):
            return None
        if opt.store_true:
            values[opt.dest], i = True, i + 1
            continue
        if not eq and i + 1 >= len(args):
            return None
        text, i = (attached, i + 1) if eq else (args[i + 1], i + 2)
        if text.startswith("-"):
            return None
        value = _converted(opt, text)
        if value is _REFUSED:
            return None
        values[opt.dest] = value
        given.add(opt.dest)
    for opt in command.options:
        if opt.required and opt.dest not in given:
            return None
        if opt.dest not in given and isinstance(values[opt.dest], str) and opt.type:
            try:  # as argparse: a default given as a string goes through the type
                values[opt.dest] = opt.type(values[opt.dest])
            except Exception:  # noqa: BLE001 (argparse reports it)
                return None
    return values


_REFUSED = object()


def _converted(opt: Option, text: str) -> Any:
    """``text`` through the option's type and choices; :data:`_REFUSED` when either refuses
    it (argparse then says why)."""
    try:
        value = opt.type(text) if opt.type is not None else text
    except Exception:  # noqa: BLE001 (any refusal: argparse reports it)
        return _REFUSED
    if opt.choices is not None and value not in opt.choices:
        return _REFUSED
    return value
