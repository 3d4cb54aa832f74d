"""docs/reframe-ci.md's `cluster.py` runs one check at a time per partition (issue 30 item 5:
without max_jobs ReFrame's async policy ran every check at once and the figures meant
nothing) and the doc defines the $TOPOBIND its commands use."""

from __future__ import annotations

import sys

from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from reframe_ci_doc import DOC, cluster_py, reframe_commands  # noqa: E402


def test_documented_cluster_py_sets_max_jobs_1_on_every_partition() -> None:
    scope: dict = {}
    exec(compile(cluster_py(DOC.read_text()), "cluster.py", "exec"), scope)
    parts = [p for s in scope["site_configuration"]["systems"] for p in s["partitions"]]
    assert parts and all(p.get("max_jobs") == 1 for p in parts), parts


def test_doc_defines_topobind_before_using_it() -> None:
    text = DOC.read_text()
    first_use = text.index("$TOPOBIND/")
    assert "export TOPOBIND=" in text[:first_use]


def test_doc_runs_cluster_py_on_both_partitions() -> None:
    """The lines make bench-reframe-ci runs (scripts/bench-reframe-ci.py reads them here)."""
    lines = reframe_commands(DOC.read_text())
    assert any("--system mycluster:batch" in ln and ln.startswith("TOPOBIND_SITE=") for ln in lines)
    assert any("--system mycluster:cpu" in ln for ln in lines), lines
