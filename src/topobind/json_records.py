"""JSON from records, one way: :func:`to_json` turns a dataclass (and what it holds) into
strict-JSON values; :func:`pick` takes named attributes of a record (fields or properties).

NaN and infinities become ``null`` (strict JSON), tuples and arrays lists, datetimes UTC ISO
8601 (``2026-11-22T22:40:00Z``), dataclasses objects of their fields in declared order; a
field whose metadata says ``{"json": "omit-none"}`` is left out when it is None, one that says
``{"json": "merge"}`` (a mapping) has its items merged into the record's object.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def to_json(value: Any) -> Any:
    """``value`` as JSON-ready Python (dicts, lists, str, int, float, bool, None)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            how = f.metadata.get("json")
            if how == "merge":
                out.update(to_json(v))
            elif v is not None or how != "omit-none":
                out[f.name] = to_json(v)
        return out
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | array):
        return [to_json(v) for v in value]
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise TypeError(f"no JSON form for {type(value).__name__}")


def pick(record: object, *names: str) -> dict[str, Any]:
    """``{name: to_json(record.name)}`` for each of ``names`` (fields or properties)."""
    return {name: to_json(getattr(record, name)) for name in names}
