"""JSON from records: json_records.to_json / pick."""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

import pytest

from topobind.json_records import pick, to_json
from topobind.measure.results import Pages, Placement


@dataclass(frozen=True)
class _Inner:
    low: float
    high: float


@dataclass(frozen=True)
class _Outer:
    name: str
    values: tuple[float, ...]
    inner: _Inner | None
    flat: array
    when: datetime
    note: str | None = field(default=None, metadata={"json": "omit-none"})

    @property
    def size(self) -> int:
        return len(self.values)


def test_records_become_strict_json_in_field_order() -> None:
    rec = _Outer(
        "a",
        (1.0, math.nan, math.inf),
        _Inner(0.5, -math.inf),
        array("d", [2.0, math.nan]),
        datetime(2026, 11, 25, 13, 0, tzinfo=timezone(timedelta(hours=1))),
    )
    out = to_json(rec)
    assert list(out) == ["name", "values", "inner", "flat", "when"]  # note: None, left out
    assert out["values"] == [1.0, None, None] and out["inner"] == {"low": 0.5, "high": None}
    assert out["flat"] == [2.0, None] and out["when"] == "2026-11-25T12:00:00Z"
    json.dumps(out, allow_nan=False)  # strict JSON
    assert pick(rec, "name", "size") == {"name": "a", "size": 3}
    assert to_json(_Outer("b", (), None, array("d"), datetime.now(UTC), "x"))["note"] == "x"


def test_result_records_write_as_the_format_says() -> None:
    pages = Pages("2M", 2048, False, "hugetlbfs", "hugetlb-2M", {"mem_node": 0})
    assert to_json(pages) == {
        "requested": "2M", "kib": 2048, "fallback": False, "note": "hugetlbfs",
        "method": "hugetlb-2M", "mem_node": 0,
    }  # fmt: skip
    assert "method" not in to_json(Pages("4k", 4, False, "", None))
    assert to_json(Placement(0, 1, 2, 0)) == {"rank": 0, "thread": 1, "cpu": 2, "numa": 0}
    with pytest.raises(TypeError, match="set"):
        to_json({1, 2})
