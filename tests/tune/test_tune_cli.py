"""``topobind tune`` end to end through the real launch (rankexec, the placement probe), on
programs written here: one faster when bound to one CPU (a winner, its record, then
``topobind run/env/plan --layout auto`` using it, and stale once the program changes), one that
only sleeps (no winner), Ctrl-C (the table so far, no record), and bad input in one line."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, TOPOBIND, run_topobind

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("built_kernels")]

#: faster (20 ms) with its OpenMP threads placed (OMP_PLACES, as every candidate's launch
#: exports it) than launched plainly (100 ms)
BOUND_FASTER = """#!/bin/sh
if [ -n "$OMP_PLACES" ]; then sleep 0.02; else sleep 0.1; fi
"""


#: 0.1 to 0.5 s by its process id: too noisy to be decided within seconds


def _env(state: Path) -> dict[str, str]:
    return {**NO_SLURM, "TOPOBIND_STATE_DIR": str(state)}


def _program(tmp_path: Path, text: str, name: str = "prog") -> Path:
    prog = tmp_path / name
    prog.write_text(text)
    prog.chmod(0o755)
    return prog


def test_winner_record_and_layout_auto(tmp_path: Path) -> None:
    prog = _program(tmp_path, BOUND_FASTER)
    env = _env(tmp_path / "state")
    done = run_topobind("tune", "--layouts", "compact", "--pages", "thp", "--threads", "1",
                        "--budget", "2m",
                        "--seed", "1", "-f", "json", "--", str(prog), env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    win = doc["winner"]
    assert win is not None and (win["layout"], win["ranks"], win["threads"]) == ("compact", 1, 1)
    assert win["ci"][0] >= 0.03 and win["gain"] > 1  # about 5x: 100 ms against 20 ms
    names = [c["name"] for c in doc["candidates"]]
    assert names == ["baseline", "compact 1x1"]
    assert all(len(c["runs"]) >= 5 for c in doc["candidates"])
    assert doc["candidates"][1]["verified"].startswith("verified: 1 thread")
    assert "tune: [" in done.stderr  # progress on stderr
    listed = run_topobind("tune", "--list", env=env)
    assert str(prog) in listed.stdout and "--layout compact" in listed.stdout
    used = run_topobind("run", "--layout", "auto", "--", str(prog), env=env)
    assert used.returncode == 0, used.stderr
    assert f"tune record {doc['record']}" in used.stderr
    assert "--layout compact --mem local --pages thp --ranks 1 --threads 1" in used.stderr
    env_out = run_topobind("env", "--layout", "auto", env=env)
    assert "tune record" in env_out.stderr and "OMP_NUM_THREADS=1" in env_out.stdout
    text = run_topobind("tune", "--layouts", "compact", "--pages", "thp", "--threads", "1",
                        "--budget", "1m", "--", str(prog), env=env)  # fmt: skip
    assert "winner: compact 1x1" in text.stdout, text.stdout
    job = text.stdout.split("job script:\n", 1)[1]
    assert job.startswith(f"  topobind run --layout compact --mem local --pages thp --ranks 1 "
                          f"--threads 1 -- {prog}\n")  # fmt: skip
    assert "  export OMP_PLACES='{0}'\n" in job and f"\n  {prog}\n" in job  # without topobind
    prog.write_text(BOUND_FASTER + "# changed\n")
    stale = run_topobind("run", "--layout", "auto", "--", str(prog), env=env)
    assert "is stale" in stale.stderr and "compact" in stale.stderr


def test_a_program_that_only_sleeps_has_no_winner(tmp_path: Path) -> None:
    env = _env(tmp_path / "state")
    done = run_topobind("tune", "--layouts", "compact,spread", "--budget", "90s", "-f", "json",
                        "--", "sleep", "0.03", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["winner"] is None and doc["verdict"] in ("no-difference", "undecided")
    assert not any(str(c["dropped"]).startswith("worse") for c in doc["candidates"])
    text = run_topobind("tune", "--layouts", "compact", "--budget", "60s", "--", "sleep",
                        "0.03", env=env)  # fmt: skip
    said = text.stdout
    assert "no difference: " in said or "undecided after " in said, said
    assert "winner" not in said


def test_ctrl_c_prints_the_table_so_far_and_writes_no_record(tmp_path: Path) -> None:
    """Ctrl-C once the first counted run is in: each run takes 1 s, so no session can be
    decided by then (5 counted runs a candidate at least) however fast the machine (a fixed
    sleep before the signal lost the race to a session decided in 12 short runs)."""
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [TOPOBIND, "tune", "--layouts", "compact", "--", "sleep", "1"],
        env=_env(state), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    said = []
    assert proc.stderr is not None
    for line in proc.stderr:  # progress lines, one a run
        said.append(line)
        if ": run 1: " in line:
            break
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=60)
    err = "".join(said) + rest
    assert proc.returncode == 130, err
    assert out.startswith("candidate ") and "interrupted (Ctrl-C)" in out
    assert "no record written" in out and not list(state.glob("tune/*.json"))


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["--budget", "0"], 2, "argument --budget: '0': must be more than 0"),
        (["--budget", "nan"], 2, "is not a duration"),
        (["--budget", "8d"], 2, "at most 7 days"),
        (["--budget", "-1m"], 2, "--budget"),
        (["--budget", "1M"], 2, "is not a duration"),
        (["--pages", ""], 2, "empty entry"),
        (["--mem", "local,nosuch"], 2, "unknown entry 'nosuch'"),
        (["--layouts", "nosuch"], 2, "unknown layout 'nosuch'"),
        (["--metric", "no group"], 2, "has no group"),
        (["--maximize"], 2, "--maximize needs --metric"),
    ],
)
def test_bad_input_is_one_line(args: list[str], status: int, says: str) -> None:
    done = run_topobind("tune", *args, "--", "true", env=NO_SLURM)
    assert done.returncode == status
    assert says in done.stderr and len(done.stderr.strip().splitlines()) <= 3  # usage + error


def test_programs_that_cannot_run_or_always_fail(tmp_path: Path) -> None:
    env = _env(tmp_path / "state")
    missing = run_topobind("tune", "--", str(tmp_path / "nosuch"), env=env)
    assert missing.returncode == 127 and missing.stderr.count("topobind: error:") == 1
    fails = run_topobind("tune", "--layouts", "compact", "--", "false", env=env)
    assert fails.returncode == 2
    assert "no run counted" in fails.stderr and "exit status 1" in fails.stderr
    never = run_topobind("tune", "--layouts", "compact", "--metric", "rate: ([0-9]+)", "--",
                         "echo", "hello", env=env)  # fmt: skip
    assert never.returncode == 2 and "no match for --metric" in never.stderr
    assert not list((tmp_path / "state").glob("tune/*.json"))


def test_layout_auto_falls_back_when_the_node_cannot_honour_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record this node cannot take now (per-gpu on a node without GPUs; a hugepage pool
    used up is the same path): one line and compact, never a failed job."""
    import os

    from topobind.topo.topology import load
    from topobind.tune import records

    env = _env(tmp_path / "state")
    prog = os.path.realpath("/bin/true")
    topo = load("live")
    if topo.devices.gpus:
        pytest.skip("this node has GPUs: per-gpu plans here")
    monkeypatch.setenv("TOPOBIND_STATE_DIR", env["TOPOBIND_STATE_DIR"])
    records.write({
        "schema": records.SCHEMA, "program": prog, "argv": [prog],
        "sha256": records.program_hash(prog), "node_type": records.node_type(topo),
        "node": "", "nodes": 1, "when": "2026-12-06T08:00:00+00:00", "verdict": "winner",
        "choice": {"layout": "per-gpu", "mem": "local", "pages": "thp", "ranks": None,
                   "threads": None},
        "winner": {"candidate": "per-gpu"}, "gains": {"baseline": [0.2, 0.1, 0.3]},
    })  # fmt: skip
    done = run_topobind("run", "--layout", "auto", "--", prog, env=env)
    assert done.returncode == 0, done.stderr
    assert "--layout auto: this node cannot honour the record's choice now" in done.stderr
    assert "compact with your options" in done.stderr
