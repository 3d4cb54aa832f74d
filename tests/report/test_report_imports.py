"""No import cycle in src/topobind (issue 12): every import counts, those inside functions
too (an import moved into a function hides a cycle from Python, not from the design).
Only ``if TYPE_CHECKING:`` blocks are left out: they never run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import REPO

PACKAGE = REPO / "src" / "topobind"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of the package that ``name`` (at ``path``) imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            # "from topobind.report import fmt" imports the module topobind.report.fmt
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        out.update(t for t in targets if t in known and t != name)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imported(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle_hidden_in_a_function() -> None:
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]
    tree = ast.parse("def f():\n    from topobind.x import y\nif TYPE_CHECKING:\n    import z\n")
    names = [n.module if isinstance(n, ast.ImportFrom) else "" for n in _imports(tree)]
    assert names == ["topobind.x"]  # the import inside f counts; TYPE_CHECKING's does not


@pytest.mark.slow
def test_the_graph_sees_the_report_imports() -> None:
    graph = import_graph()
    assert "topobind.report.analysis" in graph["topobind.report.charts"]
    assert "topobind.report.layouts_drawn" in graph["topobind.report.gallery"]
    assert "topobind.report.fmt" in graph["topobind.report.text"]  # "from . import fmt"


@pytest.mark.slow
def test_no_import_cycle_in_topobind() -> None:
    assert cycles(import_graph()) == []
