"""``validation.validate`` (issue 28 item 4): the per-partition loop and the failure decision
live in checks/, the command prints; run here with a fake ``reframe`` that writes a report,
so validate's table and its exit status come from that report alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topobind.checks import validation
from topobind.cli.main import main

SITE = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: default, scheduler: local, launcher: local}\n"
    "  - {name: other, scheduler: local, launcher: local}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)
FAKE = """#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --report-file ]; then mkdir -p "$(dirname "$2")"; cp {report} "$2"; fi
  shift
done
echo "[       OK ] (1/2) StreamCheck %layout=compact /0283914c @fleet:default+builtin"
"""


def _case(name: str, result: str, value: float | None, ref: float = 0.0) -> dict[str, object]:
    lower = None if ref == 0 else -0.1
    return {
        "display_name": name, "name": name, "system": "fleet", "partition": "default",
        "result": result, "fail_phase": "performance" if result == "fail" else None,
        "perfvalues": {} if value is None else {
            "fleet:default:triad": [value, ref, lower, None, "MB/s",
                                    "fail" if result == "fail" else "pass"]},
    }  # fmt: skip


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sites = tmp_path / "sites" / "fleet"
    sites.mkdir(parents=True)
    (sites / "site.yaml").write_text(SITE)
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(sites.parent))
    report = tmp_path / "the-report.json"
    fake = tmp_path / "reframe"
    fake.write_text(FAKE.replace("{report}", str(report)))
    fake.chmod(0o755)
    monkeypatch.setattr(validation, "reframe_exe", lambda: [str(fake)])
    return report


def _report(path: Path, *cases: dict[str, object]) -> None:
    path.write_text(json.dumps({"runs": [{"testcases": list(cases)}]}))


def test_validate_returns_one_outcome_over_the_partitions(fleet: Path, tmp_path: Path) -> None:
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0),
            _case("LatencyCheck", "fail", 200.0, 100.0))  # fmt: skip
    opts = validation.Options(results=tmp_path / "res")
    from topobind.checks import sites

    seen: list[str] = []
    out = validation.validate(sites.load_site("fleet"), ["default", "other"], opts,
                              lambda one: seen.append(one.partition))  # fmt: skip
    assert seen == ["default", "other"]
    assert [(r.check, r.variant, r.result) for r in out.partitions[0].rows] == [
        ("StreamCheck", "compact", "PASS (no ref)"), ("LatencyCheck", "local", "FAIL")]  # fmt: skip
    assert out.status == 1


def test_the_command_prints_the_outcome_and_its_status(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0))
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "1 passed, 0 failed, 0 skipped" in out
    assert "0 of 1 figures compared with a reference" in out
    assert main(["validate", "--site", "fleet", "--strict", "--results", str(tmp_path)]) == 1


def test_a_hostile_report_from_reframe_is_one_line(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.write_text('{"runs": [{"testcases": [{"display_name": "StreamCheck", '
                     '"perfvalues": {"t": [true, 0, null, null, "MB/s"]}}]}]}')  # fmt: skip
    status = main(["validate", "--site", "fleet", "--results", str(tmp_path / "res")])
    err = capsys.readouterr().err
    assert status == 2
    (line,) = [ln for ln in err.splitlines() if ln.startswith("topobind: error:")]
    assert 'perfvalues["t"][0]: must be a number, got true' in line


def test_each_node_sessions_poll_slurm_often_unless_the_user_says(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--each-node's sessions give ReFrame RFM_POLL_RATE_DECAY=0.02 (its jobs run one after
    another: a finished job unnoticed is time lost); a value the user set wins."""
    from topobind.checks import acceptance, sites

    seen = tmp_path / "decay"
    fake = tmp_path / "reframe"  # the fixture's fake, rewritten to record the variable
    record = f'#!/bin/sh\necho "${{RFM_POLL_RATE_DECAY-unset}}" >> {seen}\n'
    fake.write_text(FAKE.replace("{report}", str(fleet)).replace("#!/bin/sh\n", record))
    _report(fleet, _case("StreamCheck %layout=compact", "pass", 100.0))
    site = sites.load_site("fleet")
    req = acceptance.Request(partition="default", tags="quick", names=None, setvars={},
                             quiet=True)  # fmt: skip
    monkeypatch.delenv("RFM_POLL_RATE_DECAY", raising=False)
    acceptance._session(site, req, {"n1": "idle"}, ["n1"], 1, tmp_path / "r", False, "x")
    validation.run_reframe(site, "default", "quick", None, {}, "async", tmp_path / "r", False)
    monkeypatch.setenv("RFM_POLL_RATE_DECAY", "0.5")
    acceptance._session(site, req, {"n1": "idle"}, ["n1"], 1, tmp_path / "r", False, "x")
    assert seen.read_text().split() == ["0.02", "unset", "0.5"]


