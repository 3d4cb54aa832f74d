"""Shared fixtures. ``local_slurm``: the environment (SLURM_CONF) of the project's one-node
Slurm cluster, from the session fixture ``slurm_cluster`` in tests/slurm_helpers.py."""

from __future__ import annotations

import pytest
from slurm_helpers import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)


@pytest.fixture(scope="session")
def local_slurm(slurm_cluster: SlurmCluster) -> dict[str, str]:  # noqa: F811
    return dict(slurm_cluster.env)
