"""``topobind spack check``: run every check on the project's Spack files (or given files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from topobind.errors import TopobindError
from topobind.spackcheck import envfile, recipe
from topobind.spackcheck.locations import OVERLAY_NAME, RECIPE, SITES, SPACK_YAML, shared_dir
from topobind.spackcheck.problems import Problem
from topobind.spackcheck.recipedata import RecipeData


def load_schema(path: Path | None = None) -> dict[str, Any]:
    path = path or shared_dir() / "spack" / "spack-env.schema.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TopobindError(
            f"cannot read Spack's environment schema {path}: {exc}; set TOPOBIND_SHARED to the "
            "directory holding spack/spack-env.schema.json"
        ) from exc


def default_files() -> list[Path]:
    """spack.yaml, every site overlay, topobind's recipe."""
    return [SPACK_YAML, *sorted(SITES.glob(f"*/{OVERLAY_NAME}")), RECIPE]


def kind(path: Path) -> str:
    """The kind of file: ``recipe`` (``*.py``), ``env`` (YAML under ``spack:``) or
    ``overlay`` (other YAML: a configuration file that an environment includes)."""
    if path.suffix == ".py":
        return "recipe"
    if path.name == "spack.yaml":
        return "env"
    try:
        top = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return "overlay"  # its check reports why it cannot be read
    return "env" if isinstance(top, dict) and "spack" in top else "overlay"


def check_files(files: list[Path] | None = None) -> list[Problem]:
    """Problems of ``files`` (default: :func:`default_files`), errors and notes."""
    base = RecipeData.load()
    schema = load_schema()
    data = recipe.with_recipe(base, RECIPE)
    problems: list[Problem] = []
    for path in files or default_files():
        if not path.exists():
            problems.append(Problem(str(path), "no such file"))
            continue
        try:
            if kind(path) == "recipe":
                problems += recipe.check_recipe(path, base)
            elif kind(path) == "env":
                problems += envfile.check_env(path, data, schema)
            else:
                problems += envfile.check_overlay(path, data, schema)
        except TopobindError as exc:  # unreadable / not YAML: one line, keep checking
            problems.append(Problem(str(path), str(exc).split(": ", 1)[-1]))
    return problems
