"""A parser for Spack's spec syntax (the grammar of ``spack/lib/spack/spack/spec_parser.py``).

Spack itself cannot be installed here, so this reads spec strings the way Spack 1.x does,
far enough to check them: package names (optionally ``namespace.name``), versions
(``@1.2``, ``@=1.2``, ranges ``@1.2:1.4``, ``@:3``, ``@2.9:``, lists ``@1.2,1.4``, git
versions ``@git.ref=1.2``), variants (``+v``, ``~v``, ``-v`` after a space, ``key=value``,
``key="quoted value"``, propagated ``++v``/``key==value``), dependencies ``^dep`` (any
depth) and direct dependencies ``%dep`` (compilers are direct dependencies in Spack 1.x),
each with their own constraints, virtual assignments ``^mpi=openmpi`` / ``%c,cxx=gcc`` and
edge attributes ``^[virtuals=mpi deptypes=link] openmpi``, and DAG hashes ``/abc123``.

Columns are 1-based positions in the spec string. A node without a name is *anonymous*: a
constraint on a package given by the context (``packages: hwloc: require: "+libxml2"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ID = r"[A-Za-z0-9_][A-Za-z0-9_\-]*"
_DOTTED = rf"{_ID}(?:\.{_ID})+"
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_\-.]*"  # variant names may contain dots
_VID = r"=?[A-Za-z0-9_][A-Za-z0-9_\-.]*\b"
_VRANGE = rf"(?:{_VID})?:(?:{_VID}(?!\s*=))?"
_VLIST = rf"(?:{_VRANGE}|{_VID})(?:\s*,\s*(?:{_VRANGE}|{_VID}))*"
_GIT = r"(?:git\.[A-Za-z0-9_][A-Za-z0-9_./\-]*|[A-Fa-f0-9]{40})"
_VALUE = r"[A-Za-z0-9_\-+*.,:=%^~/\\]+"
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_ASSIGN = rf"(?P<virtuals>{_ID}(?:,{_ID})*)=(?P<provider>{_DOTTED}|{_ID})"

# Token kinds, tried in this order at each position (the order matters, as in Spack).
_TOKENS: tuple[tuple[str, str], ...] = (
    ("EDGE_OPEN", r"(?:\^|%%|%)\["),
    ("EDGE_CLOSE", rf"\](?:\s*{_ASSIGN})?"),
    ("DEPENDENCY", rf"(?:\^|%%|%)(?:\s*{_ASSIGN})?"),
    ("GIT_VERSION", rf"@{_GIT}(?:={_VID})?"),
    ("VERSION", rf"@\s*(?:{_VLIST})"),
    ("PROPAGATED_BOOL", rf"(?:\+\+|~~|--)\s*{_NAME}"),
    ("BOOL", rf"[~+-]\s*{_NAME}"),
    ("PROPAGATED_KV", rf"{_NAME}:?==(?:{_VALUE}|{_QUOTED})"),
    ("KV", rf"{_NAME}:?=(?:{_VALUE}|{_QUOTED})"),
    ("QUALIFIED_NAME", _DOTTED),
    ("NAME", rf"{_ID}|\*"),
    ("HASH", r"/[A-Za-z0-9_]+"),
    ("WS", r"\s+"),
    ("UNEXPECTED", r"."),
)
# _ASSIGN's named groups would repeat across token kinds: the combined regex drops them.
_TOKEN_RE = re.compile(
    "|".join(
        f"(?P<{kind}>{rx.replace('?P<virtuals>', '?:').replace('?P<provider>', '?:')})"
        for kind, rx in _TOKENS
    )
)
_ASSIGN_RE = re.compile(rf"(?:\]|\^|%%|%)\s*{_ASSIGN}$")

_HINTS = {
    "@": "'@' must be followed by a version or range: @1.2, @=1.2, @1.2:1.4, @:3, @2.9:",
    "+": "'+' must be followed by a variant name: +libxml2",
    "~": "'~' must be followed by a variant name: ~java",
    "=": "'=' must join a name and its value, without spaces: threads=openmp",
    "^": "'^' must be followed by a dependency: ^hwloc+libxml2",
    "%": "'%' must be followed by a direct dependency or compiler: %gcc@12",
}


class SpecSyntaxError(ValueError):
    """A spec string that Spack would reject; ``column`` is 1-based."""

    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True)
class Token:
    kind: str
    value: str
    column: int


@dataclass(frozen=True)
class Variant:
    name: str
    value: str  # "true"/"false" for +v/~v/-v, else the value without quotes
    column: int  # column of the variant's name
    boolean: bool  # written as +v, ~v, -v (or ++v, ~~v, --v)
    propagate: bool  # ++v, ~~v, --v, key==value


@dataclass
class Node:
    """One package in a spec: the root, or a dependency after ``^`` or ``%``."""

    name: str | None  # None: anonymous; "*": any package
    column: int  # column of the name, or of the node's first token when anonymous
    edge: str = ""  # "" for the root, else "^", "%" or "%%"
    namespace: str | None = None
    version: str | None = None  # as written after '@' (whitespace removed)
    version_column: int = 0
    variants: list[Variant] = field(default_factory=list)
    virtuals: tuple[str, ...] = ()  # ^mpi=openmpi, ^[virtuals=mpi] openmpi
    hashes: list[str] = field(default_factory=list)


@dataclass
class Spec:
    text: str
    nodes: list[Node]

    @property
    def root(self) -> Node:
        return self.nodes[0]

    @property
    def dependencies(self) -> list[Node]:
        return self.nodes[1:]


def tokenize(text: str) -> list[Token]:
    """Tokens of ``text`` without whitespace; raises on characters Spack would not accept."""
    tokens: list[Token] = []
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup or "UNEXPECTED"
        if kind == "WS":
            continue
        if kind == "UNEXPECTED":
            ch = m.group(0)
            hint = _HINTS.get(ch, f"unexpected character {ch!r}")
            raise SpecSyntaxError(m.start() + 1, hint)
        tokens.append(Token(kind, m.group(0), m.start() + 1))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, *kinds: str) -> Token | None:
        tok = self.peek()
        if tok is not None and tok.kind in kinds:
            self.pos += 1
            return tok
        return None

    def parse(self) -> Spec:
        if not self.tokens:
            raise SpecSyntaxError(1, "empty spec")
        nodes = [self.node(edge="", column=self.tokens[0].column)]
        while True:
            tok = self.take("EDGE_OPEN", "DEPENDENCY")
            if tok is None:
                break
            edge = "%%" if tok.value.startswith("%%") else tok.value[0]
            virtuals: tuple[str, ...] = ()
            if tok.kind == "EDGE_OPEN":
                virtuals, tok = self.edge_attributes(tok)
            assigned, provider, provider_col = _assigned(tok)
            dep = self.node(edge, tok.column + len(tok.value), provider, provider_col)
            dep.virtuals = virtuals + assigned
            if dep.name is None and not (dep.version or dep.variants or dep.hashes):
                raise SpecSyntaxError(
                    tok.column, f"{edge!r} must be followed by a package name (e.g. ^hwloc)"
                )
            nodes.append(dep)
        extra = self.peek()
        if extra is not None:
            what = (
                "a second package name in one spec (write dependencies as ^name)"
                if extra.kind in ("NAME", "QUALIFIED_NAME")
                else f"{extra.value!r} cannot appear here"
            )
            raise SpecSyntaxError(extra.column, what)
        return Spec(self.text, nodes)

    def edge_attributes(self, opener: Token) -> tuple[tuple[str, ...], Token]:
        virtuals: tuple[str, ...] = ()
        while True:
            kv = self.take("KV")
            if kv is not None:
                key, value = kv.value.split("=", 1)
                key = key.rstrip(":")
                if key not in ("virtuals", "deptypes", "when"):
                    raise SpecSyntaxError(
                        kv.column, f"edge attribute {key!r}: only virtuals, deptypes, when exist"
                    )
                if key == "virtuals":
                    virtuals += tuple(v for v in value.strip("'\"").split(",") if v)
                continue
            close = self.take("EDGE_CLOSE")
            if close is not None:
                return virtuals, close
            tok = self.peek()
            raise SpecSyntaxError(
                tok.column if tok else len(self.text) + 1,
                f"edge attributes opened at column {opener.column} need a closing ']'",
            )

    def node(self, edge: str, column: int, name_text: str = "", name_col: int = 0) -> Node:
        node = Node(name=None, column=column, edge=edge)
        name = None if name_text else self.take("NAME", "QUALIFIED_NAME")
        if name is not None:
            name_text, name_col = name.value, name.column
        if name_text:
            parts = name_text.split(".")
            node.name = parts[-1]
            node.namespace = ".".join(parts[:-1]) or None
            node.column = name_col
        elif self.peek() is not None:
            node.column = self.peek().column  # type: ignore[union-attr]
        while True:
            tok = self.take("VERSION", "GIT_VERSION")
            if tok is not None:
                if node.version is not None:
                    raise SpecSyntaxError(tok.column, "a spec cannot have two versions")
                node.version = re.sub(r"\s+", "", tok.value[1:])
                node.version_column = tok.column + 1
                continue
            tok = self.take("BOOL", "PROPAGATED_BOOL")
            if tok is not None:
                prop = tok.kind == "PROPAGATED_BOOL"
                sigil = tok.value[: 2 if prop else 1]
                rest = tok.value[len(sigil) :]
                name_col = tok.column + len(sigil) + (len(rest) - len(rest.lstrip()))
                value = "true" if sigil[0] == "+" else "false"
                node.variants.append(Variant(rest.strip(), value, name_col, True, prop))
                continue
            tok = self.take("KV", "PROPAGATED_KV")
            if tok is not None:
                prop = tok.kind == "PROPAGATED_KV"
                key, value = tok.value.split("==" if prop else "=", 1)
                value = _unquote(value)
                node.variants.append(Variant(key.rstrip(":"), value, tok.column, False, prop))
                continue
            tok = self.take("HASH")
            if tok is not None:
                node.hashes.append(tok.value[1:])
                continue
            return node


def _assigned(tok: Token) -> tuple[tuple[str, ...], str, int]:
    """(virtuals, provider, provider's column) of ``^mpi=openmpi``; ((), "", 0) if none."""
    m = _ASSIGN_RE.search(tok.value)
    if not m:
        return (), "", 0
    return (
        tuple(m.group("virtuals").split(",")),
        m.group("provider"),
        tok.column + m.start("provider"),
    )


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].replace("\\" + value[0], value[0])
    return value


def parse_spec(text: str) -> Spec:
    """Parse one spec string; raises :class:`SpecSyntaxError` with the column."""
    return _Parser(text).parse()
