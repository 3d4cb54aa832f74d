"""The paths the tests read, in one place: the checkout (``REPO``), the test data
(``DATA``), the shared folder beside the checkout (``SHARED``, or ``$TOPOBIND_SHARED``) and
its hwloc XMLs (``TOPOLOGIES``), the built kernels (``KERNELS_BIN``) and rank step
(``RANKSTEP_BIN``: rankexec, the hugepage shim, the SPANK plugin). Import by name:
``from paths import REPO, DATA``."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SHARED = Path(os.environ.get("TOPOBIND_SHARED", REPO.parent / "shared"))
TOPOLOGIES = SHARED / "topologies"
KERNELS_BIN = REPO / "kernels" / "bin"
RANKSTEP_BIN = REPO / "rankstep" / "bin"
