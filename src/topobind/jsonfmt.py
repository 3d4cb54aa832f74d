"""JSON for people and machines: indented objects, lists of numbers kept on one line.

Every plan printed with ``-f json`` goes through :func:`dumps`, so it avoids the generic
encoder where it can: strings go to json's C escaper, plain ints to ``str``, lists of plain
ints are joined directly; anything else is the encoder's one-line form."""

from __future__ import annotations

from itertools import chain
from typing import Any

try:  # json's C string escaper, without importing the json package (its regular expressions)
    from _json import encode_basestring_ascii as _string
except ImportError:  # an interpreter without json's C accelerator
    from json.encoder import encode_basestring_ascii as _string

_CONSTANTS = {True: "true", False: "false", None: "null"}


def _one_line(value: Any) -> str:
    """json's own one-line text, for what :func:`_flat` leaves (floats, nested mixtures)."""
    import json  # only for these: 'topobind show -f json' has none

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
    return flat if flat is not None else _nested(value, indent)


def _nested(value: Any, indent: str) -> str:
    """The text of what :func:`_flat` leaves; each member tried with :func:`_flat` first
    (one call for the common values: a plan has thousands)."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        lines = []
        for k, v in value.items():
            flat = _flat(v)
            lines.append(f"{inner}{_string(str(k))}: {_nested(v, inner) if flat is None else flat}")
        return "{\n" + ",\n".join(lines) + "\n" + indent + "}"
    if isinstance(value, list) and value and not _inline(value):
        return "[\n" + ",\n".join(inner + _text(v, inner) for v in value) + "\n" + indent + "]"
    return _one_line(value)  # other scalars, empty containers, lists of numbers on one line


def dumps(obj: Any) -> str:
    return _text(obj, "")
