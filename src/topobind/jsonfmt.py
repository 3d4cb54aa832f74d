"""JSON for people and machines: indented objects, lists of numbers kept on one line.

Every plan printed with ``-f json`` goes through :func:`dumps`, so it avoids the generic
encoder where it can: strings go to json's C escaper, plain ints to ``str``, lists of plain
ints are joined directly; anything else is the encoder's one-line form."""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _string

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

# one encoder for the one-line values (json.dumps with separators= builds a new one per call)
_one_line = json.JSONEncoder(separators=(", ", ": ")).encode


def _inline(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int | float | bool) or v is None or _inline(v) for v in value
    )


def _flat(value: Any) -> str | None:
    """The text of a string, a plain int, or a list of them (or of lists of ints), the
    common values of a plan, without the generic encoder; None for anything else."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return str(value)
    if kind is list:
        if all(type(v) is int for v in value):
            return "[" + ", ".join(map(str, value)) + "]"
        if all(type(v) is list and all(type(x) is int for x in v) for v in value):
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
