"""Check a Spack environment file (``spack.yaml``) or a configuration file it includes.

Both are validated against Spack's environment schema (an included file such as
``site_configs/SITE/spack-packages.yaml`` holds configuration sections only, so it is
validated as the body of ``spack:``), and every spec string in them is parsed and checked
against the recipe data: ``specs:`` (and matrices), ``packages:`` ``require:``/``prefer:``/
``conflict:`` (anonymous specs constrain the package they sit under), ``variants:``,
``version:``, ``externals: - spec:``, ``providers:`` (each provider must provide the virtual),
``develop:``. For ``spack.yaml`` also: every non-optional ``include:`` exists, every
``repos:`` path is a package repository (``repo.yaml`` whose namespace is its directory
name), and every package marked ``buildable: false`` gets externals from spack.yaml or from
each site overlay it includes (otherwise ``spack concretize`` fails).
"""

from __future__ import annotations

import contextlib
import glob
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from topobind.errors import TopobindError
from topobind.spackcheck import speccheck
from topobind.spackcheck.locations import display
from topobind.spackcheck.problems import Problem
from topobind.spackcheck.recipedata import OUTSIDE_DATA, RecipeData, closest
from topobind.spackcheck.specs import SpecSyntaxError, parse_spec
from topobind.spackcheck.yamlfile import YamlFile, YamlPath, load

#: Sections of an environment that an included configuration file cannot hold.
ENV_ONLY = frozenset({"specs", "view", "include_concrete", "definitions", "develop"})
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


@dataclass(frozen=True)
class SpecAt:
    """A spec string found in a file, with how it is used there."""

    where: YamlPath
    text: str
    ctx: speccheck.Context
    package: str | None = None  # externals: the package the entry sits under
    provides: str | None = None  # providers / virtual requirements: the virtual
    unquoted: bool = False  # YAML read `- name@1.2: +v` as a mapping


def _unmapped(item: dict[str, Any]) -> str:
    """The spec an unquoted ``- hwloc@2.9: +libxml2`` was meant to be."""
    key, value = next(iter(item.items()))
    return f"{key}: {value}" if value is not None else f"{key}:"


def where_text(where: YamlPath) -> str:
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# --------------------------------------------------------------------------- entry points
def check_env(path: Path, data: RecipeData, schema: dict[str, Any]) -> list[Problem]:
    yf = load(path)
    doc = yf.data
    if not isinstance(doc, dict) or not isinstance(doc.get("spack"), dict):
        return [Problem(yf.name, "not a Spack environment: the top level must be 'spack:'", 1)]
    problems = _schema_problems(yf, doc, schema, wrapped=False)
    body = doc["spack"]
    problems += _spec_problems(yf, body, ("spack",), data)
    problems += _include_problems(yf, body)
    problems += _repo_problems(yf, body)
    problems += _develop_problems(yf, body)
    problems += _buildable_problems(yf, body)
    return problems


def check_overlay(path: Path, data: RecipeData, schema: dict[str, Any]) -> list[Problem]:
    yf = load(path)
    doc = yf.data
    if not isinstance(doc, dict):
        return [Problem(yf.name, "not a configuration file: expected sections like packages:", 1)]
    problems = [
        Problem(
            yf.name,
            f"'{key}:' belongs in spack.yaml itself; an included file holds configuration "
            "sections only (packages:, repos:, concretizer:, ...)",
            yf.line(key),
        )
        for key in doc
        if key in ENV_ONLY
    ]
    problems += _schema_problems(yf, {"spack": doc}, schema, wrapped=True)
    problems += _spec_problems(yf, doc, (), data)
    return problems


# --------------------------------------------------------------------------- schema
def _schema_problems(
    yf: YamlFile, doc: Any, schema: dict[str, Any], wrapped: bool
) -> list[Problem]:
    """Schema errors; ``wrapped``: ``doc`` is the file's content put under ``spack:``."""
    validator = jsonschema.Draft7Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]):
        where = tuple(err.absolute_path)
        shown = where[1:] if where[:1] == ("spack",) else where
        out.append(
            Problem(
                yf.name,
                f"{err.message} (Spack's environment schema)",
                yf.line(*(shown if wrapped else where)),
                where_text(shown) or "(top level)",
            )
        )
    return out


