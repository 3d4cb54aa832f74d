"""topobind.tune.candidates, records and auto on XML topologies (no subprocess): the lists
given, the defaults of a node, candidates that plan the same made one, bad lists in one line,
the state folder, records written and read back, --layout auto's choice and its stale case."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from paths import TOPOLOGIES

from topobind.errors import TopobindError
from topobind.plan import request
from topobind.topo.topology import load_xml
from topobind.tune import auto, candidates, launching, records
from topobind.tune.candidates import Choices
from topobind.tune.launching import compile_metric, figure

ONE_NUMA = TOPOLOGIES / "2intel64-1n2c-numaroot.v1tov2.xml"
FOUR_NUMA = TOPOLOGIES / "16amd64-8n2c-cpusets.xml"


def _base(path: object) -> request.PlanRequest:
    return request.parse("compact", topology=str(path))


def test_same_plan_is_one_candidate_and_baseline_first() -> None:
    topo = load_xml(str(ONE_NUMA))
    planned, _ = candidates.candidates(
        topo, Choices(layouts=("compact", "spread"), mems=("local", "bind"), pages=("thp",),
                      ranks=1, threads=1), _base(ONE_NUMA))  # fmt: skip
    names = [p.candidate.name for p in planned]
    assert names[0] == "baseline" and planned[0].plan is None
    # one rank, one thread: compact and spread put it on the same PU; on one NUMA node
    # local is bind: one candidate for the four
    assert names == ["baseline", "compact 1x1"]


def test_default_mems_place_differently_only_on_several_numa_nodes() -> None:
    assert candidates.default_mems(load_xml(str(ONE_NUMA))) == ("local",)
    assert "interleave" in candidates.default_mems(load_xml(str(FOUR_NUMA)))


def test_splits_of_cpus() -> None:
    assert candidates.splits(6) == [(1, 6), (2, 3), (3, 2), (6, 1)]


@pytest.mark.parametrize(
    ("text", "option", "known", "match"),
    [
        ("", "--pages", ("4k", "2M"), "empty entry"),
        ("4k,,2M", "--pages", ("4k", "2M"), "empty entry"),
        ("4k,3M", "--pages", ("4k", "2M"), "unknown entry '3M'"),
        ("locl", "--mem", ("local", "bind"), "did you mean 'local'"),
    ],
)
def test_bad_lists_are_one_line(text: str, option: str, known: tuple[str, ...], match: str) -> None:
    with pytest.raises(TopobindError, match=match):
        candidates.parse_list(text, option, known)


def test_bad_layouts_and_auto_refused() -> None:
    with pytest.raises(TopobindError, match="--layouts"):
        candidates.parse_layouts("compact,nosuch")
    with pytest.raises(TopobindError, match="'auto' is what tune decides"):
        candidates.parse_layouts("auto")


def test_a_listed_entry_that_plans_nowhere_is_an_error() -> None:
    topo = load_xml(str(ONE_NUMA))
    with pytest.raises(TopobindError, match="candidate compact 9x1"):
        candidates.candidates(topo, Choices(layouts=("compact",), ranks=9, threads=1),
                              _base(ONE_NUMA))  # fmt: skip


def test_metric_needs_a_group_and_a_number() -> None:
    with pytest.raises(TopobindError, match="has no group"):
        compile_metric("time: [0-9.]+")
    with pytest.raises(TopobindError, match="not a regular expression"):
        compile_metric("time: ([0-9.]+")
    for hostile in ("(" * 5000 + "a" + ")" * 5000, "a{99999999999999999999}(b)", "(" * 10**5):
        with pytest.raises(TopobindError, match="not a regular expression") as info:
            compile_metric(hostile)  # RecursionError, OverflowError: tracebacks before
        assert len(str(info.value)) < 400
    pattern = compile_metric(r"rate: ([0-9.,]+) MB/s")
    assert pattern is not None
    # a comma is refused, never read as 25 or 1234.5 (a decimal or a thousands separator?)
    for text in ("rate: 2,5 MB/s", "rate: 1,234.5 MB/s"):
        value, why = figure(text, pattern)
        assert value is None and "a comma" in str(why) and "[0-9.]" in str(why)
    assert figure("x\nrate: 1234.5 MB/s\nrate: 9 MB/s", pattern) == (1234.5, None)
    assert figure("rate: 1.5e3 MB/s", compile_metric(r"rate: (\S+) MB/s")) == (1500.0, None)
    for text in ("1.2.3", "\u0663", "1_0", "inf", "nan", "0x10", "1e", "."):
        value, why = figure(f"rate: {text} MB/s", compile_metric(r"rate: (\S+) MB/s"))
        assert value is None and "not a" in str(why), text
    assert figure("nothing", pattern)[1] == "no match for --metric in its output"
    assert "not a number" in str(figure("rate: ... MB/s", pattern)[1])


def test_a_pattern_that_backtracks_for_ever_is_stopped_at_the_time_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--metric '((a+)+)$' on lines of 40 a's and a '!': Python's re backtracks 2^40 times a
    line (hours; no cut of the text bounds that). The search is stopped at the bound, the
    run not counted with the reason; a linear pattern still reads 4 MiB at once."""
    import time

    monkeypatch.setattr(launching, "METRIC_TIMEOUT_S", 0.5)
    output = ("a" * 40 + "!\n") * 100_000  # 4.1 MB
    pattern = compile_metric(r"((a+)+)$")
    assert pattern is not None
    t0 = time.monotonic()
    value, why = figure(output, pattern)
    assert value is None and time.monotonic() - t0 < 10
    assert why == (
        "--metric searched this run's output for more than 0.5 s (a pattern that backtracks: "
        "anchor it, or avoid nested repeats)"
    )
    linear = compile_metric(r"^time: ([0-9.]+) s$")
    assert linear is not None
    big = "x" * (launching.MAX_OUTPUT_CHARS - 20) + "\ntime: 2.5 s\n"
    assert figure(big, linear) == (2.5, None)
    assert figure(big + "time: 9 s\n", linear) == (2.5, None)  # the first match
    long = launching.search_bounded(linear, "time: " + "9" * 5000 + " s", 5.0)
    assert long == ("9" * launching.MAX_GROUP, None)  # the group read back is bounded


