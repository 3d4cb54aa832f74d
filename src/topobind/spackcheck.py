"""Checks of spack.yaml, the site overlays and topobind's own Spack recipe, without Spack.

Spack cannot be installed on these machines; what it publishes stands in for it
(``../shared/spack``): the JSON Schema of environment files, and the versions, variants and
provided virtuals read from Spack's builtin recipes at a named commit. Checked here:

1. every environment/overlay file validates against Spack's schema;
2. every spec string parses (name, @versions, +/~/- variants, key=value, ^dep, %compiler);
3. every package, variant, variant value and pinned version exists in the recipe data (or
   in topobind's own recipe); virtuals (mpi, blas, lapack) are only satisfied by providers;
4. topobind's recipe is valid Python whose directives name only existing packages and
   variants, and whose build steps call targets that exist in the project's Makefiles.

What only a real ``spack concretize`` on a cluster can confirm (conflicts between
constraints, compilers, the site's externals) is not claimed.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from topobind.errors import TopobindError

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "spack" / "spack_repo" / "topobind" / "packages" / "topobind" / "package.py"
VIRTUALS = ("mpi", "blas", "lapack")
# Names Spack knows that the recipe data does not cover (it lists topobind's stack only):
# language virtuals of Spack 1.0 and common build tools. Accepted, never checked further.
OUTSIDE_DATA = {"c", "cxx", "fortran", "gmake", "py-pip", "py-setuptools", "gcc", "clang"}
BOOL_WORDS = {"true", "false", "True", "False"}


def shared_dir() -> Path:
    return Path(os.environ.get("TOPOBIND_SHARED", REPO.parent / "shared"))


# --------------------------------------------------------------------------- spec parsing
class SpecError(Exception):
    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column


@dataclass
class Node:
    name: str | None
    column: int
    versions: str | None = None
    variants: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (value, col)
    compiler: Node | None = None


@dataclass
class Spec:
    text: str
    root: Node
    deps: list[Node] = field(default_factory=list)


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_VERSION = re.compile(r"[A-Za-z0-9_.\-:,=]+")
_VALUE = re.compile(r"[A-Za-z0-9_.\-,/:*${}]+|\"[^\"]*\"|'[^']*'")


def parse_spec(text: str) -> Spec:
    pos = 0
    n = len(text)
    nodes: list[Node] = []
    current: Node | None = None

    def skip_ws() -> None:
        nonlocal pos
        while pos < n and text[pos].isspace():
            pos += 1

    def new_node(col: int) -> Node:
        node = Node(name=None, column=col)
        return node

    current = new_node(1)
    nodes.append(current)
    while True:
        skip_ws()
        if pos >= n:
            break
        ch = text[pos]
        col = pos + 1
        if ch == "^":
            pos += 1
            skip_ws()
            current = new_node(pos + 1)
            nodes.append(current)
            m = _NAME.match(text, pos)
            if not m:
                raise SpecError(pos + 1, "expected a package name after '^'")
            current.name = m.group(0)
            pos = m.end()
        elif ch == "%":
            pos += 1
            skip_ws()
            m = _NAME.match(text, pos)
            if not m:
                raise SpecError(pos + 1, "expected a compiler name after '%'")
            comp = Node(name=m.group(0), column=pos + 1)
            pos = m.end()
            current.compiler = comp
            if pos < n and text[pos] == "@":
                pos += 1
                v = _VERSION.match(text, pos)
                if not v:
                    raise SpecError(pos + 1, "expected a version after '@'")
                comp.versions = v.group(0)
                pos = v.end()
        elif ch == "@":
            pos += 1
            v = _VERSION.match(text, pos)
            if not v or "=" in v.group(0).lstrip("="):
                raise SpecError(pos + 1, "expected a version or range after '@' (e.g. @1.2:1.4)")
            if current.versions is not None:
                raise SpecError(col, "a second version for the same package")
            current.versions = v.group(0)
            pos = v.end()
        elif ch in "+~-" and pos + 1 < n and _NAME.match(text, pos + 1 + (text[pos + 1] == ch)):
            double = text[pos + 1] == ch
            pos += 2 if double else 1
            m = _NAME.match(text, pos)
            assert m
            current.variants[m.group(0)] = ("true" if ch == "+" else "false", col)
            pos = m.end()
        else:
            m = _NAME.match(text, pos)
            if not m:
                raise SpecError(col, f"unexpected character {ch!r}")
            word = m.group(0)
            after = m.end()
            if after < n and text[after] == "=":
                after += 2 if text[after : after + 2] == "==" else 1
                v = _VALUE.match(text, after)
                if not v:
                    raise SpecError(after + 1, f"expected a value for {word}=")
                current.variants[word] = (v.group(0).strip("'\""), col)
                pos = v.end()
            elif current.name is None and not current.variants and current.versions is None:
                current.name = word
                pos = after
            else:
                raise SpecError(col, f"unexpected word {word!r} (a second package name?)")
    root = nodes[0]
    if root.name is None:
        raise SpecError(1, "a spec needs a package name first")
    return Spec(text=text, root=root, deps=nodes[1:])


# --------------------------------------------------------------------------- recipe data
@dataclass
class RecipeData:
    packages: dict[str, dict[str, Any]]

    @classmethod
    def load(cls, path: Path | None = None) -> RecipeData:
        path = path or shared_dir() / "spack" / "recipes.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TopobindError(f"cannot read Spack recipe data {path}: {exc}") from exc
        pkgs = dict(data["packages"])
        own = recipe_facts(RECIPE)
        pkgs["topobind"] = own
        return cls(pkgs)

    def providers(self, virtual: str) -> list[str]:
        return [
            n
            for n, p in self.packages.items()
            if any(v.split("@")[0] == virtual for v in p.get("provides", []))
        ]


def _closest(name: str, names: list[str]) -> str:
    best = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"; did you mean {best[0]!r}?" if best else ""


def _version_ok(spec_versions: str, known: list[str]) -> str | None:
    """None when fine; else a message. Ranges need one known version inside them."""
    for part in spec_versions.lstrip("=").split(","):
        if ":" not in part:
            if part not in known and not any(k.startswith(part + ".") for k in known):
                return f"version {part} is not a known version ({', '.join(known[:6])}, ...)"
            continue
        lo, hi = part.split(":", 1)
        if not any(_in_range(k, lo, hi) for k in known):
            return f"no known version in range {part}"
    return None


def _vkey(v: str) -> tuple[Any, ...]:
    return tuple((0, int(x)) if x.isdigit() else (1, x) for x in re.split(r"[.\-]", v))


def _in_range(v: str, lo: str, hi: str) -> bool:
    if not re.match(r"^\d", v):
        return False
    k = _vkey(v)
    if lo and k < _vkey(lo):
        return False
    return not (hi and k > _vkey(hi) and not v.startswith(hi + "."))


def check_node(node: Node, data: RecipeData, where: str, external: bool = False) -> list[str]:
    errors: list[str] = []
    name = node.name or ""
    if name in OUTSIDE_DATA:
        return errors
    if name in VIRTUALS:
        if node.variants:
            errors.append(f"{where}: column {node.column}: a virtual ({name}) takes no variants")
        return errors
    pkg = data.packages.get(name)
    if pkg is None:
        return [
            f"{where}: column {node.column}: unknown package {name!r}"
            + _closest(name, list(data.packages))
        ]
    if node.versions and not external:
        msg = _version_ok(node.versions, pkg.get("versions", []))
        if msg:
            errors.append(f"{where}: {name}@{node.versions}: {msg}")
    variants = pkg.get("variants", {})
    for var, (value, col) in node.variants.items():
        if var in ("arch", "target", "os", "platform", "dev_path", "patches"):
            continue
        info = variants.get(var)
        if info is None:
            errors.append(
                f"{where}: column {col}: package {name!r} has no variant {var!r}"
                + _closest(var, list(variants))
            )
            continue
        errors.extend(_check_value(where, col, name, var, value, info))
    return errors


def _check_value(
    where: str, col: int, pkg: str, var: str, value: str, info: dict[str, Any]
) -> list[str]:
    allowed = info.get("values")
    default = info.get("default")
    is_bool = allowed is None and (
        isinstance(default, bool)
        or (isinstance(default, str) and ("sys.platform" in default or default in BOOL_WORDS))
    )
    if is_bool:
        if value.lower() not in ("true", "false"):
            return [
                f"{where}: column {col}: {pkg} variant {var!r} is boolean (+{var} or "
                f"~{var}), not {var}={value}"
            ]
        return []
    if isinstance(allowed, list):
        values = value.split(",") if info.get("multi") or "," in value else [value]
        bad = [v for v in values if v not in allowed]
        if bad:
            return [
                f"{where}: column {col}: {pkg} variant {var}={value}: {bad[0]!r} is not "
                f"one of {', '.join(allowed)}" + _closest(bad[0], allowed)
            ]
    return []


def check_spec_text(text: str, data: RecipeData, where: str, external: bool = False) -> list[str]:
    try:
        spec = parse_spec(text)
    except SpecError as exc:
        return [f"{where} {text!r}: column {exc.column}: {exc}"]
    errors = check_node(spec.root, data, f"{where} {text!r}", external)
    for dep in spec.deps:
        errors.extend(check_node(dep, data, f"{where} {text!r}", external))
    return errors


# --------------------------------------------------------------------------- env files
def load_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise TopobindError(f"{path}: cannot read YAML: {exc}") from exc


def schema() -> dict[str, Any]:
    path = shared_dir() / "spack" / "spack-env.schema.json"
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise TopobindError(f"cannot read Spack's schema {path}: {exc}") from exc


def check_env_file(path: Path, data: RecipeData, overlay: bool = False) -> list[str]:
    import jsonschema

    doc = load_yaml(path)
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    if not isinstance(doc, dict):
        return [f"{name}: not a YAML mapping"]
    wrapped = doc if "spack" in doc else {"spack": doc}
    errors: list[str] = []
    validator = jsonschema.Draft7Validator(schema())
    for err in sorted(validator.iter_errors(wrapped), key=lambda e: list(e.absolute_path)):
        loc = ".".join(str(p) for p in err.absolute_path) or "(top)"
        errors.append(f"{name}: {loc}: {err.message} (Spack's environment schema)")
    body = wrapped.get("spack", {})
    for i, text in enumerate(body.get("specs", []) or []):
        if isinstance(text, str):
            errors.extend(check_spec_text(text, data, f"{name}: specs[{i}]"))
    packages = body.get("packages", {}) or {}
    for pkg, conf in packages.items():
        if not isinstance(conf, dict):
            continue
        if pkg != "all" and pkg not in data.packages and pkg not in VIRTUALS:
            errors.append(
                f"{name}: packages.{pkg}: unknown package" + _closest(pkg, list(data.packages))
            )
            continue
        for key in ("require", "prefer"):
            for j, item in enumerate(_spec_items(conf.get(key))):
                # "^hwloc+libxml2" constrains this package: check it as "openmpi ^hwloc..."
                text = f"{pkg} {item}" if item.startswith(("^", "+", "~", "@", "%")) else item
                errors.extend(check_spec_text(text, data, f"{name}: packages.{pkg}.{key}[{j}]"))
        for j, ext in enumerate(conf.get("externals", []) or []):
            if isinstance(ext, dict) and "spec" in ext:
                errors.extend(
                    check_spec_text(
                        ext["spec"], data, f"{name}: packages.{pkg}.externals[{j}]", external=True
                    )
                )
        for virtual, provs in (conf.get("providers") or {}).items():
            if virtual not in VIRTUALS:
                continue
            ok = data.providers(virtual)
            for prov in provs:
                prov_name = parse_spec(prov).root.name or prov
                if prov_name not in ok:
                    errors.append(
                        f"{name}: packages.{pkg}.providers.{virtual}: {prov_name!r} does not "
                        f"provide {virtual} (providers here: {', '.join(ok)})"
                    )
        variants = conf.get("variants")
        if isinstance(variants, str) and pkg != "all":
            errors.extend(
                check_spec_text(f"{pkg} {variants}", data, f"{name}: packages.{pkg}.variants")
            )
    return errors


def _spec_items(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            if "spec" in item:
                out.append(item["spec"])
            out.extend(item.get("one_of", []) + item.get("any_of", []))
    return out


# --------------------------------------------------------------------------- the recipe
def recipe_facts(path: Path) -> dict[str, Any]:
    """Versions and variants of topobind's own recipe, read with ``ast`` (never executed)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    versions: list[str] = []
    variants: dict[str, dict[str, Any]] = {}
    for call in _directives(tree):
        args = [a.value for a in call.args if isinstance(a, ast.Constant)]
        kw = {
            k.arg: k.value.value
            for k in call.keywords
            if k.arg and isinstance(k.value, ast.Constant)
        }
        if call.func.id == "version" and args:  # type: ignore[attr-defined]
            versions.append(str(args[0]))
        if call.func.id == "variant" and args:  # type: ignore[attr-defined]
            variants[str(args[0])] = {"default": kw.get("default"), "values": kw.get("values")}
    return {"versions": versions, "variants": variants, "provides": []}