# --------------------------------------------------------------------------- specs
def _spec_problems(
    yf: YamlFile, body: dict[str, Any], base: YamlPath, data: RecipeData
) -> list[Problem]:
    problems = []
    for at in _specs_in(body, base, data):
        line = yf.line(*at.where)
        shown = where_text(at.where[len(base) :])
        if at.unquoted:
            problems.append(
                Problem(
                    yf.name,
                    f"YAML read this as a mapping because of ': ' after the version range; "
                    f'quote the spec: "{at.text}"',
                    line,
                    shown,
                )
            )
            continue
        findings = speccheck.check_text(at.text, data, at.ctx)
        problems += [f.place(yf.name, line, shown, at.text) for f in findings]
        if findings:
            continue
        root = parse_spec(at.text).root
        if at.package and root.name and root.name != at.package:
            problems.append(
                Problem(
                    yf.name,
                    f"an external listed under packages.{at.package} must be {at.package}, "
                    f"not {root.name}",
                    line,
                    shown,
                    at.text,
                    root.column,
                )
            )
        pkg = data.packages.get(root.name or "")
        if at.provides and pkg and not pkg.provides_virtual(at.provides):
            problems.append(
                Problem(
                    yf.name,
                    f"{root.name!r} does not provide {at.provides} (providers in the "
                    f"recipe data: {', '.join(data.providers(at.provides))})",
                    line,
                    shown,
                    at.text,
                    root.column,
                )
            )
    problems += _package_name_problems(yf, body, base, data)
    return problems


def _specs_in(body: dict[str, Any], base: YamlPath, data: RecipeData) -> Iterator[SpecAt]:
    named = speccheck.Context()
    loose = speccheck.Context(anonymous_ok=True)
    for i, item in enumerate(body.get("specs") or []):
        if isinstance(item, str):
            yield SpecAt((*base, "specs", i), item, named)
        elif isinstance(item, dict) and not {"matrix", "exclude"} & item.keys():
            yield SpecAt((*base, "specs", i), _unmapped(item), named, unquoted=True)
        elif isinstance(item, dict):
            for j, row in enumerate(item.get("matrix") or []):
                for k, text in enumerate(row or []):
                    if isinstance(text, str):
                        yield SpecAt((*base, "specs", i, "matrix", j, k), text, loose)
            for j, text in enumerate(item.get("exclude") or []):
                if isinstance(text, str):
                    yield SpecAt((*base, "specs", i, "exclude", j), text, loose)
    for i, definition in enumerate(body.get("definitions") or []):
        for name, texts in (definition or {}).items():
            if name != "when" and isinstance(texts, list):
                for j, text in enumerate(texts):
                    if isinstance(text, str):
                        yield SpecAt((*base, "definitions", i, name, j), text, loose)
    for name, dev in (body.get("develop") or {}).items():
        if isinstance(dev, dict) and isinstance(dev.get("spec"), str):
            yield SpecAt((*base, "develop", name, "spec"), dev["spec"], named, package=name)
    packages = body.get("packages") or {}
    if isinstance(packages, dict):
        for pkg, conf in packages.items():
            if isinstance(conf, dict):
                yield from _package_specs(pkg, conf, (*base, "packages", pkg), data)


