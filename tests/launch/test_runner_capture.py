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


def test_any_byte_on_a_launched_programs_output_is_read() -> None:
    """run_process: a byte that is not UTF-8 (a launcher's banner, a bus id with 0xff, a
    user's UCX_NET_DEVICES) is read as U+FFFD, never a UnicodeDecodeError."""
    from topobind.runner import run_process

    done = run_process(["sh", "-c", r"printf 'a\377b\n'; printf '\376\n' >&2"],
                       capture=True, capture_stderr=True, timeout=30)  # fmt: skip
    assert (done.stdout, done.stderr) == ("a\ufffdb\n", "\ufffd\n")
    assert capture(["sh", "-c", r"printf '\377'"], 30, "sh")[1] == "\ufffd"


@pytest.mark.slow
def test_verify_reads_a_launch_that_prints_any_byte(tmp_path: object) -> None:
    """topobind verify under a launch command whose banner holds 0xff: a verdict, no
    traceback (the probe's output is decoded with replacement)."""
    import subprocess

    from cli_helpers import TOPOBIND

    launch = ["sh", "-c", r'printf "\377 launcher banner\n"; exec "$@"', "sh"]
    out = subprocess.run([TOPOBIND, "verify", "-t", "synthetic:package:1 core:2 pu:1", "-l",
                          "compact", "--", *launch], capture_output=True, timeout=120)  # fmt: skip
    assert b"Traceback" not in out.stderr and out.returncode in (0, 1), out.stderr[-2000:]
    assert b"rank  host" in out.stdout + out.stderr


def test_a_tool_that_floods_its_output_is_stopped_at_the_bound() -> None:
    """A tool printing without end (a broken flux, lstopo on a hostile node) is stopped once
    past the limit, in one line, not after filling memory within its timeout."""
    t0 = time.monotonic()
    with pytest.raises(
        TopobindError, match=r"^yes printed more than 1 MiB on its stdout \(.*\); stopped$"
    ):
        capture(["yes"], 60, "yes", limit=1 << 20)
    assert time.monotonic() - t0 < 30


@pytest.mark.slow
def test_a_grandchild_holding_the_pipes_does_not_keep_topobind_waiting() -> None:
    """The tool ended; a process it left behind keeps its stdout open: what it printed is
    returned at once (subprocess.run waited for the pipe's end, up to the timeout or for
    ever), and the process left behind is killed with the tool's session."""
    t0 = time.monotonic()
    status, out, _ = capture(["sh", "-c", "(sleep 300 & echo $!); echo done"], 60, "sh")
    pid, done = out.split()
    assert (status, done) == (0, "done") and time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10  # SIGKILL sent: gone, or dead and not yet reaped
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)  # this sleep, not another test's


def _running(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ------------------------------------------------- run_process(capture=True): the same bound
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_run_process_stops_a_child_that_floods_its_captured_output(stream: str) -> None:
    """run_process read a captured stream to its end (communicate): a program printing
    without end filled memory until its timeout. Now stopped past the bound, in one line
    naming the command and the limit, with everything in its session."""
    from topobind.runner import run_process

    script = "exec yes" if stream == "stdout" else "exec yes >&2"
    t0 = time.monotonic()
    with pytest.raises(TopobindError) as info:
        run_process(["sh", "-c", script], capture=True, capture_stderr=True, timeout=60,
                    what="the flood", limit=1 << 20)  # fmt: skip
    assert str(info.value) == (
        f"the flood printed more than 1 MiB on its {stream} (the most topobind reads of a "
        "command's output); stopped"
    )
    assert time.monotonic() - t0 < 30


def test_run_process_reads_what_fits_and_keeps_line_ends_as_text_did() -> None:
    from topobind.runner import run_process

    done = run_process(["sh", "-c", r"printf 'a\r\nb\rc\n'; printf 'e\n' >&2; exit 4"],
                       capture=True, capture_stderr=True, timeout=30, limit=7)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (4, "a\nb\nc\n", "e\n")


@pytest.mark.slow
def test_run_process_memory_stays_near_the_default_bound(tmp_path: object) -> None:
    """A child writing 512 MiB to a captured stdout: topobind stops at CAPTURE_LIMIT (64 MiB)
    and its peak memory stays near it (it held all 512 MiB, and a decoded copy, before)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from topobind.errors import TopobindError\n"
        "from topobind.runner import run_process\n"
        "try:\n"
        "    run_process(['head', '-c', str(512 << 20), '/dev/zero'], capture=True, timeout=120)\n"
        "    print('read it all')\n"
        "except TopobindError as exc:\n"
        "    print(exc)\n"
        # VmHWM: this program's own peak; ru_maxrss keeps the peak of the process it was
        # forked from across exec (320 MiB: pytest's own, late in a whole make test)
        "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0]\n"
        "print(int(hwm.split()[1]) >> 10)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    said, peak_mib = done.stdout.splitlines()
    assert said.startswith("head printed more than 64 MiB on its stdout"), done
    assert int(peak_mib) < 64 + 150, done.stdout