def _directives(tree: ast.AST) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Call)
                    and isinstance(stmt.value.func, ast.Name)
                ):
                    out.append(stmt.value)
    return out


def makefile_targets(path: Path) -> set[str]:
    targets: set[str] = set()
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-/ ]+):(?!=)", line)
        if m:
            targets.update(m.group(1).split())
    return targets


def check_recipe(path: Path, data: RecipeData) -> list[str]:
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        return [f"{name}:{exc.lineno}: not valid Python: {exc.msg}"]
    errors: list[str] = []
    for call in _directives(tree):
        func = call.func.id  # type: ignore[attr-defined]
        first = call.args[0] if call.args else None
        if func in ("depends_on", "conflicts", "provides") and isinstance(first, ast.Constant):
            errors.extend(check_spec_text(str(first.value), data, f"{name}:{call.lineno}: {func}"))
        for kw in call.keywords:
            if kw.arg == "when" and isinstance(kw.value, ast.Constant):
                text = str(kw.value.value)
                if not text.startswith(("+", "~", "@", "^", "%")):
                    errors.extend(check_spec_text(text, data, f"{name}:{call.lineno}: when="))
                else:
                    errors.extend(
                        check_spec_text(f"topobind {text}", data, f"{name}:{call.lineno}: when=")
                    )
    # make(...) calls in build/install: every target must exist in the named Makefile.
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "make"
        ):
            words = [a.value for a in node.args if isinstance(a, ast.Constant)]
            directory = "."
            if "-C" in words:
                directory = words[words.index("-C") + 1]
            makefile = REPO / directory / "Makefile"
            if not makefile.exists():
                errors.append(f"{name}:{node.lineno}: make -C {directory}: no {makefile}")
                continue
            targets = [
                w
                for w in words
                if w not in ("-C", directory) and not w.startswith("-") and "=" not in w
            ] or ["all"]
            have = makefile_targets(makefile)
            for t in targets:
                if t not in have:
                    errors.append(
                        f"{name}:{node.lineno}: make target {t!r} does not exist in "
                        f"{makefile.relative_to(REPO)}"
                    )
    return errors


def default_files() -> list[Path]:
    return [REPO / "spack.yaml", *sorted((REPO / "site_configs").glob("*/spack-packages.yaml"))]


def check_all(files: list[Path] | None = None) -> list[str]:
    data = RecipeData.load()
    errors: list[str] = []
    for path in files or default_files():
        if not path.exists():
            errors.append(f"{path}: no such file")
            continue
        if path.suffix == ".py":
            errors.extend(check_recipe(path, data))
        else:
            errors.extend(check_env_file(path, data, overlay=path.name != "spack.yaml"))
    if not files:
        errors.extend(check_recipe(RECIPE, data))
    return errors
