"""Typed records for the modules every job script imports (topology, plan, layouts, emitters).

``@dataclass`` costs about 15 ms at each start of ``topobind plan``: the ``dataclasses`` module
imports ``inspect`` (with ``ast``, ``dis`` and ``tokenize``), and it compiles the methods of
every class with ``exec`` (``make bench-plan`` measures the command). ``@record`` makes the same
kind of class without either: the fields are the class's annotations, in order, with their
defaults or :func:`field` (``default``, ``default_factory``, ``repr``, ``compare``, ``hash``);
the class gets ``__init__`` (by position or by name, then ``__post_init__`` if defined),
``__repr__``, ``__eq__``, ``__hash__`` and ``__match_args__``; a frozen record (the default)
refuses assignment. The methods are closures over the class's field table, made once per class.
Type checkers read ``@record`` as ``@dataclass`` (PEP 681). :func:`replace` is
``dataclasses.replace`` for records.

The rest of topobind (results, reports, checks) keeps ``dataclasses``: only the start-up of
``show``, ``plan`` and ``env`` is measured against hwloc's own tools.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_kwargs: object) -> object:
        return lambda decorated: decorated


_MISSING: Any = object()


class FrozenRecordError(AttributeError):
    """Assignment to, or deletion of, an attribute of a frozen record."""


class Field:
    """What :func:`field` gives: a default or a factory, and where the field takes part."""

    __slots__ = ("default", "default_factory", "repr", "compare", "hash")

    def __init__(
        self, default: Any, default_factory: Any, repr: bool, compare: bool, hash: bool | None
    ) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("a field takes a default or a default_factory, not both")
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.hash = compare if hash is None else hash


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] = _MISSING,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
) -> Any:
    """A field's default (``default=``, or ``default_factory=`` for mutable values) and whether
    it appears in ``repr`` and takes part in ``==`` and ``hash``."""
    return Field(default, default_factory, repr, compare, hash)


class _Spec:
    """The field table of one record class, read by the methods every record shares."""

    __slots__ = (
        "cls", "names", "nameset", "defaults", "factories", "shown", "compared", "hashed",
        "post_init",
    )  # fmt: skip

    def __init__(self, cls: type, fields: dict[str, Field]) -> None:
        self.cls = cls
        self.names = tuple(fields)
        self.nameset = frozenset(fields)
        self.defaults = {n: f.default for n, f in fields.items() if f.default is not _MISSING}
        self.factories = {
            n: f.default_factory for n, f in fields.items() if f.default_factory is not _MISSING
        }
        self.shown = tuple(n for n, f in fields.items() if f.repr)
        self.compared = _values(tuple(n for n, f in fields.items() if f.compare))
        self.hashed = _values(tuple(n for n, f in fields.items() if f.hash))
        self.post_init = getattr(cls, "__post_init__", None)


def _fields_of(cls: type) -> dict[str, Field]:
    """Inherited record fields, then this class's annotations (ClassVar ones left out)."""
    fields: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        fields.update(base.__dict__.get("__record_fields__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, Field):
            fields[name] = value
            if value.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
        else:
            fields[name] = Field(value, _MISSING, True, True, None)
    after: str | None = None  # the first field with a default
    for name, f in fields.items():
        if _has_default(f):
            after = after or name
        elif after is not None:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows {after!r}")
    return fields


def _has_default(f: Field) -> bool:
    return f.default is not _MISSING or f.default_factory is not _MISSING


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda _obj: ()
    get = attrgetter(*names)
    return get if len(names) > 1 else lambda obj: (get(obj),)


# The methods every record shares: each reads its class's table (``__record_spec__``), so
# making a record class builds no functions.
def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    spec: _Spec = self.__record_spec__
    names, count, values = spec.names, len(spec.names), self.__dict__
    if args:
        if len(args) > count:
            raise TypeError(f"{spec.cls.__name__}() takes {count} arguments, {len(args)} given")
        values.update(zip(names, args, strict=False))  # fewer args: the rest by name
        if kwargs and not values.keys().isdisjoint(kwargs):
            repeated = sorted(values.keys() & kwargs.keys())[0]
            raise TypeError(f"{spec.cls.__name__}() got a repeated argument {repeated!r}")
    if kwargs:
        if not kwargs.keys() <= spec.nameset:
            unexpected = sorted(kwargs.keys() - spec.nameset)[0]
            raise TypeError(f"{spec.cls.__name__}() got an unexpected argument {unexpected!r}")
        values.update(kwargs)
    if len(values) < count:
        for name in names:
            if name in values:
                continue
            if name in spec.defaults:
                values[name] = spec.defaults[name]
            elif name in spec.factories:
                values[name] = spec.factories[name]()
            else:
                raise TypeError(f"{spec.cls.__name__}() missing argument {name!r}")
    if spec.post_init is not None:
        spec.post_init(self)


def _repr(self: Any) -> str:
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_spec__.shown)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: Any) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = self.__record_spec__.compared
    return bool(compared(self) == compared(other))


def _hash(self: Any) -> int:
    return hash(self.__record_spec__.hashed(self))


def _frozen_setattr(self: Any, name: str, value: object) -> None:
    raise FrozenRecordError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _add_methods(cls: type, fields: dict[str, Field], frozen: bool) -> None:
    spec = _Spec(cls, fields)
    methods: dict[str, object] = {
        "__record_fields__": fields,
        "__record_spec__": spec,
        "__match_args__": spec.names,
        "__init__": _init,
        "__eq__": _eq,
        # as dataclasses: frozen records hash their fields, mutable ones are unhashable
        "__hash__": _hash if frozen else None,
    }
    if "__repr__" not in cls.__dict__:
        methods["__repr__"] = _repr
    if frozen:
        methods.update(__setattr__=_frozen_setattr, __delattr__=_frozen_delattr)
    for name, value in methods.items():
        setattr(cls, name, value)


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: Any = None, /, *, frozen: bool = True) -> Any:
    """Make ``cls`` a record (``@record`` or ``@record(frozen=False)``)."""

    def wrap(target: type) -> type:
        _add_methods(target, _fields_of(target), frozen)
        return target

    return wrap if cls is None else wrap(cls)


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with the fields in ``changes`` replaced."""
    spec: _Spec = obj.__record_spec__  # type: ignore[attr-defined]
    unknown = changes.keys() - spec.nameset
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {sorted(unknown)[0]!r}")
    values = {n: obj.__dict__[n] for n in spec.names}
    values.update(changes)
    return type(obj)(**values)
