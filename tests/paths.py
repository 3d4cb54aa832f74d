"""The paths the tests read, in one place: the checkout (``REPO``), the test data
(``DATA``), the sample topologies of the repository (``TOPOLOGIES``: hwloc XMLs, ``gpu/``,
``synthetic.tsv``), the offline mirror of upstream archives (``SHARED``: Spack, Flux; see
``topobind.spack_driver.locations.mirror_dir``), the built kernels (``KERNELS_BIN``) and rank step
(``RANKSTEP_BIN``: rankexec, the hugepage shim, the SPANK plugin). Import by name:
``from paths import REPO, DATA``."""

from __future__ import annotations

from pathlib import Path

from topobind.spack_driver.locations import mirror_dir

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SHARED = mirror_dir()
TOPOLOGIES = REPO / "topologies"
KERNELS_BIN = REPO / "kernels" / "bin"
RANKSTEP_BIN = REPO / "rankstep" / "bin"
