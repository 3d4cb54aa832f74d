"""Where things are: the project's Spack files and the offline mirror of upstream archives."""

from __future__ import annotations

import os
from pathlib import Path

#: The project's top directory (``src/topobind/spack_driver/`` is three levels below it).
REPO = Path(__file__).resolve().parents[3]
SPACK_YAML = REPO / "spack.yaml"
RECIPE_REPO = REPO / "spack" / "spack_repo" / "topobind"
RECIPE = RECIPE_REPO / "packages" / "topobind" / "package.py"
SITES = REPO / "site_configs"
OVERLAY_NAME = "spack-packages.yaml"


#: Where the upstream archives come from (named in the skip and error lines without a mirror).
ARCHIVES_UPSTREAM = (
    "spack/real/ holds spack-v1.1.0.tar.gz (github.com/spack/spack, tag v1.1.0), "
    "spack-packages-v2026.06.0.tar.gz (github.com/spack/spack-packages, tag v2026.06.0) and "
    "compiler-wrapper-1.1.0.tar.gz (Spack's compiler-wrapper package source, tag v1.1.0)"
)


def mirror_dir() -> Path:
    """The offline mirror of upstream archives (Spack, Flux): ``$TOPOBIND_OFFLINE_MIRROR``,
    else ``$TOPOBIND_SHARED``, else ``<repo>/../shared``. Only archives live there: every file
    the tests and the docs read is in the repository. A relative value is resolved here, against
    the directory topobind starts in (ignoring it would skip the Spack checks); Spack, which runs
    in its own directories, is given the absolute path."""
    env = os.environ.get("TOPOBIND_OFFLINE_MIRROR") or os.environ.get("TOPOBIND_SHARED")
    return Path(os.path.abspath(env)) if env else REPO.parent / "shared"
