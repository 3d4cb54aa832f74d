"""`topobind report` on real results: the STREAM kernel run a few times on this machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from cli_helpers import Cli
from paths import KERNELS_BIN

STREAM = KERNELS_BIN / "stream"


@pytest.mark.slow
@pytest.mark.skipif(not STREAM.exists(), reason="kernels/bin/stream not built (make kernels)")
def test_report_on_real_stream_runs(tmp_path: Path, topobind_cli: Cli) -> None:
    results = tmp_path / "results"
    results.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="2")
    for i in range(4):
        out = results / f"stream-{i}.json"
        proc = subprocess.run(
            # 4 KiB pages: always what was asked for, so the four runs are one group however
            # many huge pages other jobs hold at the moment
            [
                str(STREAM),
                "--elements",
                "5000000",
                "--trials",
                "5",
                "--pages",
                "4k",
                "--json",
                str(out),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
    docs = [json.loads(p.read_text()) for p in sorted(results.glob("*.json"))]
    report = tmp_path / "report"
    proc = topobind_cli("report", str(results), "-o", str(report), "--warmup", "1", timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((report / "report.json").read_text())
    assert doc["inputs"]["files"] == 4 and doc["inputs"]["generated"] == 0
    assert "GENERATED" not in (report / "index.html").read_text()
    (group,) = doc["groups"]
    assert group["kernel"] == "stream" and group["unit"] == "MB/s" and group["higher_is_better"]
    assert group["page_kib"] == docs[0]["pages"]["kib"]
    (host,) = group["per_host"]
    assert host["host"] == docs[0]["host"] == socket.gethostname()
    # the first run by timestamp is the warm-up; the rest are the headline values, in order
    ordered = sorted(docs, key=lambda d: d["timestamp"])
    assert host["runs"] == 3 and len(host["warmup"]) == 1
    assert sorted(host["values"] + [host["warmup"][0]["value"]]) == sorted(
        d["headline"]["value"] for d in docs
    )
    assert host["warmup"][0]["timestamp"] == ordered[0]["timestamp"]
    assert host["best"] == max(host["values"]) and host["worst"] == min(host["values"])
    assert doc["slow_found"] is False  # one host is its own fleet
    # the pictures of the group (their names carry the page size, and a fallback when the
    # kernel did not get the pages it asked for)
    hosts_png = [p for p in group["pictures"] if p.startswith("hosts-stream-nolayout-")]
    assert len(hosts_png) == 1 and (report / hosts_png[0]).exists()
    assert group["pages"] == "4 KiB" and group["page_fallback"] is None
