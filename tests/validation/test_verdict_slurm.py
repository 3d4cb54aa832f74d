"""The verdict's evidence rules on the real local 3-node Slurm cluster and real ReFrame
(issue 37 items 7, 8, 20, 24): too few runs is NOT JUDGED (exit 4), a conformance failure
stays with the run when its report is judged again, a size probe that fails stops its job
with its own line, and the failure says which node."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND
from paths import REPO
from slurm_helpers import SlurmCluster, slurm_cluster3  # noqa: F401  (session fixture)

sys.path.insert(0, str(REPO / "scripts"))
import fleet_faults  # noqa: E402

CHECK = ["-n", "StreamCheck%layout=every-other-core", "-S", "StreamCheck.elements=4M",
         "-S", "StreamCheck.trials=10"]  # fmt: skip

pytestmark = [pytest.mark.slow, pytest.mark.root]


def _validate(cluster: SlurmCluster, sites: Path, tmp: Path,
              *args: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = dict(cluster.env, TOPOBIND_SITES_DIR=str(sites))
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    argv = [TOPOBIND, "validate", "--site", "fleet", "--partition", "slurm", "--each-node",
            "--results", str(tmp / "results"), *args]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)


def _row(out: str, node: str) -> str:
    rows = [ln for ln in out.splitlines() if re.match(rf"^{node}\s", ln)]
    assert rows, out
    return rows[-1]


def test_two_runs_are_not_judged_and_a_rejudge_keeps_the_conformance_failure(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    c = slurm_cluster3
    sites = fleet_faults.fleet_sites(tmp_path, "node2: {hugepages_2m_per_numa: 100000}")
    got = _validate(c, sites, tmp_path, *CHECK, "--repeat", "2")
    out = got.stdout
    assert got.returncode == 1, out + got.stderr  # node2 is bad: its conformance
    assert "FAIL" in _row(out, "node2") and "hugepages_2m_per_numa" in _row(out, "node2")
    for node in ("node1", "node3"):
        assert "NOT JUDGED" in _row(out, node), out
    assert "NOT JUDGED: 2 run(s); a SLOW verdict needs at least 3" in out
    assert out.strip().splitlines()[-1] == "bad nodes: node2; NOT JUDGED: node[1,3]", out
    line = re.search(r"^reports: (.+)$", out, re.M)
    assert line, out
    reports = line.group(1).split(", ")  # one a node (one job a node), all named up to 4
    assert len(reports) == 3, out
    for report in reports:  # each node's conformance beside its report
        assert Path(report.removesuffix(".json") + ".conformance.json").is_file(), report
    # judged again from the reports: node2's conformance failure is still there (was 'ok')
    again = _validate(c, sites, tmp_path, "--reports", *reports, "--drain")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "hugepages_2m_per_numa" in _row(again.stdout, "node2")
    assert again.stdout.strip().splitlines()[-1] == "bad nodes: node2; NOT JUDGED: node[1,3]"


def test_a_size_probe_that_fails_stops_the_job_and_the_failure_names_the_node(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A byte cap of 2K made the size probe print '0 3' and STREAM fail every run with
    'exited with status 2', on a node ReFrame's summary called 'None'. The cap is the site's
    setting, so the same failure on every node is one site problem (issue 45: exit 5, nothing
    drained, each node NOT JUDGED), its line naming a node and the probe's own reason."""
    c = slurm_cluster3
    sites = fleet_faults.fleet_sites(tmp_path)
    got = _validate(c, sites, tmp_path, "-n", "StreamCheck%layout=compact", "--repeat", "1",
                    "-S", "StreamCheck.max_bytes_per_run=2K")  # fmt: skip
    out = got.stdout
    assert got.returncode == 5, out + got.stderr
    for node in ("node1", "node2", "node3"):
        assert "NOT JUDGED" in _row(out, node) and "site problem" in _row(out, node)
    [line] = [ln for ln in out.splitlines() if ln.startswith("site problem: StreamCheck")]
    assert "on 3 of 3 judged nodes (node[1-3])" in line, line
    assert "command exited with status 3 on node" in line, line
    assert "the cap of 2048 bytes moved per run is under the least" in line, line
    assert "status 2" not in out
