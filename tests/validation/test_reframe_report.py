"""The one reader of ReFrame's run report (validation/reframe_report.py): validate, calibrate,
--each-node and --history agree on every test's node and variant; hostile reports and
results databases are one-line errors naming the file and the field (issue 31 item 3), with a
property test as the net for the next ones."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fuzzing import bounded, fuzz
from hypothesis import given
from hypothesis import strategies as st

from topobind.errors import TopobindError
from topobind.validation import (
    acceptance,
    calibration,
    history,
    reframe_report,
    reframe_runs,
    verdict,
)
from topobind.validation.reframe_report import ReportError

SITE = "fleet"


def _tc(display: str, value: float | None, node: str | None = None, metric: str = "triad",
        unit: str = "MB/s", **extra: Any) -> dict[str, Any]:  # fmt: skip
    tc: dict[str, Any] = {
        "display_name": display,
        "name": display.split(" %.")[0],
        "system": SITE,
        "partition": "slurm",
        "result": "pass",
        "fail_phase": None,
        "fail_reason": None,
        "job_nodelist": [node] if node else [],
        "perfvalues": {f"{SITE}:slurm:{metric}": [value, 0, None, None, unit, "pass"]},
        "hashcode": "abcd1234",
    }
    tc.update(extra)
    return tc


def _report(runs: int = 3) -> dict[str, Any]:
    """Three nodes, three checks (a parameterised one, one without a parameter, one of two
    parameters' worth of name), each pinned with %.nid as --distribute writes them."""
    out = []
    for r in range(runs):
        cases = []
        for i, node in enumerate(("node1", "node2", "node3")):
            part = f"%.part={SITE}:slurm %.nid={node}"
            cases += [
                _tc(f"StreamCheck %layout=compact {part}", 100.0 + r + i, node),
                _tc(f"LatencyCheck {part}", 90.0 + i, node, "latency_ns", "ns"),
                _tc(f"C2CCheck %pair=same-l3 {part}", 50.0 + i, node, "c2c_ns", "ns"),
            ]
        out.append({"run_index": r, "testcases": cases})
    return {"session_info": {"time_start_unix": 1_790_000_000.0}, "runs": out}


def _write(tmp_path: Path, doc: Any, name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# --------------------------------------------------------------------------- agreement
def test_validate_calibrate_and_each_node_agree_on_node_and_variant(tmp_path: Path) -> None:
    """Issue 28 item 3: one report, the three readers, the same (check, variant, node)."""
    report = reframe_report.read_report(str(_write(tmp_path, _report())))
    rows = reframe_runs.rows_from(list(report.cases))
    table = {(r.check, r.variant, r.node) for r in rows}
    obs = verdict.observe([report], SITE)
    each = {(s.check, s.variant, s.node) for s in obs.samples}
    assert table == each
    assert ("LatencyCheck", "local", "node2") in table  # its single variant, by name
    assert ("StreamCheck", "compact", "node3") in table
    cal = calibration.collect(list(report.cases))
    assert set(cal) == {("stream", "compact", "triad"), ("latency", "local", "latency_ns"),
                        ("c2c", "same-l3", "c2c_ns")}  # fmt: skip
    # calibrate's figure keys are the table's variants, and so the site's targets' keys
    keys = {calibration.figure_key(r.check, r.variant, r.metric) for r in rows}
    assert keys == set(cal)
    # the node a plain validate shows: the scheduler's record, else tb_ran_on
    plain = _tc("StreamCheck %layout=compact", 1.0, None, tb_ran_on="node7")
    (row,) = reframe_runs.rows_from([plain])
    (case,) = reframe_report.cases_of([plain])
    assert row.node == case.node == "node7"


def test_a_pinned_node_that_the_scheduler_contradicts_is_refused() -> None:
    bad = _tc(f"StreamCheck %layout=compact %.part={SITE}:slurm %.nid=node1", 1.0, "node2")
    with pytest.raises(ReportError, match=r"pinned to node1 .* job_nodelist says node2"):
        reframe_report.cases_of([bad])


# --------------------------------------------------------------------------- hostile reports
def _set(path: str, value: Any) -> Any:
    """A change to the valid report: ``path`` like runs.0.testcases.1.perfvalues.KEY.0."""

    def change(doc: dict[str, Any]) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        keys = path.split(".")
        node: Any = doc
        for k in keys[:-1]:
            if k == "KEY":
                k = next(iter(node))
            node = node[int(k)] if isinstance(node, list) else node[k]
        last: Any = keys[-1]
        if last == "KEY":
            last = next(iter(node))
        node[int(last) if isinstance(node, list) else last] = value
        return doc

    return change


PERF = "runs.0.testcases.0.perfvalues.KEY"
HOSTILE: dict[str, tuple[Any, tuple[str, ...]]] = {
    "nan": (_set(f"{PERF}.0", "NaN-literal"), ("NaN is not a JSON number",)),
    "infinity": (_set(f"{PERF}.0", "Infinity-literal"), ("Infinity",)),
    "string value": (_set(f"{PERF}.0", "fast"), ("perfvalues", "[0]", "must be a number")),
    "list value": (_set(f"{PERF}.0", [1, 2]), ("[0]", "must be a number")),
    "true as 1.0": (_set(f"{PERF}.0", True), ("[0]", "must be a number, got true")),
    "one-element perfvalues": (_set(PERF, [5.0]), ("perfvalues", "must be a list [value")),
    "perfvalues a string": (_set("runs.0.testcases.0.perfvalues", "x"), ("perfvalues",)),
    "testcases of numbers": (_set("runs.0.testcases", [1, 2]), ("testcases[0]", "object")),
    "testcases an object": (_set("runs.0.testcases", {"a": 1}), ("runs[0].testcases",)),
    "runs a string": (_set("runs", "x"), ("runs", "list of runs")),
    "zero rate": (_set(f"{PERF}.0", 0), ("[0]", "must be positive")),
    "negative rate": (_set(f"{PERF}.0", -5.0), ("[0]", "must be positive")),
    "1e308": (_set(f"{PERF}.0", 1e308), ("[0]", "finite number of at most")),
    "bound a string": (_set(f"{PERF}.2", "low"), ("[2]", "must be a number")),
    "unit a number": (_set(f"{PERF}.4", 5), ("[4]", "unit must be a string")),
    "two nids": (
        _set(
            "runs.0.testcases.0.display_name",
            f"StreamCheck %layout=compact %.part={SITE}:slurm %.nid=node1 %.nid=node2",
        ),
        ("display_name", "%.nid given 2 times"),
    ),  # fmt: skip
    "hostlist nid": (
        _set(
            "runs.0.testcases.0.display_name",
            f"StreamCheck %layout=compact %.part={SITE}:slurm %.nid=node[1-3]",
        ),
        ("%.nid", "not one node name"),
    ),  # fmt: skip
    "comma list in job_nodelist": (
        _set("runs.0.testcases.0.job_nodelist", ["node1,node2"]),
        ("job_nodelist[0]", "not one node name"),
    ),  # fmt: skip
    "name a number": (_set("runs.0.testcases.0.display_name", 7), ("display_name",)),
    "not an object": (lambda d: [d], ("not a ReFrame run report",)),
}


def _text(doc: Any) -> str:
    text = json.dumps(doc)
    return text.replace('"NaN-literal"', "NaN").replace('"Infinity-literal"', "Infinity")


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_reports_are_one_line_naming_the_file_and_field(case: str, tmp_path: Path) -> None:
    change, names = HOSTILE[case]
    path = _write(tmp_path, _text(change(_report())))
    req = acceptance.Request("slurm", "quick", None, {})
    with pytest.raises(TopobindError) as err:
        acceptance.judge_reports([str(path)], SITE, req)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: "), text
    for name in names:
        assert name in text, text


def test_the_unchanged_report_is_judged(tmp_path: Path) -> None:
    """The hostile cases above are this report with one change: it alone is fine."""
    path = _write(tmp_path, _text(_report()))
    out = acceptance.judge_reports([str(path)], SITE, acceptance.Request("slurm", "q", None, {}))
    assert [v.status for v in out.verdicts] == ["ok", "ok", "ok"]


# --------------------------------------------------------------------------- the net
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=4),
    max_leaves=12,
)  # fmt: skip
FIELDS = st.sampled_from([
    "runs", "runs.0", "runs.0.testcases", "runs.0.testcases.0",
    "runs.0.testcases.0.display_name", "runs.0.testcases.0.job_nodelist",
    "runs.0.testcases.0.job_nodelist.0", "runs.0.testcases.0.result",
    "runs.0.testcases.0.fail_phase", "runs.0.testcases.0.system", "runs.0.testcases.0.tb_ran_on",
    "runs.0.testcases.0.perfvalues", PERF, f"{PERF}.0", f"{PERF}.1", f"{PERF}.2", f"{PERF}.3",
    f"{PERF}.4", f"{PERF}.5", "session_info", "session_info.time_start_unix",
])  # fmt: skip