def test_a_bad_metric_is_refused_when_the_line_is_parsed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before any planning or run, exit status 2, one line."""
    from topobind.cli.main import main

    for bad, why in (("x(", "not a regular expression"), ("x", "has no group")):
        with pytest.raises(SystemExit) as done:
            main(["tune", "--metric", bad, "--", "/no/such/program"])
        err = capsys.readouterr().err
        assert done.value.code == 2 and why in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--budget", "0"), ("--metric", "x("), ("--mem", "foo"), ("--pages", "3K"),
     ("--layouts", "zz"), ("--min-gain", "200")],
)  # fmt: skip
def test_tunes_options_take_the_shared_argparse_wrapper(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    """tune had its own copy of cli/arguments.py's wrapper, which left the option's name at
    the front of the message: 'argument --budget: --budget '0': ...'."""
    from topobind.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["tune", flag, value, "--", "/no/such/program"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"topobind: error: argument {flag}: ") and err.count(flag) == 1, err


def _record(program: str, topo: object, **choice: object) -> dict[str, object]:
    return {
        "schema": records.SCHEMA, "program": program, "argv": [program],
        "sha256": records.program_hash(program), "node_type": records.node_type(topo),  # type: ignore[arg-type]
        "node": "", "nodes": 1, "when": "2026-11-29T08:00:00+00:00",
        "choice": {"layout": "spread", "mem": "local", "pages": "2M", "ranks": 1,
                   "threads": None, **choice},
        "winner": {"candidate": "spread pages=2M"}, "verdict": "winner",
        "gains": {"baseline": [0.384, 0.2, 0.6], "runner-up": [0.273, 0.1, None]},
    }  # fmt: skip


def test_auto_uses_the_record_and_refuses_a_stale_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.setenv("TOPOBIND_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    prog = os.path.join(tmp_path, "prog")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\n")
    topo = load_xml(str(ONE_NUMA))
    choice, line = auto.choose(topo, [prog])
    assert choice.layout == "compact" and "no tune record" in line
    path = records.write(_record(os.path.realpath(prog), topo))
    choice, line = auto.choose(topo, [prog])
    assert (choice.layout, choice.pages, choice.ranks) == ("spread", "2M", 1)
    assert path in line and "--layout spread --mem local --pages 2M --ranks 1" in line
    # the gains as the record holds them, each over its own reference
    assert "+38.4 % [+20.0 % .. +60.0 %] over the baseline" in line
    assert "+27.3 % [+10.0 % .. +inf %] over the runner-up" in line
    # another node type: not this record
    assert auto.choose(load_xml(str(FOUR_NUMA)), [prog])[0].layout == "compact"
    # other arguments: the program's newest record, said
    choice, line = auto.choose(topo, [prog, "--big"])
    assert choice.layout == "spread" and "tuned with other arguments" in line
    # env/plan name no program: the one program's record of this node type
    assert auto.choose(topo, None)[0].layout == "spread"
    with open(prog, "a") as f:
        f.write("echo changed\n")
    choice, line = auto.choose(topo, [prog])
    assert choice.layout == "compact" and "stale" in line and path in line


def test_unreadable_record_is_said_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.setenv("TOPOBIND_STATE_DIR", str(tmp_path))
    os.makedirs(os.path.join(tmp_path, "tune"))
    with open(os.path.join(tmp_path, "tune", "bad.json"), "w") as f:
        json.dump({"schema": records.SCHEMA, "choice": {"layout": 3}}, f)
    found, bad = records.read_all()
    assert found == [] and len(bad) == 1 and "not a tune record" in bad[0]


def test_node_type_ignores_memory_but_not_cores() -> None:
    topo = load_xml(str(FOUR_NUMA))
    less = topo.replace(numa_nodes=tuple(n._replace(memory_bytes=n.memory_bytes // 2)
                                         for n in topo.numa_nodes))  # fmt: skip
    assert records.node_type(less) == records.node_type(topo)  # hugepages reserved
    assert records.node_type(load_xml(str(ONE_NUMA))) != records.node_type(topo)


def test_the_baseline_is_the_launchers_plain_launch() -> None:
    """One launch path: the baseline's argv comes from launch/mpi_launchers (plain: the
    job's nodes, the plan's ranks on each, no binding), not from lines of tune's own."""
    from topobind.launch.mpi_launchers import get

    assert get("none").plain(None, 1, 1, ["./a"]).argv == ["./a"]
    assert get("srun").plain(None, 3, 2, ["./a"]).argv == ["srun", "--nodes=3", "--ntasks=6", "./a"]
    assert get("flux").plain(None, 2, 1, ["./a"]).argv[:4] == ["flux", "run", "--nodes=2",
                                                              "--ntasks=2"]  # fmt: skip
    mpirun = get("openmpi5").plain("/x/mpirun", 1, 4, ["./a"])
    assert mpirun.argv == ["/x/mpirun", "-np", "4", "./a"] and "--bind-to" not in mpirun.argv
    assert get("mpich").plain(None, 2, 4, ["./a"]).argv == ["mpiexec", "-n", "8", "-ppn", "4",
                                                             "./a"]  # fmt: skip
    source = Path(launching.__file__).read_text()
    assert '"srun"' not in source and '"mpirun"' not in source and '"flux", "run"' not in source
