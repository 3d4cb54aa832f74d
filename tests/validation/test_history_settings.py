"""validate --history compares like with like (issue 37 item 9): a node's latest session
only against earlier sessions of the same check, variant and settings (ReFrame's -S options,
from each session's command line); the settings of other checks do not matter."""

from __future__ import annotations

import json
import shlex
import sqlite3
from pathlib import Path
from typing import Any

from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from topobind.validation import history, reframe_report

DAY = 86400.0


def _tc(node: str, value: float) -> dict[str, Any]:
    return {
        "display_name": f"StreamCheck %layout=compact %.part=fleet:slurm %.nid={node}",
        "system": "fleet", "partition": "slurm", "result": "pass", "job_nodelist": [node],
        "perfvalues": {"fleet:slurm:triad": [value, 0, None, None, "MB/s", "pass"]},
    }  # fmt: skip


def _db(path: Path, sessions: list[tuple[list[str], float]]) -> Path:
    """One session a day: (its -S options, node1's triad)."""
    db = path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
                "session_end_unix REAL, json_blob TEXT, report_file TEXT)")  # fmt: skip
    for i, (setvars, value) in enumerate(sessions):
        t = 1_790_000_000.0 + i * DAY
        argv = ["reframe", "-C", "c.py", "--system", "fleet:slurm", "-t", "quick"]
        argv += [a for s in setvars for a in ("-S", s)] + ["-r"]
        doc = {"session_info": {"cmdline": " ".join(shlex.quote(a) for a in argv),
                                "time_start_unix": t},
               "runs": [{"testcases": [_tc("node1", value + r)]} for r in range(3)]}  # fmt: skip
        con.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                    (f"s{i}", t, t + 60, json.dumps(doc), ""))  # fmt: skip
    con.commit()
    con.close()
    return db


def _one(db: Path) -> history.Trend:
    (row,) = history.trends(history.sessions(db, "fleet", 30), "fleet", 0.05)
    return row


def test_a_session_with_other_settings_is_not_compared(tmp_path: Path) -> None:
    """-S StreamCheck.elements=4M (in cache: twice the bandwidth) then the default: was DRIFT."""
    db = _db(tmp_path, [(["StreamCheck.elements=4M"], 200.0)] * 3 + [([], 100.0)])
    row = _one(db)
    assert not row.drift and row.change is None
    assert row.differ == "the defaults"
    assert "not compared: settings differ (the defaults)" in history.table([row])


def test_only_the_sessions_of_the_same_settings_are_the_baseline(tmp_path: Path) -> None:
    db = _db(tmp_path, [([], 100.0), (["StreamCheck.elements=4M"], 200.0), ([], 101.0),
                        (["DgemmCheck.n=1024"], 100.5)])  # fmt: skip
    row = _one(db)  # the last one's DgemmCheck setting does not reach STREAM
    assert row.sessions == 3 and not row.drift and row.baseline is not None
    assert abs(row.change or 0) < 0.02
    other = tmp_path / "other"
    other.mkdir()
    mixed = [([], 100.0)] * 3 + [(["StreamCheck.elements=4M"], 200.0), ([], 80.0)]
    slow = _one(_db(other, mixed))
    assert slow.drift and slow.sessions == 4  # 80 against the three default sessions


@fuzz(200)
@given(st.text(max_size=200))
def test_any_command_line_gives_settings_or_none(cmdline: str) -> None:
    got = reframe_report.cmdline_settings(cmdline)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in got)


def test_the_forms_of_dash_s() -> None:
    line = "reframe -S a=1 -SStreamCheck.elements=4M --setvar=b=2 --setvar c=3 -S a=9 -Snokey"
    assert dict(reframe_report.cmdline_settings(line)) == {
        "a": "9", "StreamCheck.elements": "4M", "b": "2", "c": "3"}  # fmt: skip


def test_since_takes_ascii_days_within_bounds() -> None:
    import pytest

    from topobind.errors import TopobindError

    assert history.days_of("30d") == 30
    for bad in ("\u0663\u0660d", "0d", "1_0d", "99999999d", "30", "-1d", "30d "):
        with pytest.raises(TopobindError, match="with --history give days, 1d to 36500d"):
            history.days_of(bad)


def test_settings_that_change_no_figure_do_not_split_the_sessions() -> None:
    rep = reframe_report.Report("r", (), None, 1, reframe_report.cmdline_settings(
        "reframe -S calibrating=true -S node_budget=10m -S StreamCheck.elements=4M "
        "-S DgemmCheck.n=1024 -S pages=2M -S StreamCheck.sanity_once=true"))  # fmt: skip
    assert rep.settings_of("StreamCheck") == (("elements", "4M"), ("pages", "2M"))
    assert rep.settings_of("DgemmCheck") == (("n", "1024"), ("pages", "2M"))


def test_a_drift_names_its_cause_against_the_nodes_earlier_sessions(tmp_path: Path) -> None:
    """Issue 45: the latest session's evidence (tb_evidence) against the node's own earlier
    sessions': swap during the slow session names swap; a session without evidence says so."""
    db = tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
                "session_end_unix REAL, json_blob TEXT, report_file TEXT)")  # fmt: skip
    for i, value in enumerate([100.0, 101.0, 99.0, 70.0]):
        t = 1_790_000_000.0 + i * DAY
        runs = []
        for r in range(3):
            tc = _tc("node1", value + r)
            tc["tb_evidence"] = {"version": 1, "window_s": 2.0,
                                 "signals": {"swap_pages": 4000 if value < 80 else 0}}  # fmt: skip
            runs.append({"testcases": [tc]})
        doc = {"session_info": {"cmdline": "reframe -r", "time_start_unix": t}, "runs": runs}
        con.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                    (f"s{i}", t, t + 60, json.dumps(doc), ""))  # fmt: skip
    con.commit()
    con.close()
    row = _one(db)
    assert row.drift
    assert row.cause == "swap (2e+03 pages swapped/s; fleet: none)"
    assert "\n       cause: swap (2e+03 pages swapped/s; fleet: none)" in history.table([row])