def _package_specs(
    pkg: str, conf: dict[str, Any], at: YamlPath, data: RecipeData
) -> Iterator[SpecAt]:
    virtual = pkg in data.virtuals
    implied = pkg if pkg in data.packages else None  # unknown names are reported once
    ctx = speccheck.Context(implied=implied, anonymous_ok=implied is None)
    provides = pkg if virtual else None
    for key in ("require", "prefer", "conflict"):
        value = conf.get(key)
        entries = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for i, entry in enumerate(entries):
            here: YamlPath = (*at, key) if isinstance(value, str) else (*at, key, i)
            if isinstance(entry, str):
                yield SpecAt(here, entry, ctx, provides=provides if key == "require" else None)
            elif isinstance(entry, dict):
                if isinstance(entry.get("spec"), str):
                    yield SpecAt((*here, "spec"), entry["spec"], ctx, provides=provides)
                for group in ("one_of", "any_of"):
                    for j, text in enumerate(entry.get(group) or []):
                        yield SpecAt((*here, group, j), text, ctx, provides=provides)
                if isinstance(entry.get("when"), str):
                    yield SpecAt((*here, "when"), entry["when"], ctx)
    variants = conf.get("variants")
    if isinstance(variants, str):
        yield SpecAt((*at, "variants"), variants, speccheck.Context(implied, anonymous_ok=True))
    elif isinstance(variants, list):
        for i, text in enumerate(variants):
            yield SpecAt((*at, "variants", i), text, speccheck.Context(implied, anonymous_ok=True))
    for i, version in enumerate(conf.get("version") or []):
        if isinstance(version, str) and implied:
            yield SpecAt((*at, "version", i), f"{implied}@{version}", speccheck.Context())
    for i, ext in enumerate(conf.get("externals") or []):
        if isinstance(ext, dict) and isinstance(ext.get("spec"), str):
            yield SpecAt(
                (*at, "externals", i, "spec"),
                ext["spec"],
                speccheck.Context(external=True),
                package=implied,
            )
    for virtual_name, providers in (conf.get("providers") or {}).items():
        for i, text in enumerate(providers or []):
            if isinstance(text, str):
                yield SpecAt(
                    (*at, "providers", virtual_name, i),
                    text,
                    speccheck.Context(),
                    provides=virtual_name,
                )


def _package_name_problems(
    yf: YamlFile, body: dict[str, Any], base: YamlPath, data: RecipeData
) -> list[Problem]:
    packages = body.get("packages") or {}
    if not isinstance(packages, dict):
        return []
    out = []
    for pkg, conf in packages.items():
        at = (*base, "packages", pkg)
        known = pkg == "all" or pkg in data.packages or pkg in data.virtuals
        if not known and pkg not in OUTSIDE_DATA and pkg not in speccheck.COMPILERS:
            hint = closest(pkg, list(data.packages))
            out.append(
                Problem(
                    yf.name,
                    f"unknown package {pkg!r}" + (f"; did you mean {hint!r}?" if hint else ""),
                    yf.line(*at),
                    where_text(at[len(base) :]),
                )
            )
        if not isinstance(conf, dict):
            continue
        for i, version in enumerate(conf.get("version") or []):
            if not isinstance(version, str):
                out.append(
                    Problem(
                        yf.name,
                        f"version {version!r} is a YAML number: quote it (YAML reads 3.10 as 3.1)",
                        yf.line(*at, "version", i),
                        where_text((*at[len(base) :], "version", i)),
                    )
                )
        for virtual in conf.get("providers") or {}:
            if virtual not in data.virtuals and virtual not in speccheck.LANGUAGE_VIRTUALS:
                hint = closest(virtual, sorted(data.virtuals))
                out.append(
                    Problem(
                        yf.name,
                        f"unknown virtual {virtual!r}"
                        + (f"; did you mean {hint!r}?" if hint else ""),
                        yf.line(*at, "providers", virtual),
                        where_text((*at[len(base) :], "providers", virtual)),
                    )
                )
    return out


# --------------------------------------------------------------------------- spack.yaml only
def include_paths(yf: YamlFile) -> list[tuple[int, str, bool]]:
    """(index, path, optional) of every local ``include:`` entry of an environment."""
    body = yf.data.get("spack", {}) if isinstance(yf.data, dict) else {}
    out = []
    for i, entry in enumerate(body.get("include") or []):
        if isinstance(entry, str):
            out.append((i, entry, False))
        elif isinstance(entry, dict) and isinstance(entry.get("path"), str):
            out.append((i, entry["path"], bool(entry.get("optional", False))))
    return [(i, p, opt) for i, p, opt in out if "://" not in p]


def expand_include(env_dir: Path, path: str) -> list[Path]:
    """Files an include path can name: each ``$VAR``/``${VAR}`` stands for any value."""
    pattern = _VAR.sub("*", path)
    full = pattern if pattern.startswith("/") else str(env_dir / pattern)
    return sorted(Path(p) for p in glob.glob(full))


