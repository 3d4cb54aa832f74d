"""Issue 45 item 4 on the real local 3-node cluster (root; tests/slurm_helpers.py): the
checks' programs missing on every node drain nothing and print one site-problem line naming
the missing programs (exit 5); a site copied from ``local`` under another name, without a
``node:`` section, fails no node on C2CCheck cross-l3 on this machine of one L3 domain (it
is skipped with its reason). In-process tests of the rule: test_site_problems.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND
from paths import REPO
from slurm_helpers import SlurmCluster, slurm_cluster3  # noqa: F401  (session fixture)

pytestmark = [pytest.mark.slow, pytest.mark.root]

SMOKE = ["--each-node", "--tags", "smoke", "--repeat", "1", "--drain"]


def _copied_site(tmp: Path) -> Path:
    """Site ``copied``: site_configs/local/site.yaml under another name, no references, no
    ``node:`` section (local has none)."""
    text = (REPO / "site_configs" / "local" / "site.yaml").read_text()
    assert "\nnode:" not in text
    text = text.replace("name: local", "name: copied").replace("references: references.yaml", "")
    d = tmp / "sites" / "copied"
    d.mkdir(parents=True)
    (d / "site.yaml").write_text(text)
    return d.parent


def _validate(cluster: SlurmCluster, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(cluster.env, TOPOBIND_SITES_DIR=str(_copied_site(tmp)), **env)
    full["PATH"] = f"{Path(sys.executable).parent}:{full.get('PATH', '')}"
    argv = [TOPOBIND, "validate", "--site", "copied", "--partition", "slurm",
            "--results", str(tmp / "results"), *SMOKE]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=full, timeout=900)


def _one_l3_domain() -> bool:
    from topobind.topo.topology import load

    return len({c.l3 for c in load("live").cores if c.l3 is not None}) == 1


def test_programs_missing_on_every_node_drain_nothing_and_exit_5(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    empty = tmp_path / "no-kernels"
    empty.mkdir()
    got = _validate(slurm_cluster3, tmp_path, TOPOBIND_KERNELS_DIR=str(empty))
    out = got.stdout
    assert got.returncode == 5, out + got.stderr
    assert "scontrol update" not in out and "not drained" in out
    site = [ln for ln in out.splitlines() if ln.startswith("site problem")]
    assert len(site) == 1, out
    assert site[0].startswith("site problem on 3 of 3 judged nodes (node[1-3]): the checks' "
                              "programs are not built")  # fmt: skip
    assert f"{empty}/stream (StreamCheck compact)" in site[0]
    assert out.strip().splitlines()[-1].startswith("bad nodes: none; site problem (drains "
                                                   "nothing): ")  # fmt: skip
    for node in ("node1", "node2", "node3"):
        row = next(ln for ln in out.splitlines() if re.match(rf"^{node}\s", ln))
        assert row.split()[1:3] == ["NOT", "JUDGED"], row


def test_a_copied_site_without_node_skips_cross_l3_on_one_l3_domain(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    if not _one_l3_domain():
        pytest.skip("this machine has several L3 domains: cross-l3 applies here")
    got = _validate(slurm_cluster3, tmp_path)
    out = got.stdout
    assert got.returncode == 0, out + got.stderr
    assert "skip C2CCheck: not applicable: the node has 1 L3 domain(s); cross-l3 needs two" in out
    assert "FAIL" not in out and "site problem" not in out
    assert out.strip().splitlines()[-1] == "bad nodes: none", out
