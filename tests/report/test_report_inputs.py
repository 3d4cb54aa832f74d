"""`topobind report` on bad input (issue 11 item 5): numbers, files, special files.

Every case ends fast with exit status 2, one line on stderr naming the input and the fix, and
no report directory; a FIFO or a device in the results is never opened blocking.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_topobind

from topobind.errors import TopobindError
from topobind.report.analysis import MAX_SLOW_LIMIT, Options
from topobind.report.reader import MAX_FILE_BYTES, read_results


def topobind(*args: str) -> subprocess.CompletedProcess[str]:
    # the timeout is the hang detector: a report of two hosts takes seconds
    return run_topobind(*args, timeout=120)


def refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--slow-pct", "nan"),
        ("--slow-pct", "inf"),
        ("--slow-pct", "1e999"),
        ("--slow-pct", "-1"),
        ("--slow-pct", "5000"),
        ("--slow-mads", "nan"),
        ("--slow-mads", "-inf"),
        ("--slow-mads", "1e308"),
        ("--warmup", "-1"),
        ("--warmup", "9" * 40),
    ],
)
def test_numbers_out_of_range_are_refused(
    small_fleet: Path, tmp_path: Path, option: str, value: str
) -> None:
    out = tmp_path / "report"
    line = refused(
        topobind("report", str(small_fleet), "-o", str(out), f"{option}={value}"), option
    )
    assert "default" in line  # says what to give instead
    assert not out.exists()


def test_numbers_at_the_limits_are_accepted() -> None:
    Options(warmup=0, slow_mads=0.0, slow_pct=0.0)
    Options(slow_mads=MAX_SLOW_LIMIT, slow_pct=MAX_SLOW_LIMIT)
    for bad in (float("nan"), float("inf"), -0.5, MAX_SLOW_LIMIT * 2):
        with pytest.raises(TopobindError, match="--slow-pct"):
            Options(slow_pct=bad)


def _copy(small_fleet: Path, tmp_path: Path) -> Path:
    res = tmp_path / "results"
    shutil.copytree(small_fleet, res)
    return res


@pytest.mark.slow
def test_fifo_named_json_in_results_is_refused_without_hanging(
    small_fleet: Path, tmp_path: Path
) -> None:
    res = _copy(small_fleet, tmp_path)
    fifo = res / "gen-node0001" / "stuck.json"
    os.mkfifo(fifo)  # nobody ever writes to it: opening it blocking would hang forever
    out = tmp_path / "report"
    refused(topobind("report", str(res), "-o", str(out)), str(fifo), "FIFO", "remove it")
    assert not out.exists()
    # given by name too
    refused(topobind("report", str(fifo), "-o", str(out)), str(fifo))
    assert not out.exists()


@pytest.mark.slow
def test_device_and_socket_named_json_are_refused(small_fleet: Path, tmp_path: Path) -> None:
    res = _copy(small_fleet, tmp_path)
    zero = res / "gen-node0002" / "zero.json"
    zero.symlink_to("/dev/zero")  # endless: reading it whole would never end
    out = tmp_path / "report"
    refused(topobind("report", str(res), "-o", str(out)), str(zero), "character device")
    zero.unlink()
    sock_path = res / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        refused(topobind("report", str(res), "-o", str(out)), str(sock_path), "socket")
    assert not out.exists()


@pytest.mark.slow
def test_huge_file_is_refused_before_it_is_read(small_fleet: Path, tmp_path: Path) -> None:
    res = _copy(small_fleet, tmp_path)
    huge = res / "gen-node0001" / "huge.json"
    with open(huge, "wb") as fh:  # sparse: costs no disk, would cost the memory to read
        fh.truncate(MAX_FILE_BYTES + 1)
    out = tmp_path / "report"
    refused(topobind("report", str(res), "-o", str(out)), str(huge), "larger than")
    assert not out.exists()
    with pytest.raises(TopobindError, match="huge.json"):
        read_results([res])


@pytest.mark.slow
def test_unreadable_and_missing_files_are_named(small_fleet: Path, tmp_path: Path) -> None:
    res = _copy(small_fleet, tmp_path)
    out = tmp_path / "report"
    refused(topobind("report", str(res / "nope.json"), "-o", str(out)), "nope.json")
    dangling = res / "gen-node0001" / "gone.json"
    dangling.symlink_to(tmp_path / "does-not-exist.json")
    refused(topobind("report", str(res), "-o", str(out)), "gone.json", "cannot read")
    assert not out.exists()


@pytest.mark.slow
def test_the_kernels_loader_refuses_a_fifo_too(tmp_path: Path) -> None:
    """topobind.measure.results reads every result file, for the checks as for the report."""
    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom topobind.errors import TopobindError\n"
        "from topobind.measure.results import load_result\n"
        "try:\n    load_result(sys.argv[1])\nexcept TopobindError as e:\n    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "FIFO" in proc.stdout and str(fifo) in proc.stdout
