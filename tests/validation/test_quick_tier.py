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
    assert out == f"{rule} 3" and rule == doc["elements"] == doc["rule_elements"]
    assert doc["llc_bytes"] == 260 * MiB and not doc["capped"] and doc["note"] == ""
    assert doc["bytes_per_run"] == 3 * 80 * rule and doc["trials"] == 3


def test_stream_cap_sets_a_smaller_size_and_says_so(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "stream-size", "3", "4G", "", "20")
    assert out == f"{(4 << 30) // (3 * 80)} 3" and doc["capped"] and doc["trials"] == 3
    assert doc["bytes_per_run"] <= 4 << 30
    assert "under the rule (each array at least 4x the LLC)" in doc["note"]
    assert "LLC 260 MiB" in doc["note"] and "max_bytes_per_run" in doc["note"]


@pytest.mark.parametrize(
    ("llc", "cap", "trials"),
    [
        ("32M", "16G", 12),  # this VM: 1.34 GB a trial at the rule's size
        ("32M", "4G", 3),  # the per-node acceptance's cap: the least
        ("8M", "16G", 20),  # the rule's floor (10M elements, 0.8 GB a trial): the most
        ("32M", "1T", 20),
    ],
)
def test_stream_spends_the_cap_on_trials_at_the_rules_size(
    tmp_path: Path, llc: str, cap: str, trials: int
) -> None:
    out, doc = probe(tmp_path, "stream-size", "3", cap, "", "20", llc=llc)
    rule = max(4 * int(llc[:-1]) * MiB // 8, 10_000_000)
    assert out == f"{rule} {trials}" and doc["trials"] == trials and not doc["capped"]
    assert doc["bytes_per_run"] == trials * 80 * rule <= {"16G": 16, "4G": 4, "1T": 1024}[cap] << 30


def test_stream_cap_applies_to_the_sites_own_size(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "stream-size", "2", "8G", "1G")  # Betzy: 1e9 elements
    assert doc["rule_elements"] == 10**9 and int(out.split()[0]) < 10**9
    assert "site's size" in doc["note"] and out.split()[1] == "2"


def test_latency_working_set_is_4x_llc_capped(tmp_path: Path) -> None:
    out, doc = probe(tmp_path, "latency-size", "2G")
    assert out == "1040M" and not doc["capped"]
    out, doc = probe(tmp_path, "latency-size", "512M")
    assert out == "512M" and doc["capped"] and "partly cache" in doc["note"]
    out, _ = probe(tmp_path, "latency-size", "2G", llc="8M")
    assert out == "256M"  # the floor


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["3", "lots"], "max_bytes_per_run"),
        (["three", "4G"], "quick_trials"),
        (["3", "4G", "", "0"], "trials"),
        (["3", "4G", "", "1e9"], "trials"),
        (["3", "\u0664G"], "max_bytes_per_run"),  # an Arabic-Indic 4: float() reads it
        (["3", "4G", "1e400"], "elements"),  # infinite: was an OverflowError traceback
        (["3", "4G", "\u0662\u0660M"], "elements"),
    ],
)
def test_bad_argument_is_one_line_and_status_3(tmp_path: Path, args: list, names: str) -> None:
    done = subprocess.run(
        [sys.executable, str(PROBE), "stream-size", *args], capture_output=True,
        text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1
    assert names in done.stderr and "Traceback" not in done.stderr


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


@pytest.mark.slow
def test_stream_gets_the_two_trials_the_kernel_needs_at_least(tmp_path: Path) -> None:
    """stream refuses fewer than 2 trials: one trial of 1 MiB arrays under a 16M cap (the
    smoke tier's first size) was 'trials 1', and every STREAM job failed its sanity."""
    out, doc = probe(tmp_path, "stream-size", "1", "16M", "131072", "2")
    assert doc["trials"] == 2 and out.split()[1] == "2"
    assert doc["bytes_per_run"] <= 16 << 20
