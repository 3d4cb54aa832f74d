"""What Spack's recipes say: packages, versions, variants, provided virtuals.

Spack cannot run here. ``$TOPOBIND_SHARED/spack/recipes.json`` holds those facts, read from
the builtin repository (spack/spack-packages) at a named commit, for the packages of
topobind's stack; topobind's own recipe adds itself (read with ``ast`` by
:mod:`topobind.spackcheck.recipe`). The data lists at most the 12 newest versions of a
package, so an older version that is not listed cannot be called wrong, only unconfirmed.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError
from topobind.spackcheck.locations import shared_dir

#: Names Spack knows that the recipe data does not cover, accepted without further checks:
#: Spack 1.x's language virtuals and the build tools a recipe depends on.
OUTSIDE_DATA = frozenset(
    {"c", "cxx", "fortran", "gmake", "pkgconfig", "py-pip", "py-setuptools", "py-wheel"}
)
#: The most versions recipes.json lists for one package.
VERSION_LIMIT = 12


@dataclass(frozen=True)
class VariantInfo:
    name: str
    default: Any
    values: tuple[str, ...] | None  # None: not a fixed set
    multi: bool | None  # None: the data does not say

    @property
    def boolean(self) -> bool:
        """True/False default, or a platform expression (``sys.platform != 'darwin'``)."""
        if self.values is not None:
            return False
        d = self.default
        return isinstance(d, bool) or (isinstance(d, str) and "sys.platform" in d)


@dataclass(frozen=True)
class PackageInfo:
    name: str
    versions: tuple[str, ...]
    variants: dict[str, VariantInfo]
    provides: tuple[str, ...]  # "mpi@:3.1", "blas", ...
    source: str  # where the facts come from

    @property
    def all_versions_listed(self) -> bool:
        return len(self.versions) < VERSION_LIMIT

    def provides_virtual(self, virtual: str) -> bool:
        return any(p.split("@")[0] == virtual for p in self.provides)


@dataclass
class RecipeData:
    packages: dict[str, PackageInfo]
    commit: str = ""
    virtuals: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_json(cls, doc: dict[str, Any], source: str) -> RecipeData:
        pkgs: dict[str, PackageInfo] = {}
        for name, p in doc["packages"].items():
            variants = {}
            for vname, v in p.get("variants", {}).items():
                values = v.get("values")
                variants[vname] = VariantInfo(
                    vname,
                    v.get("default"),
                    tuple(values) if isinstance(values, list) else None,
                    v.get("multi"),
                )
            pkgs[name] = PackageInfo(
                name, tuple(p.get("versions", [])), variants, tuple(p.get("provides", [])), source
            )
        virtuals = frozenset(v.split("@")[0] for p in pkgs.values() for v in p.provides)
        return cls(pkgs, str(doc.get("commit", "")), virtuals)

    @classmethod
    def load(cls, path: Path | None = None) -> RecipeData:
        path = path or shared_dir() / "spack" / "recipes.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TopobindError(
                f"cannot read Spack's recipe data {path}: {exc}; set TOPOBIND_SHARED to the "
                "directory holding spack/recipes.json"
            ) from exc
        return cls.from_json(doc, str(path))

    def add(self, info: PackageInfo) -> None:
        self.packages[info.name] = info

    def providers(self, virtual: str) -> list[str]:
        return sorted(n for n, p in self.packages.items() if p.provides_virtual(virtual))


def closest(word: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None
