"""topobind.report.reader: strict, fast reading of result files (JSON and JSON Lines)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from topobind.errors import TopobindError
from topobind.measure.results import Headline, Placement
from topobind.report.reader import read_file, read_results

DOC: dict[str, Any] = {
    "schema": "topobind.result/1",
    "kernel": "stream",
    "host": "node042",
    "timestamp": "2026-11-22T22:40:00Z",
    "layout": "every-other-core",
    "ranks": 1,
    "threads": 4,
    "params": {"array_elements": 1000},
    "pages": {"requested": "2M", "kib": 2048, "fallback": False, "note": "ok"},
    "placement": [{"rank": 0, "thread": 0, "cpu": 3, "numa": 0}],
    "metrics": {
        "triad": {
            "unit": "MB/s",
            "higher_is_better": True,
            "trials": [1.0, 2.0],
            "best": 2.0,
            "avg": 1.5,
            "min": 1.0,
            "max": 2.0,
        }
    },
    "headline": {
        "metric": "triad",
        "stat": "best",
        "value": 12345.6,
        "unit": "MB/s",
        "higher_is_better": True,
    },
    "valid": True,
    "validation": "STREAM: solution validates",
}


def doc(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(DOC)
    d.update(changes)
    return d


def write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path


def test_reads_the_documented_fields(tmp_path: Path) -> None:
    (run,) = read_file(write(tmp_path / "r.json", doc()))
    assert (run.kernel, run.host, run.layout) == ("stream", "node042", "every-other-core")
    assert run.pages is not None and (run.page_kib, run.pages.requested) == (2048, "2M")
    assert run.page_fallback is None
    assert run.headline == Headline("triad", "best", 12345.6, "MB/s", True)
    assert run.metrics["triad"].trials == (1.0, 2.0)
    assert run.placement == (Placement(rank=0, thread=0, cpu=3, numa=0),)
    assert run.valid is True and run.generated is False
    assert run.time.isoformat() == "2026-11-22T22:40:00+00:00"
    assert run.source == str(tmp_path / "r.json")


def test_null_headline_and_matrices_with_null_cells(tmp_path: Path) -> None:
    m = {
        "c2c": {
            "unit": "ns",
            "rows": [0, 2],
            "cols": [0, 2],
            "row_kind": "cpu",
            "col_kind": "cpu",
            "values": [[None, 40.5], [41, None]],
        }
    }
    (run,) = read_file(write(tmp_path / "c.json", doc(kernel="c2c", matrices=m)))
    (mat,) = run.matrices.values()
    assert mat.rows == (0, 2) and mat.unit == "ns"  # labels as in the file
    assert math.isnan(mat.values[0]) and mat.values[1] == 40.5 and mat.values[2] == 41.0
    (who,) = read_file(write(tmp_path / "w.json", doc(kernel="whereami", headline=None)))
    assert who.headline is None and who.headline_value is None


def test_json_lines_by_suffix_and_by_content(tmp_path: Path) -> None:
    lines = "\n".join(json.dumps(doc(host=f"n{i}")) for i in range(3)) + "\n\n"
    (tmp_path / "a.jsonl").write_text(lines)
    (tmp_path / "b.json").write_text(lines)  # several documents, one per line
    for name in ("a.jsonl", "b.json"):
        runs = read_file(tmp_path / name)
        assert [r.host for r in runs] == ["n0", "n1", "n2"]
        assert runs[1].source == f"{tmp_path / name}:2"


def test_directories_recursive_hidden_skipped_and_deduplicated(tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    write(tmp_path / "x" / "1.json", doc(host="a"))
    write(tmp_path / "x" / "y" / "2.json", doc(host="b"))
    write(tmp_path / "x" / "notes.txt", {"not": "read"})
    write(tmp_path / ".hidden" / "3.json", {"garbage": True})
    write(tmp_path / "x" / ".tmp.json", {"garbage": True})
    got = read_results([tmp_path, tmp_path / "x" / "1.json"])
    assert sorted(r.host for r in got.runs) == ["a", "b"]
    assert got.files == 2


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty file"),
        ("   \n", "empty file"),
        (json.dumps(DOC)[:150], "not valid JSON"),  # truncated mid-write
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({**DOC, "schema": "other/1"}), "not a topobind result"),
        (json.dumps({k: v for k, v in DOC.items() if k != "host"}), 'missing "host"'),
        (json.dumps({**DOC, "timestamp": "yesterday"}), "ISO 8601"),
        (json.dumps({**DOC, "headline": {**DOC["headline"], "value": "fast"}}), "must be a number"),
        (json.dumps({**DOC, "headline": {**DOC["headline"], "value": -1}}), "positive"),
        (json.dumps({**DOC, "pages": {"kib": "2M"}}), "pages.kib"),
        (json.dumps({**DOC, "valid": "yes"}), '"valid" must be'),
        (
            json.dumps(
                {
                    **DOC,
                    "matrices": {
                        "m": {"unit": "ns", "rows": [0], "cols": [0, 1], "values": [[1.0]]}
                    },
                }
            ),
            "row 0 must have 2 values",
        ),  # fmt: skip
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(TopobindError) as exc:
        read_results([tmp_path])
    msg = str(exc.value)
    assert msg.startswith(str(bad)), msg
    assert needle in msg
    assert "\n" not in msg


def test_bad_json_line_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "w.jsonl"
    f.write_text(json.dumps(doc()) + "\n" + json.dumps(doc())[:40] + "\n")
    with pytest.raises(TopobindError, match=rf"^{f}:2: not valid JSON"):
        read_results([f])


def test_missing_input_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(TopobindError, match="no such file or directory"):
        read_results([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TopobindError, match="holds no result files"):
        read_results([tmp_path / "empty"])


def test_parallel_path_matches_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large inputs are decoded in forked workers; the runs must be the same, in order."""
    from topobind.report import reader

    m = {"c2c": {"unit": "ns", "rows": [0, 1], "cols": [0, 1], "values": [[None, 3], [4, None]]}}
    for i in range(40):
        write(tmp_path / f"{i:03d}.json", doc(host=f"h{i % 7}", matrices=m))
    serial = read_results([tmp_path]).runs
    monkeypatch.setattr(reader, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(reader, "CHUNK_FILES", 6)
    parallel = read_results([tmp_path]).runs
    assert [r.source for r in parallel] == [r.source for r in serial]
    for a, b in zip(serial, parallel, strict=True):
        assert (a.host, a.headline, a.timestamp) == (b.host, b.headline, b.timestamp)
        assert (a.pages, a.placement, a.metrics) == (b.pages, b.placement, b.metrics)
        assert a.matrices["c2c"].rows == b.matrices["c2c"].rows
        assert list(a.matrices["c2c"].values)[1:3] == list(b.matrices["c2c"].values)[1:3] == [3, 4]
    # a bad file is still reported by name from a worker
    (tmp_path / "017.json").write_text("{")
    with pytest.raises(TopobindError, match="017.json: not valid JSON"):
        read_results([tmp_path])


def _square(x: int) -> int:
    if x == 13:
        raise TopobindError("13 is bad")
    return x * x


def test_fork_map_order_errors_and_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from topobind.report import parallel

    assert parallel.fork_map(_square, list(range(10))) == [x * x for x in range(10)]
    with pytest.raises(TopobindError, match="13 is bad"):
        parallel.fork_map(_square, list(range(20)))

    class NoSemaphores:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise NotImplementedError("no sem_open here")

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", NoSemaphores)
    assert parallel.fork_map(_square, list(range(10))) == [x * x for x in range(10)]