SLURM_SITE = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: batch, scheduler: slurm, launcher: srun, access: ['-p b']}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)


def _runs(values: dict[str, float], runs: int) -> dict[str, object]:
    def tc(node: str, v: float) -> dict[str, object]:
        name = f"StreamCheck %layout=compact %.part=fleet:batch %.nid={node}"
        return {"display_name": name, "name": name, "system": "fleet", "partition": "batch",
                "result": "pass", "fail_phase": None, "job_nodelist": [node],
                "perfvalues": {"fleet:batch:triad": [v, 0, None, None, "MB/s", "pass"]},
                }  # fmt: skip

    return {"runs": [{"testcases": [tc(n, v) for n, v in values.items()]} for _ in range(runs)]}


@pytest.mark.parametrize("again, sessions", [(100.0, 1), (60.0, 2)])
def test_confirm_stops_after_its_look_only_when_the_node_cannot_come_out_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, again: float, sessions: int
) -> None:
    """accept(): node3 flagged in the first pass; when its first 3 confirm runs are at the
    partner's level the confirmation stops there (one confirm session, a note, node3 ok and
    unnamed); when they are still slow, the rest of the runs follow in a second session."""
    from topobind.checks import acceptance, sites, slurm

    (tmp_path / "sites" / "fleet").mkdir(parents=True)
    (tmp_path / "sites" / "fleet" / "site.yaml").write_text(SLURM_SITE)
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(tmp_path / "sites"))
    first, look = tmp_path / "first.json", tmp_path / "look.json"
    first.write_text(json.dumps(_runs({"node1": 100.0, "node2": 101.0, "node3": 60.0}, 3)))
    look.write_text(json.dumps(_runs({"node1": 100.0, "node2": 101.0, "node3": again}, 3)))
    calls = tmp_path / "calls"
    fake = tmp_path / "reframe"
    fake.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  if [ "$1" = --report-file ]; then\n'
        f'    case "$2" in *each-node*) src={first};; *) src={look};; esac\n'
        f'    mkdir -p "$(dirname "$2")"; cp "$src" "$2"; echo "$2" >> {calls}\n'
        "  fi\n  shift\ndone\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(validation, "reframe_exe", lambda: [str(fake)])
    nodes = dict.fromkeys(["node1", "node2", "node3"], "idle")
    monkeypatch.setattr(slurm, "partition_nodes", lambda access: nodes)
    monkeypatch.setattr(acceptance, "conformance_step", lambda site, access, nodes: ({}, []))
    req = acceptance.Request(partition="batch", tags="quick", names=None, setvars={},
                             confirm=True, quiet=True)  # fmt: skip
    out = acceptance.accept(sites.load_site("fleet"), req, tmp_path / "res", False)
    confirms = [c for c in calls.read_text().split() if "/confirm-" in c]
    assert len(confirms) == sessions and len(out.reports) == 1 + sessions
    assert out.confirm_runs == (3 if sessions == 1 else 7)  # what 'first pass flagged' shows
    node3 = next(v for v in out.verdicts if v.node == "node3")
    stopped = [n for n in out.notes if n.startswith("--confirm stopped after 3 of 7 runs")]
    if sessions == 1:
        assert node3.status == "ok" and node3.confirmed.startswith("not confirmed")
        assert stopped and "node3 cannot come out SLOW" in stopped[0]
        assert acceptance.bad_nodes_line(out.verdicts) == "bad nodes: none"
    else:
        assert node3.status == "SLOW" and node3.confirmed.startswith("confirmed against")
        assert not stopped
