"""The bounded quick tier (issue 30 item 1): the checks size STREAM's arrays by the rule (each
at least 4x the LLC) but cap the bytes moved per run, with a note when the cap wins; the
latency check's largest working set likewise. The LLC the checks see is faked with
$TOPOBIND_LLC_BYTES (a 260 MiB LLC as on the host of the issue)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

PROBE = REPO / "reframe_tests" / "topobind_rfm" / "probe.py"
MiB = 1 << 20


def probe(tmp_path: Path, *args: str, llc: str = "260M") -> tuple[str, dict]:
    env = {**os.environ, "TOPOBIND_LLC_BYTES": llc}
    done = subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, cwd=tmp_path,
        env=env, timeout=60, check=True,
    )  # fmt: skip
    name = "stream-size.json" if args[0] == "stream-size" else "latency-size.json"
    return done.stdout.strip(), json.loads((tmp_path / name).read_text())


def test_stream_keeps_the_rule_when_the_cap_allows_it(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "stream-size", "3", "40G")
    rule = 4 * 260 * MiB // 8  # 136,314,880 elements: 1.09 GB an array
    assert int(out) == rule == doc["elements"] == doc["rule_elements"]
    assert doc["llc_bytes"] == 260 * MiB and not doc["capped"] and doc["note"] == ""
    assert doc["bytes_per_run"] == 3 * 80 * rule


def test_stream_cap_sets_a_smaller_size_and_says_so(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "stream-size", "3", "4G")
    assert int(out) == (4 << 30) // (3 * 80) and doc["capped"]
    assert doc["bytes_per_run"] <= 4 << 30
    assert "under the rule (each array at least 4x the LLC)" in doc["note"]
    assert "LLC 260 MiB" in doc["note"] and "max_bytes_per_run" in doc["note"]


def test_stream_cap_applies_to_the_sites_own_size(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "stream-size", "2", "8G", "1G")  # Betzy: 1e9 elements
    assert doc["rule_elements"] == 10**9 and int(out) < 10**9 and "site's size" in doc["note"]


def test_latency_working_set_is_4x_llc_capped(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "latency-size", "2G")
    assert out == "1040M" and not doc["capped"]
    out, doc = probe(tmp_path, "latency-size", "512M")
    assert out == "512M" and doc["capped"] and "partly cache" in doc["note"]
    out, _ = probe(tmp_path, "latency-size", "2G", llc="8M")
    assert out == "256M"  # the floor


def test_bad_cap_is_one_line_and_status_3(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(PROBE), "stream-size", "3", "lots"], capture_output=True,
        text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1
    assert "max_bytes_per_run" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "quick"),
    [
        (["reframe", "-t", "quick", "-r"], True),
        (["reframe", "--tag=quick"], True),
        (["reframe", "-tquick|binding"], True),
        (["reframe", "-t", "full", "-r"], False),
        (["reframe", "-n", "quickly"], False),
    ],
)
def test_quick_tier_is_read_from_reframes_tag_option(argv: list[str], quick: bool) -> None:
    sys.path.insert(0, str(PROBE.parent))
    from probe import quick_tier  # the checks' copy: topobind_rfm imports it from probe

    assert quick_tier(argv) is quick
