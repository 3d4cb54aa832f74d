"""Check a parsed spec against the recipe data: names, versions, variants, virtuals.

Every package named must exist (a misspelt one gets the closest real name); a pinned
version must be satisfiable by a version the recipe has; every variant must exist on its
package, boolean variants take only true/false, variants with a fixed set of values take
only those (each value of a multi-valued one is checked); a virtual (``mpi``, ``blas``,
``lapack``) bound to a package (``^mpi=openblas``, ``^[virtuals=mpi] openblas``) must be
provided by it.
"""

from __future__ import annotations

from dataclasses import dataclass

from topobind.spackcheck import versions as V
from topobind.spackcheck.problems import Finding
from topobind.spackcheck.recipedata import (
    OUTSIDE_DATA,
    PackageInfo,
    RecipeData,
    VariantInfo,
    closest,
)
from topobind.spackcheck.specs import Node, Spec, SpecSyntaxError, Variant, parse_spec

#: Spec keys that are not variants of the package.
ARCH_KEYS = frozenset({"arch", "target", "os", "platform"})
FLAG_KEYS = frozenset({"cflags", "cxxflags", "fflags", "cppflags", "ldflags", "ldlibs"})
SPECIAL_KEYS = frozenset({"build_system", "dev_path", "patches", "commit"})
#: Compilers are packages in Spack 1.x (``%gcc@12``); the recipe data does not list them.
COMPILERS = frozenset(
    {"gcc", "llvm", "clang", "apple-clang", "intel-oneapi-compilers", "nvhpc", "aocc", "cce"}
)
LANGUAGE_VIRTUALS = frozenset({"c", "cxx", "fortran"})
NAMESPACES = frozenset({"builtin", "topobind"})


@dataclass(frozen=True)
class Context:
    """How a spec string is used where it appears."""

    implied: str | None = None  # the package an anonymous spec constrains ("+libxml2")
    anonymous_ok: bool = False  # True where Spack accepts a spec without a name
    external: bool = False  # an external's version need not be one the recipe has


def check_text(text: str, data: RecipeData, ctx: Context = Context()) -> list[Finding]:
    try:
        spec = parse_spec(text)
    except SpecSyntaxError as exc:
        return [Finding(str(exc), exc.column)]
    return check_spec(spec, data, ctx)


def check_spec(spec: Spec, data: RecipeData, ctx: Context = Context()) -> list[Finding]:
    out: list[Finding] = []
    root = spec.root
    if root.name is None and ctx.implied is None and not ctx.anonymous_ok:
        out.append(Finding("a spec here needs a package name first (e.g. hwloc+libxml2)", 1))
    for node in spec.nodes:
        name = node.name or (ctx.implied if node is root else None)
        if name is None or name == "*":
            continue
        out.extend(check_node(node, name, data, external=ctx.external and node is root))
    return out


def check_node(node: Node, name: str, data: RecipeData, external: bool = False) -> list[Finding]:
    if node.namespace and node.namespace not in NAMESPACES:
        return [
            Finding(
                f"unknown repository namespace {node.namespace!r} "
                f"(known: {', '.join(sorted(NAMESPACES))})",
                node.column,
            )
        ]
    if name in OUTSIDE_DATA or name in COMPILERS:
        return []
    if name in data.virtuals:
        if node.variants:
            return [
                Finding(
                    f"{name} is a virtual package: it has no variants; put them on its "
                    f"provider ({', '.join(data.providers(name))})",
                    node.variants[0].column,
                )
            ]
        return []
    pkg = data.packages.get(name)
    if pkg is None:
        hint = closest(name, [*data.packages, *data.virtuals])
        return [
            Finding(
                f"unknown package {name!r}" + (f"; did you mean {hint!r}?" if hint else ""),
                node.column,
            )
        ]
    out: list[Finding] = []
    for virtual in node.virtuals:
        out.extend(_check_binding(virtual, pkg, node, data))
    if node.version and not external:
        out.extend(check_version(pkg, node.version, node.version_column))
    for var in node.variants:
        out.extend(check_variant(pkg, var, data))
    return out


