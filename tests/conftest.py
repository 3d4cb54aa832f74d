"""Shared fixtures. ``local_slurm``: the environment (SLURM_CONF) of the project's one-node
Slurm cluster, from the session fixture ``slurm_cluster`` in tests/slurm_helpers.py;
``topobind_cli``: runs the topobind command (tests/cli_helpers.py); ``built_kernels``: the C
kernels built once per session (tests/conftest_kernels.py); ``small_fleet``: a results
directory of 2 hosts x 2 STREAM runs (tests/fleetgen.py), shared read-only."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import Cli, run_topobind
from conftest_kernels import ensure_built
from fleetgen import FleetSpec, generate_fleet
from slurm_helpers import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)


@pytest.fixture(scope="session")
def local_slurm(slurm_cluster: SlurmCluster) -> dict[str, str]:  # noqa: F811
    return dict(slurm_cluster.env)


@pytest.fixture
def topobind_cli() -> Cli:
    """``topobind_cli("plan", "-l", "compact", cwd=..., env=..., timeout=...)``."""
    return run_topobind


@pytest.fixture(scope="session")
def built_kernels() -> None:
    """The C kernels (kernels/bin) and the rank step (rankstep/bin), built once per session; a
    no-op when up to date."""
    ensure_built()


@pytest.fixture(scope="session")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Results of 2 hosts x 2 STREAM runs; tests read it (copy it to change it)."""
    root = tmp_path_factory.mktemp("small-fleet")
    generate_fleet(root / "results", FleetSpec(hosts=2, runs=2, kernels=("stream",)))
    return root / "results"
