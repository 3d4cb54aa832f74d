"""docs/reframe-ci.md's `cluster.py` runs one check at a time per partition (issue 30 item 5:
without max_jobs ReFrame's async policy ran every check at once and the figures meant
nothing) and the doc defines the $TOPOBIND its commands use."""

from __future__ import annotations

import re

from paths import REPO

DOC = REPO / "docs" / "reframe-ci.md"


def test_documented_cluster_py_sets_max_jobs_1_on_every_partition() -> None:
    text = DOC.read_text()
    (code,) = re.findall(r"```python\n(# A cluster's own ReFrame configuration.*?)```", text, re.S)
    scope: dict = {}
    exec(compile(code, "cluster.py", "exec"), scope)
    parts = [p for s in scope["site_configuration"]["systems"] for p in s["partitions"]]
    assert parts and all(p.get("max_jobs") == 1 for p in parts), parts


def test_doc_defines_topobind_before_using_it() -> None:
    text = DOC.read_text()
    first_use = text.index("$TOPOBIND/")
    assert "export TOPOBIND=" in text[:first_use]
