"""JSON for people and machines: indented objects, lists of numbers kept on one line.

Every plan printed with ``-f json`` goes through :func:`dumps`, so it avoids the generic
encoder where it can: strings go to json's C escaper, plain ints to ``str``, lists of plain
ints are joined directly; anything else is the encoder's one-line form."""

from __future__ import annotations

import json
from itertools import chain
from json.encoder import encode_basestring_ascii as _string
from typing import Any

_CONSTANTS = {True: "true", False: "false", None: "null"}


def _one_line(value: Any) -> str:
    """json's own one-line text, for what :func:`_flat` leaves (floats, nested mixtures)."""
    return json.dumps(value, separators=(", ", ": "))


def _inline(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int | float | bool) or v is None or _inline(v) for v in value
    )


_INTS = {int}
_LISTS = {list}


def _flat(value: Any) -> str | None:
    """The text of a string, a plain int, or a list of them (or of lists of ints), the
    common values of a plan, without the generic encoder; None for anything else."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return str(value)
    if kind is bool or value is None:
        return _CONSTANTS[value]
    if kind is dict and not value:
        return "{}"
    if kind is list:
        kinds = set(map(type, value))  # (map and set: no Python loop per item)
        if kinds <= _INTS:
            return "[" + ", ".join(map(str, value)) + "]"
        if kinds == _LISTS and set(map(type, chain.from_iterable(value))) <= _INTS:
            return "[" + ", ".join("[" + ", ".join(map(str, v)) + "]" for v in value) + "]"
    return None


def _text(value: Any, indent: str) -> str:
    flat = _flat(value)
    if flat is not None:
        return flat
    inner = indent + " "
    if isinstance(value, dict) and value:
        lines = [f"{inner}{_string(str(k))}: {_text(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(lines) + "\n" + indent + "}"
    if isinstance(value, list) and value and not _inline(value):
        return "[\n" + ",\n".join(inner + _text(v, inner) for v in value) + "\n" + indent + "]"
    return _one_line(value)  # other scalars, empty containers, lists of numbers on one line


def dumps(obj: Any) -> str:
    return _text(obj, "")
