"""topobind.record behaves as the dataclasses it replaces on the start-up path: each case is
run on a record and on the same class made by ``dataclasses``, and both must agree."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest

from topobind import record


def _pair(frozen: bool = True) -> tuple[type, type]:
    """The same class made by @record and by @dataclass."""

    def body() -> dict[str, object]:
        return {
            "__annotations__": {"a": "int", "b": "str", "c": "tuple[int, ...]", "d": "dict"},
            "b": "x",
            "c": (),
        }

    rec_ns = body() | {"d": record.field(default_factory=dict, hash=False)}
    dc_ns = body() | {"d": dataclasses.field(default_factory=dict, hash=False)}
    rec = record.record(frozen=frozen)(type("R", (), {**rec_ns, "__module__": __name__}))
    dc = dataclasses.dataclass(frozen=frozen)(type("R", (), {**dc_ns, "__module__": __name__}))
    return rec, dc


CALLS = [
    ((1,), {}),
    ((1, "y"), {}),
    ((), {"a": 2, "c": (1, 2)}),
    ((3,), {"d": {"k": 1}}),
    ((1, "y", (4,), {"z": 2}), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_init_repr_eq_as_dataclasses(args: tuple, kwargs: dict) -> None:
    rec, dc = _pair()
    r, d = rec(*args, **kwargs), dc(*args, **kwargs)
    assert repr(r) == repr(d)
    assert [getattr(r, n) for n in "abcd"] == [getattr(d, n) for n in "abcd"]
    assert r == rec(*args, **kwargs)
    assert (r == rec(99)) == (d == dc(99))
    assert r != d  # another class: not equal, as between two dataclasses
    assert rec.__match_args__ == dc.__match_args__


BAD_CALLS = [
    ((), {}),  # a missing
    ((1, "y", (), {}, 5), {}),  # too many
    ((1,), {"a": 2}),  # repeated
    ((1,), {"e": 2}),  # unexpected
]


@pytest.mark.parametrize(("args", "kwargs"), BAD_CALLS)
def test_bad_calls_raise_type_error_as_dataclasses(args: tuple, kwargs: dict) -> None:
    rec, dc = _pair()
    with pytest.raises(TypeError):
        dc(*args, **kwargs)
    with pytest.raises(TypeError):
        rec(*args, **kwargs)


def test_frozen_refuses_assignment_and_hashes_like_dataclasses() -> None:
    rec, dc = _pair()
    r, d = rec(1, d={"unhashable": [1]}), dc(1, d={"unhashable": [1]})
    assert hash(r) == hash(d)  # hash=False keeps the dict out, as in dataclasses
    with pytest.raises(AttributeError):
        r.a = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del r.a  # type: ignore[misc]
    assert r.a == 1


def test_mutable_record_is_unhashable_and_assignable() -> None:
    rec, dc = _pair(frozen=False)
    r = rec(1)
    r.a = 5
    assert r.a == 5
    with pytest.raises(TypeError):
        hash(r)
    with pytest.raises(TypeError):
        hash(dc(1))


def test_default_factory_gives_each_instance_its_own() -> None:
    rec, _ = _pair(frozen=False)
    one, two = rec(1), rec(2)
    one.d["k"] = 1
    assert two.d == {}


def test_replace_copy_pickle() -> None:
    rec, dc = _pair()
    r = rec(1, c=(2,))
    changed = record.replace(r, b="z")
    assert (changed.a, changed.b, changed.c) == (1, "z", (2,))
    assert r.b == "x"
    assert repr(record.replace(r, b="z")) == repr(dataclasses.replace(dc(1, c=(2,)), b="z"))
    with pytest.raises(TypeError, match="no field 'nope'"):
        record.replace(r, nope=1)
    assert copy.deepcopy(r) == r and copy.copy(r) == r


@record.record
class Point:
    """A module-level record (pickle needs to find the class)."""

    x: int
    y: int = 0
    label: str = record.field(default="", repr=False, compare=False)


def test_field_flags_and_pickle() -> None:
    p = Point(1, label="a")
    assert repr(p) == "Point(x=1, y=0)"
    assert p == Point(1, label="b")  # compare=False
    assert pickle.loads(pickle.dumps(p)) == p


def test_required_after_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):

        @record.record
        class Bad:
            a: int = 0
            b: int


def test_plan_imports_neither_dataclasses_nor_typing() -> None:
    """What makes ``topobind plan`` start fast (make bench-plan): neither module is imported."""
    code = (
        "import sys\n"
        "from topobind.cli import build_parser\n"
        "build_parser('topobind.commands.topo')\n"
        "import topobind.commands.common, topobind.emit, topobind.jsonfmt\n"
        "print(' '.join(m for m in ('dataclasses', 'typing', 'inspect') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
