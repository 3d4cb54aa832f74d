"""slurmd runs topobind's health check (scripts/topobind-healthcheck) as HealthCheckProgram
(issue 30 item 6): on the local 3-node cluster a node whose conformance fails is drained by
slurmd itself with topobind's reason, and returns to service once fixed.

The nodes share this machine, so the fault is in what a node is compared with: a golden
directory with one <node>.xml per node, node2's describing 4 cores. Run under
``flock /tmp/tb-slurm.lock``: it starts (and stops) a cluster of its own state directory."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import REPO
from slurm_helpers import SlurmUnavailable, slurm_env, start, state_dir_of, stop, why_unavailable

pytestmark = pytest.mark.slow
TOPOBIND = Path(sys.executable).parent / "topobind"


def node_line(env: dict[str, str], node: str) -> str:
    out = subprocess.run(["scontrol", "show", "node", node, "-o"], capture_output=True,
                         text=True, env=env, timeout=30)  # fmt: skip
    return out.stdout


def wait_for(env: dict[str, str], node: str, drained: bool, timeout: float = 120) -> str:
    line = ""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = node_line(env, node)
        if bool(re.search(r"State=\S*DRAIN", line)) == drained:
            return line
        time.sleep(1)
    raise AssertionError(f"{node} not {'drained' if drained else 'resumed'} in {timeout} s: {line}")


def test_slurmd_drains_a_nonconforming_node_and_resumes_it_when_fixed(tmp_path: Path) -> None:
    why = why_unavailable()
    if why:
        pytest.skip(why)
    state = state_dir_of().with_name("local-slurm-health")
    state.mkdir(parents=True, exist_ok=True)
    golden = tmp_path / "golden"
    golden.mkdir()
    good = subprocess.run(["lstopo-no-graphics", "--of", "xml"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    synthetic = "pack:1 l3:1 core:4 pu:1"  # this machine's node, but 4 cores
    bad = subprocess.run(["lstopo-no-graphics", "-i", synthetic, "--of", "xml", "-"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    for n in (1, 2, 3):
        (golden / f"node{n}.xml").write_text(bad if n == 2 else good)
    (state / "healthcheck.conf").write_text(
        f"TOPOBIND={TOPOBIND}\nTOPOBIND_SITE=local\nTOPOBIND_SITES_DIR={REPO / 'site_configs'}\n"
        f"TOPOBIND_GOLDEN={golden}\n"
        "TOPOBIND_HEALTHCHECK_TIMEOUT=30\n"  # this test machine may be busy; 5 s by default
    )
    env = {"TOPOBIND_SLURM_HEALTHCHECK": "1", "TOPOBIND_SLURM_HEALTHCHECK_INTERVAL": "5",
           "TOPOBIND_SLURMD_TIMEOUT": "60"}  # fmt: skip
    try:
        start(state, nodes=3, env=env)
    except SlurmUnavailable as exc:
        pytest.fail(str(exc))
    senv = slurm_env(state)
    try:
        line = wait_for(senv, "node2", drained=True)
        assert "Reason=topobind: cores: expected 4, found 2" in line, line
        assert not re.search(r"State=\S*DRAIN", node_line(senv, "node1"))
        shutil.copy(golden / "node1.xml", golden / "node2.xml")  # the node is fixed
        line = wait_for(senv, "node2", drained=False)
        assert "Reason=topobind" not in line
        # a drain by someone else is never undone by the health check
        subprocess.run(["scontrol", "update", "nodename=node3", "state=drain",
                        "reason=admin: new DIMM"], env=senv, check=True)  # fmt: skip
        time.sleep(12)
        assert "Reason=admin: new DIMM" in node_line(senv, "node3")
    finally:
        stop(state)
        os.environ.pop("TOPOBIND_SLURM_HEALTHCHECK", None)
