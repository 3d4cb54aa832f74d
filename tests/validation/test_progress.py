"""Progress lines (issue 30 item 2): a live line per node and check on a terminal, one plain
line per finished run otherwise, nothing with --quiet; ReFrame's status lines drive it."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from topobind.validation import progress

CASE = "StreamCheck %layout=numa %.part=local:slurm %.nid=n2 /177da1da @local:slurm+builtin"
RUN = f"[ RUN      ] {CASE}"
OK = f"[       OK ] (1/6) {CASE}"
FAIL = "[     FAIL ] (2/6) LatencyCheck %.nid=n3 /0bad @local:slurm+builtin"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_mode_prints_one_line_per_finished_run_with_the_time_left() -> None:
    out, clock = io.StringIO(), Clock()
    p = progress.Progress(out, "plain", now=clock)
    p.plan("n1", "StreamCheck compact", 3)
    p.plan("n2", "StreamCheck compact", 3)
    p.start("n1", "StreamCheck compact")
    assert out.getvalue() == ""  # nothing redrawn in a log
    clock.t += 10
    p.finish("n1", "StreamCheck compact")
    lines = out.getvalue().splitlines()
    assert lines == ["n1  StreamCheck compact  run 1/3 ok in 0:10  (elapsed 0:10, about 0:50 left)"]
    assert "\x1b" not in out.getvalue()


def test_live_mode_redraws_a_line_per_node_and_check_in_progress() -> None:
    out, clock = io.StringIO(), Clock()
    p = progress.Progress(out, "live", estimate=30.0, now=clock)
    p.plan("n1", "StreamCheck compact", 2)
    p.plan("n2", "LatencyCheck local", 2)
    p.start("n1", "StreamCheck compact")
    p.start("n2", "LatencyCheck local")
    clock.t += 12
    p.tick()
    text = out.getvalue()
    assert "\x1b[1A\x1b[2K" in text  # the lines are redrawn in place
    last = text.rsplit("\x1b[2K", 1)[-1]  # the last redraw: both items, one line each
    assert "n1  StreamCheck compact  run 1/2  0:12 of ~0:30" in last
    assert "n2  LatencyCheck local  run 1/2  0:12 of ~0:30" in last
    assert "about 1:36 left" in text  # 4 runs x 30 s, less the 2 x 12 s already run


def test_quiet_mode_writes_nothing() -> None:
    out = io.StringIO()
    p = progress.make(quiet=True, stream=out)
    p.start("n1", "c")
    p.finish("n1", "c")
    p.close()
    assert out.getvalue() == ""


def test_make_is_plain_when_not_a_terminal() -> None:
    assert progress.make(stream=io.StringIO()).mode == "plain"


def test_reframe_lines_drive_progress() -> None:
    out, clock = io.StringIO(), Clock()
    t = progress.ReframeTracker(progress.Progress(out, "plain", now=clock), runs=3)
    t.feed(RUN)
    clock.t += 5
    t.feed(OK)
    t.feed("[ RUN      ] LatencyCheck %.nid=n3 /0bad @local:slurm+builtin")
    clock.t += 2
    t.feed(FAIL)
    t.feed("P: triad: 2203.4 MB/s")  # not a status line
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("n2  StreamCheck numa  run 1/3 ok in 0:05")
    assert lines[1].startswith("n3  LatencyCheck  run 1/3 FAIL in 0:02")
    assert len(lines) == 2


def test_case_name_without_a_node_is_the_partition() -> None:
    node, check = progress.case_name("C2CCheck %pair=same-l3", "local:default+builtin")
    assert (node, check) == ("local:default", "C2CCheck same-l3")


def test_a_skipped_run_is_neither_running_nor_left_to_do() -> None:
    """ReFrame prints RUN then SKIP for a case it skips (cross-l3 on one L3 domain; a
    sanity-only check after the session's first run): the time left counted those runs as
    still to come, so the last check of a run said 'about 0:17 left'."""
    out, clock = io.StringIO(), Clock()
    t = progress.ReframeTracker(progress.Progress(out, "plain", now=clock), runs=2)
    skip = "[     SKIP ] ( 2/18) C2CCheck %pair=cross-l3 %.nid=n1 /4eee @s:p+b [needs two L3]"
    for _ in range(2):
        t.feed("[ RUN      ] C2CCheck %pair=cross-l3 %.nid=n1 /4eee @s:p+b")
        assert t.feed(skip)
        t.feed(RUN)
        clock.t += 5
        t.feed(OK)
    assert t.progress.left() == 0.0
    assert all(i.started is None for i in t.progress.items.values())
    assert out.getvalue().splitlines()[-1].endswith("(elapsed 0:10, about 0:00 left)")


def test_a_long_run_says_so_every_heartbeat_with_its_own_estimate() -> None:
    """Issue 48 item 3: validate showed 'about 0:00 left' for 3.5 minutes while DgemmCheck 1G
    ran 3:34 with no line. A run in progress is written every 10 s, timed by its own check's
    runs (not the short checks' mean), and once over that the line says so."""
    out, clock = io.StringIO(), Clock()
    p = progress.Progress(out, "plain", now=clock)
    p.plan("n1", "StreamCheck compact", 1)
    p.plan("n1", "DgemmCheck 1G", 2)
    p.start("n1", "StreamCheck compact")
    clock.t += 4
    p.finish("n1", "StreamCheck compact")
    p.start("n1", "DgemmCheck 1G")
    clock.t += 60
    p.finish("n1", "DgemmCheck 1G")
    p.start("n1", "DgemmCheck 1G")
    clock.t += 9
    p.beat()
    assert len(out.getvalue().splitlines()) == 2  # under 10 s since the last line: nothing
    clock.t += 1
    p.beat()
    beat = out.getvalue().splitlines()[-1]
    assert beat.startswith("n1  DgemmCheck 1G  still running: run 2/2  0:10 of ~1:00"), beat
    assert "about 0:50 left" in beat  # DGEMM's own 60 s, not the mean of 4 s and 60 s
    clock.t += 5
    p.beat()
    assert len(out.getvalue().splitlines()) == 3  # one line a heartbeat
    clock.t += 80
    p.beat()
    assert "over its ~1:00 so far" in out.getvalue().splitlines()[-1]


def test_the_heartbeat_thread_writes_while_nothing_else_does() -> None:
    import time

    out = io.StringIO()
    p = progress.Progress(out, "plain")
    p.plan("n1", "HplCheck full", 1)
    p.start("n1", "HplCheck full")
    p.start_heartbeat(every=0.2)
    try:
        deadline = time.monotonic() + 30  # a busy machine schedules the thread late
        while "still running: run 1/1" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        p.close()
    assert "n1  HplCheck full  still running: run 1/1  0:00" in out.getvalue()
    quiet = progress.Progress(io.StringIO(), "quiet")
    quiet.start_heartbeat(every=0.2)
    quiet.close()


def test_no_heartbeat_after_close_and_none_into_a_closed_stream(monkeypatch) -> None:
    """CI saw 'ValueError: I/O operation on closed file' in the topobind-progress thread: a
    beat that had passed its wait wrote after close(), into a stream pytest had closed.
    close() now joins the thread; a stream closed under it ends the heartbeat quietly."""
    import threading
    import time

    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: raised.append(a.exc_value))
    for _ in range(20):  # many closes, each racing a beat due every 1 ms
        out = io.StringIO()
        p = progress.Progress(out, "plain")
        p.plan("n1", "HplCheck full", 1)
        p.start("n1", "HplCheck full")
        p._said -= 10  # a beat is due at once
        p.start_heartbeat(every=0.001)
        time.sleep(0.01)
        p.close()
        assert p._beating is not None and not p._beating.is_alive()
        out.close()  # what pytest's capture does at the test's end: a late beat would raise
    lost = io.StringIO()
    q = progress.Progress(lost, "plain")
    q.plan("n1", "HplCheck full", 1)
    q.start("n1", "HplCheck full")
    lost.close()
    q._said -= 10
    q.start_heartbeat(every=0.001)
    assert q._beating is not None
    q._beating.join(timeout=30)  # the closed stream stops it
    assert not q._beating.is_alive()
    q.close()
    assert raised == []


@pytest.mark.slow
def test_a_silent_run_gets_a_line_within_the_heartbeat_from_make() -> None:
    """What validate and bench get from progress.make: a process whose only run says nothing
    for 12 s writes a 'still running' line (HEARTBEAT_S, 10 s) to its stderr (not a terminal)."""
    import subprocess
    import sys

    code = (
        "import time; from topobind.validation import progress\n"
        "p = progress.make(); p.plan('n1', 'DgemmCheck 1G', 1); p.start('n1', 'DgemmCheck 1G')\n"
        "time.sleep(12); p.finish('n1', 'DgemmCheck 1G'); p.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(ln.startswith("n1  DgemmCheck 1G  still running: run 1/1  0:1") for ln in lines), (
        lines
    )
    assert lines[-1].startswith("n1  DgemmCheck 1G  run 1/1 ok in 0:12"), lines


def test_a_check_not_yet_timed_borrows_no_other_checks_time() -> None:
    """Issue 48 item 3: before DgemmCheck 1G's first run, the time left was the short STREAM
    runs' mean ('about 0:04 left' for minutes). A check with no run and no cost model is
    named as not yet timed; one with a cost model (its earlier reports) is timed by it."""
    out, clock = io.StringIO(), Clock()
    p = progress.Progress(out, "plain", now=clock)
    p.plan("n1", "StreamCheck compact", 1)
    p.plan("n1", "DgemmCheck 1G", 1)
    p.start("n1", "StreamCheck compact")
    clock.t += 4
    p.finish("n1", "StreamCheck compact")
    assert (
        out.getvalue()
        .splitlines()[-1]
        .endswith("(elapsed 0:04, about 0:00 left + DgemmCheck 1G not yet timed)")
    )
    assert p.untimed() == ["DgemmCheck 1G"]
    out2 = io.StringIO()
    q = progress.Progress(out2, "plain", now=clock, estimates={"DgemmCheck 1G": 214.0})
    q.plan("n1", "StreamCheck compact", 1)
    q.plan("n1", "DgemmCheck 1G", 1)
    q.start("n1", "StreamCheck compact")
    clock.t += 4
    q.finish("n1", "StreamCheck compact")
    assert out2.getvalue().splitlines()[-1].endswith("(elapsed 0:04, about 3:34 left)")


def _report(path: Path, cases: list[tuple[str, str, float]]) -> None:
    tcs = [
        {
            "name": d.split()[0],
            "display_name": d,
            "result": r,
            "time_total": t,
            "system": "local",
            "partition": "slurm",
            "perfvalues": {},
        }
        for d, r, t in cases
    ]
    path.write_text(json.dumps({"session_info": {"time_elapsed": 1.0},
                                "runs": [{"run_index": 0, "testcases": tcs}]}))  # fmt: skip


def test_check_times_from_the_sites_earlier_reports(tmp_path: Path) -> None:
    rep = tmp_path / "reports"
    rep.mkdir()
    _report(
        rep / "validate-local-slurm-20261201T000000Z.json",
        [("DgemmCheck %pages=1G", "pass", 200.0), ("StreamCheck %layout=compact", "pass", 4.0)],
    )
    _report(
        rep / "each-node-local-slurm-20261202T000000Z-node1.json",
        [
            ("DgemmCheck %pages=1G %.nid=node1", "pass", 220.0),
            ("StreamCheck %layout=compact", "fail", 90.0),
        ],
    )  # a failed run times nothing
    _report(
        rep / "validate-other-slurm-20261203T000000Z.json", [("DgemmCheck %pages=1G", "pass", 1.0)]
    )  # another site
    (rep / "validate-local-slurm-20261204T000000Z.json").write_text("{not json")
    os.mkfifo(rep / "validate-local-slurm-20261205T000000Z.json")  # passed over, never waited on
    times = progress.check_times(tmp_path, "local", "slurm")
    assert times == {"DgemmCheck 1G": 210.0, "StreamCheck compact": 4.0}
    assert progress.check_times(tmp_path / "none", "local", "slurm") == {}
