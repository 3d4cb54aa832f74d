"""`topobind report -o DIR` replaces only a directory topobind wrote (issue 22 item 1).

Every case runs the real command on a small generated fleet; a refusal must name DIR, say
how to proceed, exit 2 and leave every file where it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run_topobind as topobind

pytestmark = pytest.mark.slow

MANIFEST = ".topobind-report"


def tree(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (hidden ones too) with its bytes."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def refused(proc: subprocess.CompletedProcess[str], outdir: str, fix: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"topobind: error: {outdir}: "), lines[0]
    assert "refusing to replace it" in lines[0] and fix in lines[0], lines[0]


def test_project_with_a_report_json_is_kept(small_fleet: Path, tmp_path: Path) -> None:
    """The issue's case: a project directory that happens to hold a report.json."""
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "report.json").write_text('{"coverage":93}\n')
    (proj / "src" / "main.c").write_text("x\n")
    before = tree(proj)
    proc = topobind("report", str(small_fleet), "-o", str(proj))
    refused(proc, str(proj), "choose another -o")
    assert tree(proj) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]  # no hidden leftovers


def test_current_directory_is_never_replaced(small_fleet: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = topobind("report", str(small_fleet), "-o", str(work / "r"))
    assert first.returncode == 0, first.stderr
    here = work / "r"  # even a genuine report directory, while it is the working directory
    before = tree(here)
    refused(topobind("report", str(small_fleet), "-o", ".", cwd=here), ".", "choose another -o")
    refused(topobind("report", str(small_fleet), "-o", "..", cwd=here), "..", "choose another -o")
    assert tree(here) == before
    assert sorted(p.name for p in work.iterdir()) == ["r"]


def test_a_file_added_to_an_old_report_is_kept(small_fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert topobind("report", str(small_fleet), "-o", str(out)).returncode == 0
    (out / "notes.txt").write_text("my notes on this report\n")
    before = tree(out)
    proc = topobind("report", str(small_fleet), "-o", str(out))
    refused(proc, str(out), "move them out")
    assert "notes.txt" in proc.stderr
    assert tree(out) == before
    # a subdirectory is not the report's either
    (out / "notes.txt").unlink()
    (out / "sub").mkdir()
    refused(topobind("report", str(small_fleet), "-o", str(out)), str(out), "move them out")
    assert (out / "sub").is_dir()


def test_report_of_an_older_topobind_is_refused_with_the_way_on(
    small_fleet: Path, tmp_path: Path
) -> None:
    out = tmp_path / "old"
    assert topobind("report", str(small_fleet), "-o", str(out)).returncode == 0
    (out / MANIFEST).unlink()  # what the code before the manifest wrote
    before = tree(out)
    proc = topobind("report", str(small_fleet), "-o", str(out))
    refused(proc, str(out), f"rm -r {out}")
    assert "older topobind" in proc.stderr
    assert tree(out) == before


def test_own_report_is_replaced_whole(small_fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert topobind("report", str(small_fleet), "-o", str(out)).returncode == 0
    listed = (out / MANIFEST).read_text().splitlines()
    assert listed[0] == "topobind-report 1"
    names = sorted(p.name for p in out.iterdir())
    assert sorted([*[n for n in listed[1:] if not n.startswith("#")], MANIFEST]) == names
    (out / "stale.png").write_bytes(b"old picture")  # listed by an older run of the same tool
    (out / MANIFEST).write_text((out / MANIFEST).read_text() + "stale.png\n")
    inode = os.stat(out).st_ino
    proc = topobind("report", str(small_fleet), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == names  # stale.png went with its report
    assert os.stat(out).st_ino != inode  # a new directory, swapped in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_empty_directory_and_symlink(small_fleet: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert topobind("report", str(small_fleet), "-o", str(empty)).returncode == 0
    assert (empty / MANIFEST).is_file()
    # DIR given through a symbolic link: the report replaces the directory it points to
    link = tmp_path / "link"
    link.symlink_to(empty)
    assert topobind("report", str(small_fleet), "-o", str(link)).returncode == 0
    assert link.is_symlink() and (link / "report.json").is_file()


def test_a_hostile_manifest_is_refused_in_one_line(small_fleet: Path, tmp_path: Path) -> None:
    """Issue 31 item 8: a manifest line with a NUL byte gave a traceback and left a hidden
    .DIR.old-* behind; a manifest over 1 MiB was called "no manifest"."""
    out = tmp_path / "r"
    assert topobind("report", str(small_fleet), "-o", str(out)).returncode == 0
    text = (out / MANIFEST).read_text()
    for manifest, says in (
        (text + "a\0b\n", "which no file of the directory can be named"),
        (text + "..\n", "which no file of the directory can be named"),
        (text + "#" * (1 << 20) + "\n", "over the 1 MiB of one"),
    ):
        (out / MANIFEST).write_text(manifest)
        before = tree(out)
        proc = topobind("report", str(small_fleet), "-o", str(out))
        refused(proc, str(out), "choose another -o")
        assert f"its {MANIFEST} manifest " in proc.stderr and says in proc.stderr
        assert "no .topobind-report" not in proc.stderr
        assert tree(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no hidden leftovers
