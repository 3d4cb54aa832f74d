"""Where things are: the project's Spack files and the shared Spack archives."""

from __future__ import annotations

import os
from pathlib import Path

#: The project's top directory (``src/topobind/spack/`` is three levels below it).
REPO = Path(__file__).resolve().parents[3]
SPACK_YAML = REPO / "spack.yaml"
RECIPE_REPO = REPO / "spack" / "spack_repo" / "topobind"
RECIPE = RECIPE_REPO / "packages" / "topobind" / "package.py"
SITES = REPO / "site_configs"
OVERLAY_NAME = "spack-packages.yaml"


def shared_dir() -> Path:
    """``$TOPOBIND_SHARED``, else ``<repo>/../shared``."""
    return Path(os.environ.get("TOPOBIND_SHARED") or REPO.parent / "shared")
