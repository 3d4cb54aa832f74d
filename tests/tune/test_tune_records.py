"""Tune records read from the state folder are untrusted: a hand-edited, hostile, huge file,
a FIFO or a symlink to a device is one line in the unreadable list, never a traceback or a
hang; a record of the written form (an older session's) is read."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from topobind.tune import records


def _doc(**over: Any) -> dict[str, Any]:
    doc = {
        "schema": records.SCHEMA, "program": "/bin/true", "sha256": "ab", "node_type": "n1",
        "nodes": 1, "argv": ["/bin/true"], "when": "2026-11-28T10:00:00",
        "choice": {"layout": "spread", "mem": "local", "pages": "thp", "ranks": None,
                   "threads": 2},
        "winner": {"gain": 0.25},
    }  # fmt: skip
    doc.update(over)
    return doc


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOPOBIND_STATE_DIR", str(tmp_path))
    where = tmp_path / "tune"
    where.mkdir()
    return where


def test_a_written_record_is_read(folder: Path) -> None:
    (folder / "a.json").write_text(json.dumps(_doc()))
    found, bad = records.read_all()
    assert bad == []
    assert found[0].choice.words() == "--layout spread --mem local --pages thp --threads 2"
    assert found[0].gain == 0.25 and found[0].winner


@pytest.mark.parametrize(
    "text",
    [
        "[]",  # not an object
        json.dumps(_doc(nodes=float("inf"))),  # Infinity: int() overflows
        json.dumps(_doc(nodes=-3)),
        json.dumps(_doc(winner=[1])),  # 'winner' not an object
        "[" * 100_000,  # nested past the recursion limit
        json.dumps(_doc(choice=["spread"])),
        json.dumps(_doc(choice={"layout": "auto", "mem": "local", "pages": "thp"})),
        json.dumps(_doc(choice={"layout": "nosuch", "mem": "local", "pages": "thp"})),
        json.dumps(_doc(choice={"layout": "spread", "mem": "$(reboot)", "pages": "thp"})),
        json.dumps(_doc(choice={"layout": "spread", "mem": "local", "pages": "auto"})),
    ],
)
def test_a_hostile_record_is_one_line(folder: Path, text: str) -> None:
    (folder / "bad.json").write_text(text)
    (folder / "good.json").write_text(json.dumps(_doc()))
    found, bad = records.read_all()
    assert [r.path for r in found] == [str(folder / "good.json")]
    assert len(bad) == 1 and "bad.json" in bad[0] and "remove it" in bad[0]


def test_a_nan_gain_is_no_gain(folder: Path) -> None:
    (folder / "a.json").write_text(json.dumps(_doc(winner={"gain": float("nan")})))
    found, _ = records.read_all()
    assert found[0].gain is None


def test_a_fifo_or_device_is_refused_without_blocking(folder: Path) -> None:
    os.mkfifo(folder / "fifo.json")  # open() of it would wait for a writer forever
    (folder / "zero.json").symlink_to("/dev/zero")
    (folder / "big.json").write_bytes(b" " * (records.MAX_RECORD_BYTES + 1))
    (folder / "bin.json").write_bytes(b"\xff\xfe{}")
    found, bad = records.read_all()
    assert found == []
    assert sorted(line.split("'")[1].rsplit("/", 1)[1] for line in bad) == [
        "big.json",
        "bin.json",
        "fifo.json",
        "zero.json",
    ]
    assert all("remove it" in line for line in bad)


def test_every_choice_tune_offers_is_read(folder: Path) -> None:
    """A record of any layout, policy and page size tune may choose (an older session's)."""
    for i, (layout, mem, pages) in enumerate(
        [("l3-groups:2", "interleave", "2M"), ("per-numa", "none", "4k"), ("compact", "bind", "1G")]
    ):
        choice = {"layout": layout, "mem": mem, "pages": pages, "ranks": 2, "threads": None}
        (folder / f"r{i}.json").write_text(json.dumps(_doc(choice=choice)))
    found, bad = records.read_all()
    assert bad == [] and len(found) == 3


def test_layout_auto_names_the_unreadable_records_when_it_falls_back(folder: Path) -> None:
    from topobind.topo.topology import load
    from topobind.tune import auto

    (folder / "bad.json").write_text(json.dumps(_doc(choice={"layout": "auto", "mem": "local",
                                                             "pages": "thp"})))  # fmt: skip
    choice, line = auto.choose(load("synthetic:core:2 pu:1"), ["/bin/true"])
    assert choice == auto.FALLBACK
    assert "1 unreadable record" in line and "topobind tune --list" in line


def test_layout_auto_of_env_and_plan_says_no_record_in_plain_words(folder: Path) -> None:
    from topobind.topo.topology import load
    from topobind.tune import auto

    _, line = auto.choose(load("synthetic:core:2 pu:1"), None)  # env, plan: no program
    assert "no tune record on this node type" in line and "unreadable" not in line
    _, line = auto.choose(load("synthetic:core:2 pu:1"), ["/bin/true"])
    assert "no tune record for /" in line


def test_the_newest_records_are_read_when_there_are_too_many(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_RECORDS the newest are read (names are hashes: the first by name would drop
    a fresh record at random)."""
    monkeypatch.setattr(records, "MAX_RECORDS", 2)
    for age, name in [(300, "a"), (200, "b"), (100, "z")]:  # z the newest, last by name
        path = folder / f"{name}.json"
        path.write_text(json.dumps(_doc(when=f"t{age}")))
        os.utime(path, (1_700_000_000 - age, 1_700_000_000 - age))
    found, bad = records.read_all()
    assert bad == [] and sorted(r.path[-6:] for r in found) == ["b.json", "z.json"]


def test_a_record_lacking_a_field_names_it(folder: Path) -> None:
    doc = _doc()
    del doc["choice"]
    (folder / "a.json").write_text(json.dumps(doc))
    _, bad = records.read_all()
    assert "(no field 'choice'); remove it" in bad[0]