def _check_binding(virtual: str, pkg: PackageInfo, node: Node, data: RecipeData) -> list[Finding]:
    if virtual in LANGUAGE_VIRTUALS:
        return []
    if virtual not in data.virtuals:
        hint = closest(virtual, sorted(data.virtuals))
        return [
            Finding(
                f"unknown virtual {virtual!r}" + (f"; did you mean {hint!r}?" if hint else ""),
                node.column,
            )
        ]
    if pkg.provides_virtual(virtual):
        return []
    return [
        Finding(
            f"{pkg.name!r} does not provide {virtual} "
            f"(providers in the recipe data: {', '.join(data.providers(virtual))})",
            node.column,
        )
    ]


def check_version(pkg: PackageInfo, version_list: str, column: int) -> list[Finding]:
    out: list[Finding] = []
    known = pkg.versions
    shown = ", ".join(known[:6]) + (", ..." if len(known) > 6 else "")
    for item in V.items(version_list):
        if any(V.satisfies(k, item) for k in known):
            continue
        lower = item.lstrip("=").split(":", 1)[0].split("=")[-1]
        top = V.newest(known)
        if pkg.all_versions_listed or (lower and top and V.version_key(lower) > V.version_key(top)):
            out.append(
                Finding(f"{pkg.name}@{item}: no such version in the recipe ({shown})", column)
            )
        else:
            out.append(
                Finding(
                    f"{pkg.name}@{item}: not among the {len(known)} newest versions the "
                    f"recipe data lists ({shown}); confirm with 'spack versions {pkg.name}'",
                    column,
                    note=True,
                )
            )
    return out


def check_variant(pkg: PackageInfo, var: Variant, data: RecipeData) -> list[Finding]:
    name = var.name
    if name in ARCH_KEYS or name in FLAG_KEYS or name in SPECIAL_KEYS:
        if var.boolean:
            return [Finding(f"{name} is not a boolean variant: write {name}=...", var.column)]
        return []
    info = pkg.variants.get(name)
    if info is None:
        if var.propagate and any(name in p.variants for p in data.packages.values()):
            return []  # propagated to the dependencies that have it
        return [Finding(_unknown_variant(pkg, name), var.column)]
    if info.boolean:
        if not var.boolean and var.value.lower() not in ("true", "false"):
            return [
                Finding(
                    f"variant {name!r} of {pkg.name} is boolean: write +{name} or ~{name}, "
                    f"not {name}={var.value}",
                    var.column,
                )
            ]
        return []
    if var.boolean:
        return [
            Finding(
                f"variant {name!r} of {pkg.name} takes a value ({_values_text(info)}), "
                f"not {'+' if var.value == 'true' else '~'}{name}",
                var.column,
            )
        ]
    return _check_values(pkg, var, info)


def _check_values(pkg: PackageInfo, var: Variant, info: VariantInfo) -> list[Finding]:
    if info.values is None:
        return []  # free-form (any string)
    values = var.value.split(",")
    value_col = var.column + len(var.name) + (2 if var.propagate else 1)
    if info.multi is False and len(values) > 1:
        return [
            Finding(
                f"variant {var.name!r} of {pkg.name} takes one value, not {var.value}", value_col
            )
        ]
    out = []
    offset = 0
    for value in values:
        if value not in info.values:
            hint = closest(value, info.values)
            out.append(
                Finding(
                    f"{var.name}={var.value}: {value!r} is not one of {_values_text(info)}"
                    + (f"; did you mean {hint!r}?" if hint else ""),
                    value_col + offset,
                )
            )
        offset += len(value) + 1
    return out


def _values_text(info: VariantInfo) -> str:
    return ", ".join(info.values) if info.values else "any string"


def _unknown_variant(pkg: PackageInfo, name: str) -> str:
    msg = f"package {pkg.name!r} has no variant {name!r}"
    hint = closest(name, list(pkg.variants))
    if hint is None:  # a value of a multi-valued variant written as a flag: +slurm
        as_values = {
            f"{vname}={value}": value
            for vname, info in pkg.variants.items()
            for value in info.values or ()
        }
        found = closest(name, list(as_values.values()))
        hint = next((k for k, v in as_values.items() if v == found), None) if found else None
    if hint:
        return f"{msg}; did you mean {hint!r}?"
    names = sorted(pkg.variants)
    return f"{msg} (its variants: {', '.join(names[:10])}{', ...' if len(names) > 10 else ''})"
