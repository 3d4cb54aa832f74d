"""Shared fixtures. ``local_slurm``: the project's one-node Slurm cluster (see slurm_helpers)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
import slurm_helpers


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("the local Slurm cluster needs root (munged, slurmctld, slurmd)")
    if not shutil.which("slurmctld"):
        pytest.skip("slurm-wlm not installed (make setup)")
    started = not slurm_helpers.is_running()
    if started:
        slurm_helpers.start()
    yield slurm_helpers.slurm_env()
    if started:
        slurm_helpers.stop()
