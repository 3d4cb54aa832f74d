"""scripts/bench-table.py: the table of docs/explanation/performance.md, written from
results/bench/*.json (issue 48 item 4): one row per figure it knows, the machine named, a
result it has no row for named under the table, bad input refused in one line, and only
the page's part between its markers replaced."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from paths import REPO


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_table", REPO / "scripts/bench-table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RANKSTEP = {
    "benchmark": "rankstep", "repeat": 300, "loadavg_1min": 1.5, "target_ms": 2.0,
    "target_fs_calls": 30,
    "ways": {"bare": {"wall": {"median_ms": 0.65}}, "rankexec": {"wall": {"median_ms": 1.34}}},
    "rankexec_added": {"ms_per_rank": 0.69, "fs_calls_per_rank": 6, "meets_target": True},
}  # fmt: skip


def test_rows_from_the_results_and_the_machine_named(tmp_path: Path) -> None:
    (tmp_path / "rankstep.json").write_text(json.dumps(RANKSTEP))
    (tmp_path / "newbench.json").write_text("{}")
    text = _script().table(tmp_path)
    assert text.startswith("Machine: ") and "CPUs" in text.splitlines()[0]
    (row,) = [ln for ln in text.splitlines() if ln.startswith("| per-rank step")]
    assert "+0.69 ms, +6 file-system calls" in row and "| met | 1.5 |" in row
    assert "Results without a row here: newbench.json." in text


def test_a_broken_result_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "rankstep.json").write_text('{"benchmark": ')
    with pytest.raises(SystemExit) as exc:
        _script().table(tmp_path)
    assert "rankstep.json" in str(exc.value) and "rerun" in str(exc.value)


def test_write_replaces_only_the_part_between_the_markers(tmp_path: Path) -> None:
    mod = _script()
    page = tmp_path / "p.md"
    page.write_text(f"before\n{mod.START}\nold table\n{mod.END}\nafter\n")
    mod.write(page, "new table\n")
    assert page.read_text() == f"before\n{mod.START}\nnew table\n{mod.END}\nafter\n"
    page.write_text("no markers\n")
    with pytest.raises(SystemExit):
        mod.write(page, "x\n")
    assert page.read_text() == "no markers\n"


def test_the_page_has_the_markers_and_is_in_the_nav() -> None:
    mod = _script()
    page = (REPO / "docs" / "explanation" / "performance.md").read_text()
    assert mod.START in page and mod.END in page
    assert "scripts/bench-table.py" in page and "Machine: " in page
    assert "explanation/performance.md" in (REPO / "mkdocs.yml").read_text()
