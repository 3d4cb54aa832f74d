"""topobind's own Spack recipe, read with ``ast`` (never imported: it needs Spack).

:func:`recipe_facts` gives its versions and variants (so ``topobind@main +mpi`` in
spack.yaml can be checked like any builtin package). :func:`check_recipe` checks that it is
valid Python laid out as Spack's package API v2 expects (class named after the package,
build-system base imported from ``spack_repo.builtin.build_systems``), that its directives
(``version``, ``variant``, ``depends_on``, ``provides``, ``conflicts``, ``requires``,
``extends``) name only packages, versions, variants and dependency types that exist, and
that every ``make`` call names a Makefile, targets and variables that exist in the project.
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topobind.spackcheck import speccheck
from topobind.spackcheck.locations import REPO, display
from topobind.spackcheck.makefiles import Makefile, read_makefile
from topobind.spackcheck.problems import Problem
from topobind.spackcheck.recipedata import PackageInfo, RecipeData, VariantInfo, closest

DIRECTIVES = frozenset(
    {"version", "variant", "depends_on", "provides", "conflicts", "requires", "extends"}
)
DEP_TYPES = frozenset({"build", "link", "run", "test"})
VERSION_SOURCES = frozenset({"branch", "tag", "commit", "sha256", "md5", "url", "git"})
_MAKE_VAR = re.compile(r"^([A-Z][A-Z0-9_]*)=")


@dataclass(frozen=True)
class Directive:
    name: str
    args: list[ast.expr]
    kwargs: dict[str, ast.expr]
    line: int
    when: str | None  # from an enclosing ``with when("..."):``

    def literal(self, index: int = 0) -> str | None:
        if len(self.args) > index and isinstance(self.args[index], ast.Constant):
            value = self.args[index].value  # type: ignore[attr-defined]
            return value if isinstance(value, str) else None
        return None

    def kw(self, key: str) -> Any:
        node = self.kwargs.get(key)
        try:
            return ast.literal_eval(node) if node is not None else None
        except ValueError:
            return _NOT_LITERAL


_NOT_LITERAL = object()


def class_name(package: str) -> str:
    """Spack's class name for a package directory name (``py-numpy`` -> ``PyNumpy``)."""
    name = "".join(part.capitalize() for part in re.split(r"[-_]", package))
    return f"_{name}" if name[:1].isdigit() else name


def _package_class(tree: ast.Module, package: str) -> ast.ClassDef | None:
    want = class_name(package)
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == want), None)


def directives(cls: ast.ClassDef) -> list[Directive]:
    out: list[Directive] = []

    def walk(body: list[ast.stmt], when: str | None) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if isinstance(call.func, ast.Name) and call.func.id in DIRECTIVES:
                    kwargs = {k.arg: k.value for k in call.keywords if k.arg}
                    out.append(Directive(call.func.id, call.args, kwargs, call.lineno, when))
            elif isinstance(stmt, ast.With):
                inner = when
                for item in stmt.items:
                    ctx = item.context_expr
                    if (
                        isinstance(ctx, ast.Call)
                        and isinstance(ctx.func, ast.Name)
                        and ctx.func.id == "when"
                        and ctx.args
                        and isinstance(ctx.args[0], ast.Constant)
                    ):
                        inner = str(ctx.args[0].value)
                walk(stmt.body, inner)
            elif isinstance(stmt, ast.If | ast.For):
                walk(stmt.body, when)
                walk(stmt.orelse, when)

    walk(cls.body, None)
    return out


def recipe_facts(path: Path) -> PackageInfo:
    """Versions and variants of the recipe at ``path`` (package name = its directory)."""
    return _facts(ast.parse(path.read_text(), filename=str(path)), path)


def with_recipe(data: RecipeData, path: Path) -> RecipeData:
    """``data`` plus the package the recipe at ``path`` defines (if it parses)."""
    out = RecipeData(dict(data.packages), data.commit, data.virtuals)
    with contextlib.suppress(OSError, SyntaxError):  # check_recipe reports those
        out.add(recipe_facts(path))
    return out