def _judge_all(doc: Any, source: str) -> None:
    report = reframe_report.report_from_document(doc, source)
    obs = verdict.observe([report], SITE)
    figures = verdict.figure_verdicts(obs.samples, 0.05)
    verdicts = verdict.node_verdicts(sorted(obs.ran_on), obs, figures)
    verdict.table(verdicts)
    verdict.drain_plan(verdicts, "slurm", {"node1", "node2", "node3"})
    reframe_runs.table(reframe_runs.rows_from(list(report.cases)))
    calibration.collect(list(report.cases))


@fuzz(60)
@given(changes=st.lists(st.tuples(FIELDS, JSON_VALUES), min_size=1, max_size=3))
def test_any_report_is_judged_or_refused_in_one_line(changes: list[tuple[str, Any]]) -> None:
    doc: Any = _report(2)
    for path, value in changes:
        try:
            doc = _set(path, value)(doc)
        except (KeyError, IndexError, TypeError, StopIteration, ValueError, AttributeError):
            continue  # the path no longer exists after an earlier change
    with bounded():
        try:
            _judge_all(doc, "hostile.json")
        except TopobindError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("hostile.json"), str(exc)


# --------------------------------------------------------------------------- the database
def _db(tmp_path: Path, rows: list[tuple[Any, Any]]) -> Path:
    db = tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
                "session_end_unix REAL, json_blob TEXT, report_file TEXT)")  # fmt: skip
    for i, (start, blob) in enumerate(rows):
        con.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)", (f"s{i}", start, 0, blob, ""))
    con.commit()
    con.close()
    return db


