"""JSON for people and machines: indented objects, lists of numbers kept on one line."""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

_scalar = json.dumps
# one encoder for the one-line values (json.dumps with separators= builds a new one per call)
_one_line = json.JSONEncoder(separators=(", ", ": ")).encode


def _inline(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int | float | bool) or v is None or _inline(v) for v in value
    )


def _dump(value: Any, indent: str, out: list[str]) -> None:
    if isinstance(value, dict) and value:
        inner = indent + " "
        out.append("{\n")
        for i, (k, v) in enumerate(value.items()):
            out.append(f"{inner}{_scalar(str(k))}: ")
            _dump(v, inner, out)
            out.append(",\n" if i < len(value) - 1 else "\n")
        out.append(indent + "}")
    elif isinstance(value, list) and value and not _inline(value):
        inner = indent + " "
        out.append("[\n")
        for i, v in enumerate(value):
            out.append(inner)
            _dump(v, inner, out)
            out.append(",\n" if i < len(value) - 1 else "\n")
        out.append(indent + "]")
    else:  # scalars, empty containers, lists of numbers (nested too) on one line
        out.append(_one_line(value))


def dumps(obj: Any) -> str:
    out: list[str] = []
    _dump(obj, "", out)
    return "".join(out)
