"""A real injected cause on the local 3-node cluster (root; issue 45 item 5): node3's slurmd,
so every job it starts, in a cgroup of 25 % of one CPU (cgroup v1 ``cpu.cfs_quota_us`` or v2
``cpu.max``, scripts/fleet_faults.py; removed afterwards). Every run records its evidence in
ReFrame's report (``tb_evidence``); where the kernels write the ``evidence`` section with the
cgroup's ``throttled_share`` and ``quota_cpus`` (the evidence branch: the C side), node3 is
SLOW with ``cause: throttled (cgroup quota 0.25 CPUs ...`` in the table, the drain reason and
the metrics, and the other nodes have no such cause. Before that, the test checks what holds
already (every run's evidence is in the report, no node is called throttled) and skips the
rest with one line saying so.

A CPU hog as the *busy* cause is not injected here: the three nodes are namespaces of one
2-core machine, so a hog on "node2's CPUs" is on every node's CPUs; the busy signal is the
share of the run's CPUs others took, and it would name every node or none. The in-process
tests (test_causes_wiring.py, tests/measure/test_causes.py) cover it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND
from paths import REPO
from slurm_helpers import SlurmCluster, slurm_cluster3  # noqa: F401  (session fixture)

sys.path.insert(0, str(REPO / "scripts"))
import fleet_faults  # noqa: E402  (the faults and the site, shared with bench-acceptance)

# 16M elements: 384 MB a triad, so an iteration outlasts the 1 ms quota even in a big cache.
CHECK = fleet_faults.THROTTLED_STREAM

pytestmark = [pytest.mark.slow, pytest.mark.root]


def _cgroup_cpu_controller() -> str | None:
    """Why a CPU quota cannot be set here, or None."""
    v1, v2 = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cgroup.controllers")
    if v1.exists():
        return None
    if v2.exists() and "cpu" in v2.read_text().split():
        return None
    return "no cgroup v1 cpu hierarchy and no cpu controller in cgroup v2's root"


def _evidence(results: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in sorted((results / "reports").glob("each-node-*-node?.json")):
        for run in json.loads(path.read_text())["runs"]:
            for tc in run["testcases"]:
                out.setdefault(path.stem[-5:], []).append(tc.get("tb_evidence") or {})
    return out


def test_a_node_under_a_cpu_quota_is_named_throttled(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    why = _cgroup_cpu_controller()
    if why:
        pytest.skip(f"cannot put a slurmd under a CPU quota: {why}")
    c = slurm_cluster3
    sites = fleet_faults.fleet_sites(tmp_path)
    env = dict(c.env, TOPOBIND_SITES_DIR=str(sites))
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    prom = tmp_path / "m.prom"
    argv = [TOPOBIND, "validate", "--site", "fleet", "--partition", "slurm", "--each-node",
            *CHECK, "--repeat", "3", "--drain", "--metrics", str(prom),
            "--results", str(tmp_path / "results")]  # fmt: skip
    with fleet_faults.cpu_quota(c.state_dir, "node3", 25, tag="topobind-causes"):
        got = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    out = got.stdout
    assert got.returncode in (0, 1, 4), out + got.stderr
    evidence = _evidence(tmp_path / "results")
    assert set(evidence) == {"node1", "node2", "node3"}, evidence
    assert all(e.get("version") == 1 for runs in evidence.values() for e in runs), evidence
    for node in ("node1", "node2"):
        assert "throttled" not in "".join(ln for ln in out.splitlines() if ln.startswith(node))
    throttled = [ln for ln in prom.read_text().splitlines() if 'cause="throttled"' in ln]
    assert all('node="node3"' in ln for ln in throttled), throttled
    shares = [e.get("signals", {}).get("throttled_share", 0.0) for e in evidence["node3"]]
    assert all("throttled_share" in e.get("signals", {}) for e in evidence["node3"]), evidence
    if max(shares) == 0.0:
        pytest.skip("node3's slurmd was put under a cgroup CPU quota, but no run of it was "
                    "throttled: this machine's cgroups do not enforce cpu.max")  # fmt: skip
    row = next(i for i, ln in enumerate(out.splitlines()) if re.match(r"^node3\s", ln))
    lines = out.splitlines()
    assert "SLOW" in lines[row], out
    assert lines[row + 1].strip().startswith("cause: throttled (cgroup quota 0.25 CPUs"), out
    assert 'node="node3",cause="throttled"} 1' in prom.read_text()
    drain = next((ln for ln in lines if ln.startswith("scontrol update nodename=node3")), "")
    assert drain == "" or ": throttled (cgroup quota 0.25 CPUs" in drain  # a weak SLOW: none
