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
        "winner": {"candidate": "spread 1x2"}, "verdict": "winner",
        "gains": {"baseline": [0.25, 0.1, 0.4], "runner-up": [0.1, 0.04, None]},
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
    assert found[0].gains["baseline"] == (0.25, 0.1, 0.4) and found[0].winner


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


@pytest.mark.parametrize("gain", [-5.0, 101.0, float("nan"), float("inf"), "0.2", True, None])
def test_a_gain_out_of_range_or_not_finite_is_a_corrupt_record(folder: Path, gain: object) -> None:
    (folder / "a.json").write_text(json.dumps(_doc(gains={"baseline": [gain, 0.1, 0.4]})))
    found, bad = records.read_all()
    assert found == [] and len(bad) == 1 and "remove it" in bad[0]


def test_control_characters_of_a_record_are_escaped() -> None:
    shown = records.shown("/bin/x\x1b]0;owned\x07\n")
    assert "\x1b" not in shown and "\x07" not in shown and "\n" not in shown
    assert shown == "/bin/x\\x1b]0;owned\\x07\\n"


def test_lookup_reads_one_record_through_the_index(folder: Path) -> None:
    doc = _doc(program="/bin/true", node_type="n1", nodes=1, argv=["/bin/true", "-x"])
    path = records.write(doc)
    for i in range(50):  # other programs' records: never read by the lookup
        records.write(_doc(program=f"/bin/p{i}", node_type="n1", nodes=1, argv=[f"/bin/p{i}"]))
    rec, why = records.lookup("/bin/true", ["/bin/true", "-x"], "n1", 1)
    assert rec is not None and rec.path == path and why is None
    rec, why = records.lookup("/bin/true", ["/bin/true", "-y"], "n1", 1)  # the newest
    assert rec is not None and rec.path == path
    assert records.lookup("/bin/true", None, "n2", 1) == (None, None)  # another node type
    rec, why = records.lookup(None, None, "n1", 1)  # no program named: 51 programs here
    assert rec is None and str(why).startswith("many:")


def test_a_record_of_another_user_is_one_line(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records.write(_doc())
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    rec, why = records.lookup("/bin/true", ["/bin/true"], "n1", 1)
    assert rec is None and "another user" in str(why) and "\n" not in str(why)


def test_an_unwritable_state_folder_is_found_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from topobind.errors import TopobindError

    monkeypatch.setenv("TOPOBIND_STATE_DIR", str(tmp_path / "no" / "tune"))
    (tmp_path / "no").mkdir(mode=0o500)
    if os.access(tmp_path / "no", os.W_OK):
        pytest.skip("root writes anywhere")
    with pytest.raises(TopobindError, match="not writable .* TOPOBIND_STATE_DIR"):
        records.check_writable()


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


def test_layout_auto_names_the_unreadable_record_when_it_falls_back(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from topobind.topo.topology import load
    from topobind.tune import auto

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    topo = load("synthetic:core:2 pu:1")
    prog = os.path.realpath("/bin/true")
    path = records.write(_doc(program=prog, argv=[prog], node_type=records.node_type(topo)))
    Path(path).write_text(json.dumps(_doc(choice={"layout": "auto", "mem": "local",
                                                  "pages": "thp"})))  # fmt: skip
    choice, line = auto.choose(topo, [prog])
    assert choice == auto.FALLBACK
    assert path in line and "not a tune record" in line and "remove it" in line


def test_an_older_topobind_record_is_named_and_not_used(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topobind.tune/1 record (claims tested at 95 % every round, issue 46): not used by
    --layout auto, and said so with the fix, in --list's unreadable lines too."""
    from topobind.topo.topology import load
    from topobind.tune import auto

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    topo = load("synthetic:core:2 pu:1")
    prog = os.path.realpath("/bin/true")
    path = records.write(_doc(program=prog, argv=[prog], node_type=records.node_type(topo)))
    Path(path).write_text(json.dumps(_doc(schema="topobind.tune/1", program=prog, argv=[prog],
                                          node_type=records.node_type(topo))))  # fmt: skip
    choice, line = auto.choose(topo, [prog])
    assert choice == auto.FALLBACK
    assert f"{path}: a topobind.tune/1 record of an older topobind, not used" in line
    assert "run topobind tune again" in line
    found, bad = records.read_all()
    assert found == [] and bad == [
        f"{path}: a topobind.tune/1 record of an older topobind, not used (its claims were not "
        "held at one error rate over the session); run topobind tune again"
    ]
    (folder / "x.json").write_text(json.dumps(_doc(schema="topobind.tune/9")))  # not known
    _, bad = records.read_all()
    assert any("x.json: not a tune record (schema is not topobind.tune/2)" in b for b in bad)


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


def test_layout_auto_keeps_the_users_options_and_says_which() -> None:
    from topobind.tune import auto

    choice = records.Choice("spread", "local", "2M", 1, 2)
    values, said = auto.apply(choice, {"pages": "4k", "mem": "none", "ranks": 2},
                              {"pages", "mem", "ranks"})  # fmt: skip
    assert values == {"threads": 2}  # only what the user did not give
    assert said == ("; your --mem none (record: local), --pages 4k (record: 2M), "
                    "--ranks 2 (record: 1) kept")  # fmt: skip
    assert auto.apply(choice, {}, set()) == ({"mem": "local", "pages": "2M", "ranks": 1,
                                              "threads": 2}, "")  # fmt: skip


def test_a_choice_the_node_cannot_honour_now_is_named() -> None:
    from topobind.plan import request
    from topobind.tune import auto

    # 1 TiB a rank on 2 MiB pages: no pool of this machine holds it (or no pool at all)
    req = request.parse("compact", topology="live", pages="2M", pages_min=1 << 40)
    why = auto.honoured(req, None)
    assert why is not None and "--pages 2M" in why and "\n" not in why
    assert auto.honoured(req._replace(pages="thp", pages_min=None), None) is None