def _facts(tree: ast.Module, path: Path) -> PackageInfo:
    package = path.parent.name
    cls = _package_class(tree, package)
    versions: list[str] = []
    variants: dict[str, VariantInfo] = {}
    provides: list[str] = []
    for d in directives(cls) if cls else []:
        first = d.literal()
        if first is None:
            continue
        if d.name == "version":
            versions.append(first)
        elif d.name == "variant":
            values = d.kw("values")
            variants[first] = VariantInfo(
                first,
                d.kw("default"),
                tuple(values) if isinstance(values, list | tuple) else None,
                d.kw("multi") if isinstance(d.kw("multi"), bool) else None,
            )
        elif d.name == "provides":
            provides.extend(str(a.value) for a in d.args if isinstance(a, ast.Constant))
    return PackageInfo(package, tuple(versions), variants, tuple(provides), display(path))


# --------------------------------------------------------------------------- checks
def check_recipe(path: Path, data: RecipeData, root: Path = REPO) -> list[Problem]:
    """Problems of the recipe at ``path``; ``root`` is the project whose Makefiles it runs."""
    file = display(path)
    package = path.parent.name
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        return [Problem(file, f"not valid Python: {exc.msg}", exc.lineno or 0)]
    except OSError as exc:
        return [Problem(file, f"cannot read the recipe: {exc.strerror}")]
    cls = _package_class(tree, package)
    if cls is None:
        return [
            Problem(
                file,
                f"no class {class_name(package)}: Spack loads the class named after the "
                f"package directory {package!r}",
            )
        ]
    data = RecipeData(dict(data.packages), data.commit, data.virtuals)
    data.add(_facts(tree, path))  # its own variants, for when="+mpi"
    problems = _check_imports(tree, cls, file)
    has_git = any(
        isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "git" for t in s.targets)
        for s in cls.body
    )
    for d in directives(cls):
        problems.extend(_check_directive(d, package, data, file, has_git))
    problems.extend(_check_make_calls(cls, file, root))
    problems.extend(_check_source_paths(cls, file, root))
    return problems


def _check_imports(tree: ast.Module, cls: ast.ClassDef, file: str) -> list[Problem]:
    problems = []
    imported: dict[str, str] = {}
    star = False
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name == "*" and node.module == "spack.package":
                    star = True
                imported[alias.asname or alias.name] = node.module
    if not star:
        problems.append(Problem(file, "missing 'from spack.package import *'", 1))
    for base in cls.bases:
        name = getattr(base, "id", None)
        module = imported.get(name or "")
        if name and (module is None or not module.startswith("spack_repo.builtin.build_systems")):
            problems.append(
                Problem(
                    file,
                    f"base class {name} must be imported from spack_repo.builtin.build_systems "
                    "(package API v2, Spack 1.x)",
                    cls.lineno,
                )
            )
    return problems


def _check_directive(
    d: Directive, package: str, data: RecipeData, file: str, has_git: bool
) -> list[Problem]:
    problems: list[Problem] = []
    first = d.literal()
    if first is None:
        return [Problem(file, f"{d.name}(...) needs a literal string first argument", d.line)]
    if d.name == "version":
        sources = VERSION_SOURCES & set(d.kwargs)
        if not sources:
            problems.append(
                Problem(
                    file,
                    f"version({first!r}) says nowhere to get it: give tag=, commit=, branch= "
                    "(git) or sha256= (tarball)",
                    d.line,
                )
            )
        elif sources & {"branch", "tag", "commit"} and not has_git:
            problems.append(
                Problem(file, f"version({first!r}) uses git but the class has no git = URL", d.line)
            )
    elif d.name == "variant":
        values, default = d.kw("values"), d.kw("default")
        if "description" not in d.kwargs:
            problems.append(Problem(file, f"variant({first!r}) has no description=", d.line))
        if isinstance(values, list | tuple) and isinstance(default, str):
            bad = [v for v in default.split(",") if v not in values]
            if bad:
                problems.append(
                    Problem(
                        file, f"variant({first!r}): default {default!r} is not in values", d.line
                    )
                )
    elif d.name in ("depends_on", "extends"):
        problems.extend(_spec_problems(first, data, file, d, speccheck.Context()))
        deptypes = d.kw("type")
        if deptypes is not None:
            given = {deptypes} if isinstance(deptypes, str) else set(deptypes or ())
            for wrong in sorted(given - DEP_TYPES):
                problems.append(
                    Problem(
                        file,
                        f"dependency type {wrong!r} does not exist (build, link, run, test)",
                        d.line,
                        d.name,
                        first,
                    )
                )
    elif d.name == "provides":
        name = first.split("@")[0]
        if name not in data.virtuals:
            problems.append(
                Problem(
                    file,
                    f"{name!r} is not a virtual in the recipe data "
                    f"({', '.join(sorted(data.virtuals))})",
                    d.line,
                    d.name,
                    first,
                )
            )
    else:  # conflicts, requires: constraints on this package
        ctx = speccheck.Context(implied=package)
        problems.extend(_spec_problems(first, data, file, d, ctx))
    when = d.kw("when")
    for condition in (when if isinstance(when, str) else None, d.when):
        if condition:
            ctx = speccheck.Context(implied=package)
            problems.extend(_spec_problems(condition, data, file, d, ctx, "when="))
    return problems