def _include_problems(yf: YamlFile, body: dict[str, Any]) -> list[Problem]:
    out = []
    for i, path, optional in include_paths(yf):
        if not optional and not expand_include(yf.path.parent, path):
            out.append(
                Problem(
                    yf.name,
                    f"included file {path!r} does not exist and is not 'optional: true'",
                    yf.line("spack", "include", i),
                    f"include[{i}]",
                )
            )
    return out


def _repo_problems(yf: YamlFile, body: dict[str, Any]) -> list[Problem]:
    repos = body.get("repos")
    items = repos.items() if isinstance(repos, dict) else enumerate(repos or [])
    out = []
    for key, value in items:
        if not isinstance(value, str):
            continue  # a git repository: cloned by Spack, nothing to look at here
        line = yf.line("spack", "repos", key)
        root = Path(value) if value.startswith("/") else yf.path.parent / value
        msg = _repo_problem(root)
        if msg:
            out.append(Problem(yf.name, f"{value}: {msg}", line, f"repos.{key}"))
    return out


def _repo_problem(root: Path) -> str | None:
    meta = root / "repo.yaml"
    if not meta.is_file():
        return "not a Spack package repository (no repo.yaml there)"
    try:
        repo = (yaml.safe_load(meta.read_text()) or {}).get("repo", {})
    except yaml.YAMLError as exc:
        return f"repo.yaml is not valid YAML: {exc}"
    namespace, api = repo.get("namespace"), str(repo.get("api", ""))
    if not re.fullmatch(r"v\d+\.\d+", api):
        return f"repo.yaml: api {api!r} is not a package API version like v2.0"
    if api.startswith("v2.") and (namespace != root.name or root.parent.name != "spack_repo"):
        return (
            f"package API v2 wants the repository at spack_repo/{namespace}/ "
            f"(namespace {namespace!r}, directory {root.parent.name}/{root.name})"
        )
    if not (root / "packages").is_dir():
        return "no packages/ directory"
    return None


def _develop_problems(yf: YamlFile, body: dict[str, Any]) -> list[Problem]:
    out = []
    for name, dev in (body.get("develop") or {}).items():
        path = dev.get("path", name) if isinstance(dev, dict) else name
        root = Path(path) if str(path).startswith("/") else yf.path.parent / str(path)
        if not root.is_dir():
            out.append(
                Problem(
                    yf.name,
                    f"source directory {path!r} does not exist",
                    yf.line("spack", "develop", name),
                    f"develop.{name}",
                )
            )
        spec = dev.get("spec") if isinstance(dev, dict) else None
        try:
            version = parse_spec(spec).root.version if isinstance(spec, str) else None
        except SpecSyntaxError:
            continue  # reported with the other specs
        if isinstance(spec, str) and not (version or "").startswith("="):
            out.append(
                Problem(
                    yf.name,
                    "a develop spec needs one exact version, e.g. topobind@=main",
                    yf.line("spack", "develop", name, "spec"),
                    f"develop.{name}.spec",
                    spec,
                )
            )
    return out


def _buildable_problems(yf: YamlFile, body: dict[str, Any]) -> list[Problem]:
    """Non-buildable packages need externals: from spack.yaml or from each included overlay."""
    own = body.get("packages") or {}
    fixed = sorted(p for p, c in own.items() if isinstance(c, dict) and c.get("buildable") is False)
    overlays = [
        f for _i, path, _opt in include_paths(yf) for f in expand_include(yf.path.parent, path)
    ]
    out = []
    candidates: list[Path | None] = [*overlays] or [None]
    for candidate in candidates:
        extra: dict[str, Any] = {}
        if candidate is not None:
            with contextlib.suppress(TopobindError, AttributeError):  # reported by its check
                extra = (load(candidate).data or {}).get("packages") or {}
        for pkg in fixed:
            mine, theirs = own.get(pkg) or {}, extra.get(pkg) or {}
            if mine.get("externals") or (isinstance(theirs, dict) and theirs.get("externals")):
                continue
            where = (
                f"neither spack.yaml nor {display(candidate)} lists an external {pkg}"
                if candidate
                else f"spack.yaml lists no external {pkg} and includes no site overlay"
            )
            out.append(
                Problem(
                    yf.name,
                    f"{pkg} is 'buildable: false' but {where}: spack concretize would fail",
                    yf.line("spack", "packages", pkg),
                    f"packages.{pkg}",
                )
            )
    return out