GOOD = json.dumps(_report())
DB_HOSTILE: dict[str, tuple[Any, Any, tuple[str, ...]]] = {
    "blob not JSON": (1.0, "{not json", ("session s0", "not JSON")),
    "blob not an object": (1.0, "[1, 2]", ("session s0", "not a ReFrame run report")),
    "blob a number": (1.0, 7, ("session s0", "not a ReFrame run report")),
    "blob binary": (1.0, b"\xff\x00", ("session s0", "not JSON")),
    "NULL start": (None, GOOD, ("session s0", "session_start_unix")),
    "text start": ("yesterday", GOOD, ("session s0", "session_start_unix", "yesterday")),
    "NaN in blob": (1.0, GOOD.replace("100.0", "NaN", 1), ("NaN is not a JSON number",)),
    "zero value": (1.0, GOOD.replace("100.0", "0", 1), ("must be positive",)),
    "negative value": (1.0, GOOD.replace("100.0", "-1", 1), ("must be positive",)),
}


@pytest.mark.parametrize("case", list(DB_HOSTILE))
def test_garbage_in_the_results_database_is_one_line(case: str, tmp_path: Path) -> None:
    start, blob, names = DB_HOSTILE[case]
    db = _db(tmp_path, [(start, blob)])
    with pytest.raises(TopobindError) as err:
        history.trends(history.sessions(db, SITE, 30), SITE, 0.05)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{db}: "), text
    for name in names:
        assert name in text, text


@fuzz(30)
@given(start=JSON_VALUES, changes=st.lists(st.tuples(FIELDS, JSON_VALUES), max_size=2))
def test_any_results_database_is_read_or_refused_in_one_line(
    start: Any, changes: list[tuple[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    doc: Any = _report(2)
    for path, value in changes:
        try:
            doc = _set(path, value)(doc)
        except (KeyError, IndexError, TypeError, StopIteration, ValueError, AttributeError):
            continue
    stored = start if isinstance(start, int | float | str | type(None)) else json.dumps(start)
    if isinstance(stored, int) and not -(2**63) <= stored < 2**63:
        stored = str(stored)
    db = _db(tmp_path_factory.mktemp("db"), [(stored, json.dumps(doc)), (2e9, GOOD)])
    with bounded():
        try:
            rows = history.trends(history.sessions(db, SITE, 1e6), SITE, 0.05)
            history.table(rows)
            assert all(math.isfinite(t.latest) for t in rows)
        except TopobindError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(db)), str(exc)