def _spec_problems(
    text: str, data: RecipeData, file: str, d: Directive, ctx: speccheck.Context, what: str = ""
) -> list[Problem]:
    where = f"{d.name} {what}".strip()
    return [f.place(file, d.line, where, text) for f in speccheck.check_text(text, data, ctx)]


def _literal_text(node: ast.expr) -> str | None:
    """A string constant, or the literal head of an f-string (``f"PREFIX={p}"`` -> PREFIX=)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value
    return None


def _check_make_calls(cls: ast.ClassDef, file: str, root: Path) -> list[Problem]:
    problems: list[Problem] = []
    makefiles: list[Makefile] = []
    calls = [
        n
        for n in ast.walk(cls)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "make"
    ]
    if not calls:
        return [Problem(file, "the recipe never runs the project's Makefile (make -C kernels)")]
    for call in calls:
        words = [w for w in (_literal_text(a) for a in call.args) if w is not None]
        directory = "."
        if "-C" in words and words.index("-C") + 1 < len(words):
            directory = words[words.index("-C") + 1]
        path = root / directory / "Makefile"
        if not path.is_file():
            problems.append(
                Problem(
                    file,
                    f"make -C {directory}: {display(path)} does not exist; the recipe's "
                    "build runs it",
                    call.lineno,
                )
            )
            continue
        mk = read_makefile(path)
        makefiles.append(mk)
        targets = [w for w in words if w not in ("-C", directory) and not w.startswith("-")]
        targets = [t for t in targets if "=" not in t] or [mk.default_goal or ""]
        for target in targets:
            if target not in mk.targets:
                hint = closest(target, sorted(mk.targets))
                problems.append(
                    Problem(
                        file,
                        f"make -C {directory} {target}: no target {target!r} in "
                        f"{display(path)}" + (f"; did you mean {hint!r}?" if hint else ""),
                        call.lineno,
                    )
                )
    # KEY=VALUE words anywhere in the class are make variables: the Makefiles must use them.
    known = set().union(*(mk.variables for mk in makefiles)) if makefiles else set()
    reported: set[tuple[str, int]] = set()
    for node in ast.walk(cls):
        text = _literal_text(node) if isinstance(node, ast.expr) else None
        m = _MAKE_VAR.match(text or "")
        if (
            m
            and makefiles
            and m.group(1) not in known
            and (m.group(1), getattr(node, "lineno", 0)) not in reported
        ):
            reported.add((m.group(1), getattr(node, "lineno", 0)))
            problems.append(
                Problem(
                    file,
                    f"passes {m.group(1)}= to make, but "
                    f"{', '.join(display(mk.path) for mk in makefiles)} never uses "
                    f"$({m.group(1)})",
                    getattr(node, "lineno", 0),
                )
            )
    return problems


def _check_source_paths(cls: ast.ClassDef, file: str, root: Path) -> list[Problem]:
    """Files the recipe installs from the source tree (``install_tree("site_configs", ...)``)."""
    problems = []
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in ("install_tree", "listdir"):
            continue
        arg = _literal_text(node.args[0])
        if arg and not arg.startswith("/") and not (root / arg).exists():
            problems.append(
                Problem(file, f"{name}({arg!r}): the project has no {arg!r}", node.lineno)
            )
    return problems
