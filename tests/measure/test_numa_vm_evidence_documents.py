"""The guest's real result documents of a memory-off-node run (tests/data/numa_vm/evidence/,
its README.md says how they were made): what the cause engine's tests read without booting
the 4-NUMA guest. They must stay documents the evidence reader takes, with the signals that
tell local from remote memory."""

from __future__ import annotations

import json

import pytest
from paths import REPO

from topobind.measure.evidence import evidence_of

EVIDENCE = REPO / "tests" / "data" / "numa_vm" / "evidence"


def _evidence(name: str):  # type: ignore[no-untyped-def]
    doc = json.loads((EVIDENCE / name).read_text())
    assert doc["schema"] == "topobind.result/1" and doc["host"] == "virtme-ng"
    ev = evidence_of(doc)
    assert ev is not None, name
    return ev


@pytest.mark.parametrize("name", ["membind-local-1.json", "membind-local-2.json"])
def test_local_runs_have_no_remote_pages(name: str) -> None:
    ev = _evidence(name)
    assert ev.cpus == (0, 1)  # numactl --cpunodebind=0: node 0's vCPUs
    assert ev.signal("remote_page_share") is not None and ev.signal("remote_page_share") < 0.05
    assert ev.signal("numa_other_node") == 0


def test_the_remote_run_has_its_pages_off_node_and_other_node_moved() -> None:
    ev = _evidence("membind-remote.json")
    assert ev.cpus == (0, 1)
    assert (ev.signal("remote_page_share") or 0) > 0.9
    assert (ev.signal("numa_other_node") or 0) > 10  # 12 THPs of arrays at least, off node 0
    assert ev.signal("numa_miss") == 0  # a bind policy's pages are no miss: see the README


def test_the_readme_names_every_document() -> None:
    readme = (EVIDENCE / "README.md").read_text()
    for f in EVIDENCE.glob("*.json"):
        assert f.name in readme, f.name
