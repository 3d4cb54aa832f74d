"""runner.capture: the short tools a plan runs (hwloc's lstopo), with a timeout."""

from __future__ import annotations

import time

import pytest

from topobind.errors import CannotRun, TopobindError
from topobind.runner import capture


def test_status_and_both_streams() -> None:
    assert capture(["sh", "-c", "echo out; echo err >&2; exit 3"], 30, "sh") == (
        3,
        "out\n",
        "err\n",
    )


def test_large_outputs_on_both_streams_do_not_stall() -> None:
    """More than a pipe holds (64 KiB) on stdout and stderr at once."""
    script = "head -c 300000 /dev/zero | tr '\\0' a >&2; head -c 300000 /dev/zero | tr '\\0' b"
    status, out, err = capture(["sh", "-c", script], 60, "sh")
    assert (status, len(out), len(err), set(out), set(err)) == (0, 300000, 300000, {"b"}, {"a"})


@pytest.mark.slow
def test_timeout_kills_the_tool() -> None:
    t0 = time.monotonic()
    with pytest.raises(TopobindError, match="sleep did not finish within 0.5 s"):
        capture(["sleep", "30"], 0.5, "sleep")
    assert time.monotonic() - t0 < 10


def test_missing_tool_is_cannot_run() -> None:
    with pytest.raises(CannotRun) as info:
        capture(["topobind-no-such-tool"], 5, "x")
    assert info.value.exit_status == 127
