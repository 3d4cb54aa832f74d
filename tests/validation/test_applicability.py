"""A check that cannot apply to a node is skipped with its reason, never a FAIL, on every
site (issue 45 item 4): the node probes say "not applicable" with their own exit status, and
the 1 GiB page probe says whether the CPU can map 1 GiB pages. The whole path on the local
cluster (a site copied from local without node:): test_site_problems_slurm.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from paths import REPO


def _probe() -> Any:
    sys.path.insert(0, str(REPO / "reframe_tests" / "topobind_rfm"))
    try:
        import probe
    finally:
        sys.path.pop(0)
    return probe


@pytest.mark.parametrize(("flags", "got"), [
    ("fpu vme pse pdpe1gb rdtscp lm", True), ("fpu vme pse rdtscp lm", False),
])  # fmt: skip
def test_the_cpu_says_whether_it_maps_1g_pages(flags: str, got: bool, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n")
    assert _probe()._cpu_1g_pages(str(cpuinfo)) is got


def test_no_x86_flags_line_or_no_file_is_not_known(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    probe = _probe()
    assert probe._cpu_1g_pages(str(cpuinfo)) is None
    assert probe._cpu_1g_pages(str(tmp_path / "absent")) is None


def test_cross_l3_on_one_l3_domain_is_not_applicable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's own exit status and line: the check skips on them (tb_require_exit)."""
    from topobind.topo import topology

    probe = _probe()
    one = topology.load("synthetic:package:1 l3cache:1 core:4 pu:1")
    two = topology.load("synthetic:package:1 l3cache:2 core:2 pu:1")
    monkeypatch.setattr(topology, "load", lambda _src: one)
    assert probe._pick("cross-l3") == probe.NOT_APPLICABLE == 5
    err = capsys.readouterr().err.strip()
    assert err == "not applicable: the node has 1 L3 domain(s); cross-l3 needs two"
    monkeypatch.setattr(topology, "load", lambda _src: two)
    assert probe._pick("cross-l3") == 0
