"""Property-based tests (Hypothesis) through the real programs: step files through
``rankstep/bin/rankexec`` itself, and hostile topologies, synthetic descriptions, Slurm
variables and result files through the ``topobind`` command.

Property: the command succeeds with a result that agrees with the input, or exits non-zero
with one error line; never a traceback, a hang (the subprocess timeout) or more memory than
:data:`fuzzing.MEMORY_BYTES`. Settings and budget: tests/fuzzing.py. Each example starts a
process, so these run fewer examples than tests/cli/test_fuzz_inputs.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, TOPOBIND
from fuzzing import HANG_S, fuzz, limit_memory, one_error_line
from hypothesis import given
from hypothesis import strategies as st
from paths import RANKSTEP_BIN
from test_fuzz_inputs import (
    GOOD_RESULT,
    hostile_text,
    json_value,
    level,
    mutated_xml,
    slurm_values,
)

from topobind.topo.topology import parse_list

pytestmark = pytest.mark.slow

RANKEXEC = RANKSTEP_BIN / "rankexec"
CPUS = sorted(os.sched_getaffinity(0))


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        errors="replace",
        env=env,
        cwd=cwd,
        timeout=HANG_S,
        preexec_fn=limit_memory,
    )


def ok_or_one_error(done: subprocess.CompletedProcess[str]) -> bool:
    """True when the command succeeded; else it must have refused with one line."""
    if done.returncode == 0:
        assert "Traceback" not in done.stderr, done.stderr
        return True
    assert done.returncode > 0, f"killed by signal {-done.returncode}: {done.stderr}"
    one_error_line(done.stderr)
    return False


# --------------------------------------------------------------------------- rankexec
VAR_NAME = st.sampled_from(["A", "B", "OMP_PLACES", "X_1", "=", "", "A B"])
VAR_VALUE = st.text(
    alphabet=st.characters(blacklist_characters="\t\n\x00", blacklist_categories=["Cs"]),
    max_size=12,
)
CPU_LIST = st.one_of(
    st.lists(st.sampled_from(CPUS), min_size=1, unique=True).map(
        lambda cs: ",".join(map(str, sorted(cs)))
    ),
    st.sampled_from(["", "0-", "-1", "1-0", "99999999", "0,99", "abc", "0-1000000", "²"]),
    hostile_text.map(lambda t: t.replace("\t", " ").replace("\n", " ")),
)


@st.composite
def step_line(draw: st.DrawFn) -> str:
    rank = draw(st.sampled_from(["0", "1", "-1", "x", "", "00", "99999999999999999999"]))
    fields = [rank]
    if draw(st.booleans()):
        fields.append("%cpus=" + draw(CPU_LIST))
    for _ in range(draw(st.integers(0, 3))):
        fields.append(f"{draw(VAR_NAME)}={draw(VAR_VALUE)}")
    if draw(st.integers(0, 9)) == 0:
        fields.append(draw(hostile_text).replace("\n", " "))
    return "\t".join(fields)


@st.composite
def step_file(draw: st.DrawFn) -> str:
    header = draw(
        st.sampled_from(
            ["topobind-rankexec 1", "topobind-rankexec 2", "topobind-rankexec 3", "", "#x"]
        )
    )
    lines = [header]
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["line", "line", "group", "comment", "directive"]))
        if kind == "line":
            lines.append(draw(step_line()))
        elif kind == "group":
            lines.append("@" + draw(st.sampled_from(["*", "other", "", "a,b", "*,x"])))
        elif kind == "comment":
            lines.append("# " + draw(hostile_text).replace("\n", " "))
        else:
            lines.append("%" + draw(st.sampled_from(["sample", "cpus=0", "x y z", ""])))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


@pytest.mark.skipif(not RANKEXEC.exists(), reason="run 'make kernels' first")
@fuzz(60)
@given(step_file(), st.sampled_from([None, "0", "1", "x", "-3", "²"]))
def test_rankexec_step_files(
    tmp_path_factory: pytest.TempPathFactory, text: str, local: str | None
) -> None:
    where = tmp_path_factory.mktemp("step")
    step = where / "rankexec.txt"
    step.write_text(text)
    step.chmod(0o600)
    env = dict(NO_SLURM)
    if local is not None:
        env["SLURM_LOCALID"] = local
    program = ["sh", "-c", 'grep Cpus_allowed_list /proc/self/status; env -0 > "$0"', "env.bin"]
    done = run([str(RANKEXEC), str(step), "--", *program], env, where)
    if done.returncode == 125:
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("topobind rankexec: error:"), done.stderr
        return
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert text.startswith(
        ("topobind-rankexec 1\n", "topobind-rankexec 2\n", "topobind-rankexec 3\n")
    )
    exported = dict(
        item.split("=", 1)
        for item in (where / "env.bin").read_bytes().decode().split("\0")
        if "=" in item
    )
    rank = int(local) if local and local.isascii() and local.isdigit() else 0
    chosen = _chosen_line(text, rank)
    assert chosen is not None, "ran without a line for its rank"
    binds = [f[6:] for f in chosen.split("\t")[1:] if f.startswith("%cpus=")]
    if binds:  # bound where the (last) %cpus= says, exactly
        allowed = done.stdout.split(":", 1)[1].strip()
        assert parse_list(allowed) == parse_list(binds[-1]), (allowed, binds)
    # the last value of each variable wins, as setenv does in order
    want: dict[str, str] = {}
    for field in chosen.split("\t")[1:]:
        if field and not field.startswith("%cpus="):  # (an empty field: two tabs, nothing)
            name, _, value = field.partition("=")
            want[name] = value
    for name, value in want.items():
        assert exported.get(name) == value, (name, value, exported.get(name))


def _chosen_line(text: str, rank: int) -> str | None:
    """The line rankexec must pick: this host has no group of its own in these files (host
    names drawn are 'other', 'a', 'b', 'x'), so rank's one line under '@*' or before any
    group (None: no line, or two, which rankexec refuses)."""
    in_any, found = True, []
    for line in text.split("\n")[1:]:
        if line.startswith("@"):
            in_any = line[1:] == "*"
        elif line and line[0] not in "#%" and in_any:
            number = line.split("\t", 1)[0]
            if number.isdigit() and int(number) == rank:
                found.append(line)
    return found[0] if len(found) == 1 else None


# --------------------------------------------------------------------------- topobind
@fuzz(12)
@given(mutated_xml(), st.sampled_from(["show", "plan-compact", "plan-per-gpu", "plan-json"]))
def test_topobind_on_mutated_xml(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, str], command: str
) -> None:
    where = tmp_path_factory.mktemp("xml")
    xml = where / case[0]
    xml.write_text(case[1])
    args = {
        "show": ["show"],
        "plan-compact": ["plan", "-l", "compact"],
        "plan-per-gpu": ["plan", "-l", "per-gpu"],
        "plan-json": ["plan", "-l", "per-numa", "-f", "json"],
    }[command]
    done = run([TOPOBIND, *args, "-t", str(xml)], NO_SLURM, where)
    if not ok_or_one_error(done):
        assert done.stdout == ""
        assert sorted(p.name for p in where.iterdir()) == [xml.name], "a file left behind"


@fuzz(10)
@given(st.lists(level, min_size=1, max_size=5).map(" ".join))
def test_topobind_on_synthetic_descriptions(
    tmp_path_factory: pytest.TempPathFactory, description: str
) -> None:
    where = tmp_path_factory.mktemp("synthetic")
    done = run([TOPOBIND, "show", "-t", "synthetic:" + description], NO_SLURM, where)
    ok_or_one_error(done)


@fuzz(12)
@given(
    st.dictionaries(
        st.sampled_from(["SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"]),
        slurm_values,
        min_size=1,
    ),
    st.sampled_from(["env", "plan"]),
)
def test_topobind_under_hostile_slurm_variables(
    tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], command: str
) -> None:
    where = tmp_path_factory.mktemp("slurm")
    env = {k: v.replace("\0", "") for k, v in env.items()}
    argv = [TOPOBIND, command, "-t", "betzy-epyc7742", "-l", "compact"]
    done = run(argv, {**NO_SLURM, "SLURM_JOB_ID": "1", **env}, where)
    ok_or_one_error(done)


@pytest.mark.skipif(GOOD_RESULT is None, reason="no result document")
@fuzz(6)
@given(st.sampled_from(["headline", "metrics", "host", "timestamp", "pages", "valid"]), json_value)
def test_topobind_report_on_a_hostile_result(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: object
) -> None:
    where = tmp_path_factory.mktemp("report")
    results = where / "results"
    results.mkdir()
    (results / "good.json").write_text(json.dumps(GOOD_RESULT))
    (results / "bad.json").write_text(json.dumps({**GOOD_RESULT, key: value}))
    done = run([TOPOBIND, "report", str(results), "-o", str(where / "out")], NO_SLURM, where)
    if not ok_or_one_error(done):
        assert not (where / "out").exists()
