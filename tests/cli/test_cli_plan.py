"""The `topobind show` and `topobind plan` commands as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND, Cli
from paths import TOPOLOGIES
from topo_sources import BETZY

from topobind.emit.omp import parse_places
from topobind.plan.model import validate_plan_json


@pytest.mark.slow
def test_show_text_and_json(topobind_cli: Cli) -> None:
    out = topobind_cli("show", "-t", BETZY)
    assert out.returncode == 0
    assert "2 packages, 8 NUMA nodes, 32 L3 domains, 128 cores, 256 PUs (SMT 2)" in out.stdout
    assert "L3 L#1 (16 MiB, NUMA 0): cores L#4-7, PUs 4-7,132-135" in out.stdout
    doc = json.loads(topobind_cli("show", "-t", BETZY, "-f", "json").stdout)
    assert doc["summary"]["pus"] == 256 and len(doc["l3_domains"]) == 32


@pytest.mark.slow
def test_plan_json_validates_and_matches_issue_example(topobind_cli: Cli) -> None:
    out = topobind_cli("plan", "-t", BETZY, "-l", "every-other-core", "-r", "64", "-f", "json")
    doc = json.loads(out.stdout)
    validate_plan_json(doc)
    assert [r["cpus"] for r in doc["ranks"]] == [[i] for i in range(0, 128, 2)]
    assert doc["launch"]["env"]["OMP_NUM_THREADS"] == "1"
    assert doc["launch"]["srun"][2].startswith("--cpu-bind=mask_cpu:0x1,0x4,")
    assert not any(
        a.startswith(("--cpus-per-task", "-c", "--exact")) for a in doc["launch"]["srun"]
    )


@pytest.mark.slow
def test_plan_env_is_sourceable_and_exact(topobind_cli: Cli) -> None:
    out = topobind_cli(
        "plan", "-t", BETZY, "-l", "every-other-core", "-r", "1", "-T", "64", "-f", "env"
    )
    script = out.stdout + 'printf "%s|%s|%s" "$OMP_NUM_THREADS" "$OMP_PLACES" "$OMP_PROC_BIND"'
    got = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
    threads, places, bind = got.split("|")
    assert (threads, bind) == ("64", "close")
    assert parse_places(places) == [(i,) for i in range(0, 128, 2)]


@pytest.mark.slow
def test_openmpi_format_writes_rankfile_only_when_needed(tmp_path: Path, topobind_cli: Cli) -> None:
    out = topobind_cli("plan", "-t", BETZY, "-l", "per-l3", "-f", "openmpi", cwd=tmp_path)
    assert out.stdout.strip() == "mpirun -np 32 --map-by ppr:1:l3cache:pe=4 --bind-to core"
    assert not list(tmp_path.iterdir())
    out = topobind_cli("plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi", cwd=tmp_path)
    assert "rankfile:file=topobind.rankfile" in out.stdout
    text = (tmp_path / "topobind.rankfile").read_text()
    assert "rank 63=localhost slot=126" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,message",
    [
        (["-l", "zigzag"], "unknown layout 'zigzag'"),
        (["-l", "compact", "-r", "100", "-T", "2"], "lower --ranks/--threads"),
        (["-l", "compact", "-r", "200"], "--ranks 200 is more than the 128 usable cores"),
        (
            ["-l", "per-l3", "-t", str(TOPOLOGIES / "16-2gr2gr2n2c+misc.xml")],
            "needs a cache shared",
        ),
        (["-l", "compact", "-t", "/nonexistent/node.xml"], "does not exist"),
        (["-l", "l3-groups:x"], "must be a whole number"),
        (["-l", "compact", "-r", "0"], "--ranks/-r: '0': give a whole number from 1"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    args: list[str], message: str, tmp_path: Path, topobind_cli: Cli
) -> None:
    out = (
        topobind_cli("plan", "-t", BETZY, *args, "-f", "openmpi", cwd=tmp_path)
        if "-t" not in args
        else topobind_cli("plan", *args, "-f", "openmpi", cwd=tmp_path)
    )
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind: error: ") and message in lines[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_malformed_and_empty_xml(tmp_path: Path, topobind_cli: Cli) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type='Machine'")
    out = topobind_cli("show", "-t", str(bad))
    assert out.returncode == 2 and "malformed hwloc XML" in out.stderr
    empty = tmp_path / "empty.xml"
    src = (TOPOLOGIES / "2intel64-1n2c-numaroot.v1tov2.xml").read_text()
    empty.write_text(src.replace('allowed_cpuset="0x00000003"', 'allowed_cpuset="0x0"'))
    out = topobind_cli("show", "-t", str(empty))
    assert out.returncode == 2 and "allowed cpuset is empty" in out.stderr


@pytest.mark.slow
def test_live_in_restricted_cpuset() -> None:
    """Inside a job step bound to one PU, the live topology holds only that PU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 PUs")
    out = subprocess.run(
        ["taskset", "-c", "1", TOPOBIND, "plan", "-l", "compact", "-f", "json"],
        capture_output=True,
        text=True,
    )
    doc = json.loads(out.stdout)
    assert [r["cpus"] for r in doc["ranks"]] == [[1]]
    assert doc["topology"]["excluded_pus"] == {"0": "not in this process's affinity mask"}


def test_atomic_write_gives_the_usual_file_mode(tmp_path: Path) -> None:
    from topobind.fsutil import atomic_write_text

    old = os.umask(0o022)
    try:
        path = Path(atomic_write_text(tmp_path / "x.txt", "hello\n"))
    finally:
        os.umask(old)
    assert path.read_text() == "hello\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


@pytest.mark.slow
def test_rankfile_in_a_missing_directory_is_refused(tmp_path: Path, topobind_cli: Cli) -> None:
    target = tmp_path / "no" / "such" / "rf"
    out = topobind_cli(
        "plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi", "--rankfile", str(target)
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"topobind: error: cannot write --rankfile {target}: directory {target.parent} does not "
        "exist; create it or give another --rankfile PATH"
    ]
    assert not (tmp_path / "no").exists()
    out = topobind_cli(
        "plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi4", "--rankfile", "/"
    )
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1


@pytest.mark.slow
def test_openmpi_formats_print_their_notes(tmp_path: Path, topobind_cli: Cli) -> None:
    out = topobind_cli("plan", "-t", BETZY, "-l", "per-l3", "-f", "openmpi", cwd=tmp_path)
    assert out.stderr.startswith(
        "topobind: note: --bind-to core binds each rank to every PU of its cores, so "
        "OMP_PLACES=cores gives each thread a whole core (all its PUs), not only the planned PU"
    )


# --------------------------------------------------------------------------- one planning entry
TWO_NUMA = str(TOPOLOGIES / "24em64t-2n6c2t-pci.xml")
TIOGA = str(TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml")

#: (command line, what it asks: layout, ranks, and the request's other fields)
COMMANDS = [
    (["plan", "-t", TWO_NUMA, "-l", "per-numa", "--mem", "interleave", "-f", "json"],
     ("per-numa", None, {"mem": "interleave"})),
    (["plan", "-t", TIOGA, "-l", "per-gpu", "--reserve", "first-core-per-l3", "-f", "json"],
     ("per-gpu", None, {"options": {"reserve": "first-core-per-l3"}})),
    (["plan", "-t", TWO_NUMA, "-l", "compact", "--slurm-cores", "0-3", "-f", "rankexec"],
     ("compact", None, {})),  # the SPANK plugin's path
    (["env", "-t", TWO_NUMA, "-l", "spread", "-r", "4", "--smt"],
     ("spread", 4, {"smt": True})),
    (["run", "--dry-run", "--launcher", "none", "-t", TWO_NUMA, "-l", "compact", "-r", "1",
      "--mem", "bind", "--", "true"], ("compact", 1, {"mem": "bind"})),
    (["verify", "-t", TWO_NUMA, "-l", "per-numa", "--mem", "bind", "--", "true"],
     ("per-numa", None, {"mem": "bind"})),
    (["draw", "-t", TWO_NUMA, "-l", "per-socket", "--format", "text"],
     ("per-socket", None, {})),
    (["bench", "stream", "-t", TWO_NUMA, "-l", "spread", "--mem", "bind", "--pages", "4k"],
     ("spread", 1, {"mem": "bind", "pages": "4k"})),
    (["bench", "stream", "-t", TWO_NUMA, "--mem", "bind", "--pages", "2M"],
     ("compact", 1, {"mem": "bind", "pages": "2M"})),  # issue 28's example
]  # fmt: skip


class _Stop(Exception):
    """Raised in place of running a kernel: the plan is what the test looks at."""


@pytest.mark.usefixtures("built_kernels")  # a fresh clone has none built
@pytest.mark.parametrize("argv,asked", COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_every_command_plans_through_request_plan(
    argv: list[str],
    asked: tuple[str, int | None, dict[str, object]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """bench, run, verify, env, plan, draw and the SPANK path each plan through ``request.plan``
    (no layout plans outside it), and the plan a command uses equals ``request.plan``'s for
    the same request, built here from the command line (its --mem and --pages included)."""
    from topobind.bench import runs
    from topobind.cli.main import main
    from topobind.launch import run as jobrun
    from topobind.plan import layouts, request

    seen: list[tuple[object, object]] = []  # (topology, plan) of every request.plan
    inside = [0]
    real_plan, real_layout_plan = request.plan, layouts.Layout.plan

    def spy_plan(topo, req):  # type: ignore[no-untyped-def]
        inside[0] += 1
        try:
            made = real_plan(topo, req)
        finally:
            inside[0] -= 1
        seen.append((topo, made))
        return made

    def layout_plan(self, node, view, req):  # type: ignore[no-untyped-def]
        assert inside[0], f"{argv[0]}: layout {self.name} planned outside request.plan"
        return real_layout_plan(self, node, view, req)

    def no_kernel(*args, **kw):  # type: ignore[no-untyped-def]
        raise _Stop

    monkeypatch.setattr(request, "plan", spy_plan)
    monkeypatch.setattr(layouts.Layout, "plan", layout_plan)
    monkeypatch.setattr(runs, "run_repeats", no_kernel)
    monkeypatch.setattr(jobrun, "verify_command", no_kernel)  # verify: the plan, no probe
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except _Stop:
        status = 0
    assert status == 0, capsys.readouterr().err
    assert seen, f"{argv[0]} did not plan through request.plan"
    layout, ranks, fields = asked
    topo, used = seen[-1]
    monkeypatch.setattr(layouts.Layout, "plan", real_layout_plan)
    same = real_plan(topo, request.parse(layout, ranks=ranks, **fields))  # type: ignore[arg-type]
    assert used == same


def test_the_entry_check_fails_on_a_plan_made_beside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spy above can fail: a plan made through the layout stage alone is caught."""
    from topobind.plan import layouts, request
    from topobind.topo.topology import load

    calls: list[str] = []
    real = layouts.Layout.plan

    def layout_plan(self, node, view, req):  # type: ignore[no-untyped-def]
        calls.append(self.name)
        return real(self, node, view, req)

    monkeypatch.setattr(layouts.Layout, "plan", layout_plan)
    topo, req = load(TWO_NUMA), request.parse("per-numa")
    plan = req.layout.plan(topo, topo, req)
    assert calls == ["per-numa"] and plan.ranks[0].memory is None  # no memory plan beside it


# --------------------------------------------------------------------------- bench's memory
@pytest.mark.slow
def test_bench_runs_the_kernel_with_the_memory_plan(tmp_path: Path, built_kernels: None) -> None:
    """``topobind bench stream --mem bind --pages 4k``: the kernel runs under the per-rank
    step that applies the plan (rankexec: %mem=bind, %thp=off), asks for 4k pages, and its
    result records the memory plan (what one NUMA node without hugepages can check)."""
    from cli_helpers import run_topobind

    out = run_topobind(
        "bench", "stream", "--mem", "bind", "--pages", "4k", "--results", "res",
        "--", "--elements", "1M", "--trials", "2", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "res").rglob("*.json")
    doc = json.loads(path.read_text())
    assert doc["params"]["memory"]["policy"] == "bind"
    assert doc["params"]["memory"]["pages"] == "4k"
    assert doc["pages"]["requested"] == "4k"


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="reserving hugepages needs root")
def test_bench_stream_mem_bind_pages_2m_runs_the_kernel_with_that_plan(
    tmp_path: Path, built_kernels: None
) -> None:
    """Issue 28 item 5's example, ``topobind bench stream --mem bind --pages 2M``, with a 2M
    pool reserved: the kernel runs with the plan's policy and its buffers in 2M pages."""
    from cli_helpers import run_topobind

    from topobind.measure.hugepages import hugepages_status, reserve_hugepages

    pool = hugepages_status().get(2048)
    if pool is None:
        pytest.skip("no 2 MiB hugepage pool on this kernel")
    in_use = pool.nr - pool.free + pool.resv  # another process's pages stay theirs
    with reserve_hugepages(2048, in_use + 64):  # 128 MiB free: three 8 MiB arrays of 1M elements
        out = run_topobind(
            "bench", "stream", "--mem", "bind", "--pages", "2M", "--strict", "--results",
            "res", "--", "--elements", "1M", "--trials", "2", cwd=tmp_path,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "res").rglob("*.json")
    doc = json.loads(path.read_text())
    assert doc["params"]["memory"]["policy"] == "bind"
    assert doc["params"]["memory"]["pages"] == "2M"
    assert doc["pages"]["requested"] == "2M", doc["pages"]
    assert doc["pages"]["kib"] == 2048 and not doc["pages"]["fallback"], doc["pages"]  # smaps


@pytest.mark.slow
def test_bench_memory_step_applies_the_policy_and_thp(tmp_path: Path, built_kernels: None) -> None:
    """What bench puts in front of the kernel really sets the policy and turns THP off: a
    program run behind it sees ``bind:`` in its numa_maps and ``THP_enabled: 0``."""
    from topobind.bench.runs import memory_step
    from topobind.plan import request
    from topobind.topo.topology import load

    req = request.parse("compact", mem="bind", pages="4k", threads=1, ranks=1)
    plan = request.plan(load("live"), req)
    step = memory_step(plan, tmp_path)
    assert step and step[0].endswith("rankexec")
    probe = "grep THP_enabled /proc/self/status; grep -c ' bind:' /proc/self/numa_maps"
    out = subprocess.run([*step, "sh", "-c", probe], capture_output=True, text=True, check=True)
    thp, binds = out.stdout.split("\n")[:2]
    assert thp.split() == ["THP_enabled:", "0"] and int(binds) > 0
    none = request.plan(load("live"), request.parse("compact", mem="none", threads=1, ranks=1))
    assert memory_step(none, tmp_path) == []  # the kernel's defaults: no step


@pytest.mark.slow
def test_bench_refuses_pages_this_machine_cannot_give(tmp_path: Path) -> None:
    """``--pages 2M`` where no 2M page is free: one line naming --pages and the fix, exit 2,
    no kernel run, nothing written."""
    from cli_helpers import run_topobind

    from topobind.measure.hugepages import hugepages_status

    pool = hugepages_status().get(2048)
    if pool is not None and getattr(pool, "free", 0) > 0:
        pytest.skip("this machine has free 2M pages")
    out = run_topobind("bench", "stream", "--mem", "bind", "--pages", "2M", "--results", "res",
                       cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("topobind: error: --pages 2M:")
    assert not (tmp_path / "res").exists()


# --------------------------------------------------------------------------- start-up
_MODULES_AFTER = (
    "import sys, io, contextlib\n"
    "from topobind.cli.main import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "    status = main(sys.argv[1:])\n"
    "print(status, ' '.join(sorted(sys.modules)))\n"
)

#: what each command must not import: it never uses them (make bench-plan counts the cost)
UNUSED = {
    ("plan", "-f", "json"): ("topobind.plan.gpu_layout", "topobind.draw.boxes",
                             "topobind.emit.gres", "topobind.topo.slurm_allocation",
                             "topobind.launch.mpi_launchers", "difflib", "tempfile", "subprocess",
                             "shutil"),
    ("show", "-f", "json"): ("topobind.plan.layouts", "topobind.launch", "topobind.emit.openmpi",
                             "topobind.plan.model", "difflib", "tempfile", "subprocess",
                             "shutil", "json", "shlex"),
    ("env",): ("topobind.launch.build", "topobind.launch.run", "topobind.launch.mpi_launchers",
               "topobind.cli.commands.run", "topobind.draw.boxes", "difflib", "tempfile",
               "subprocess", "shutil"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("command", list(UNUSED), ids=" ".join)
def test_a_command_imports_only_what_it_uses(command: tuple[str, ...]) -> None:
    import sys

    name, *fmt = command
    argv = [name, "-t", str(TOPOLOGIES / "192em64t-24n8c2t.xml"), *fmt]
    if name in ("plan", "env"):
        argv += ["-l", "spread", "-r", "192"]
    out = subprocess.run([sys.executable, "-c", _MODULES_AFTER, *argv], capture_output=True,
                         text=True, check=True)  # fmt: skip
    status, loaded = out.stdout.split(" ", 1)
    assert status == "0"
    assert not set(UNUSED[command]) & set(loaded.split())


def test_plan_formats_are_the_launchers() -> None:
    """``plan --format`` names the launchers' formats without importing the registry."""
    from topobind.cli.commands.topo import LAUNCHER_FORMATS
    from topobind.launch.mpi_launchers import plan_formats

    assert plan_formats() == LAUNCHER_FORMATS


def test_argparse_types_live_in_the_command_layer() -> None:
    """Option parsing is the command layer's (issue 28 item 7): no module outside ``cli/``
    imports argparse or raises its errors (``inputs.py`` keeps the bounded checks only)."""
    import ast

    from paths import REPO

    outside = []
    for path in sorted((REPO / "src" / "topobind").rglob("*.py")):
        if "cli" in path.relative_to(REPO / "src" / "topobind").parts:
            continue
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if "argparse" in names:
            outside.append(str(path.relative_to(REPO)))
    assert not outside, f"argparse outside cli/: {outside}"


@pytest.mark.usefixtures("built_kernels")  # a fresh clone has none built
def test_run_writes_the_plan_it_launches(tmp_path: Path, topobind_cli: Cli) -> None:
    """topobind run --plan-json: the plan of topobind plan --format json, so a check needs no
    separate topobind plan start-up; a missing directory is one line, before the launch."""
    args = ["-t", TWO_NUMA, "-l", "compact", "-r", "1"]
    out = topobind_cli("run", "--dry-run", "--launcher", "none", *args, "--plan-json",
                       str(tmp_path / "plan.json"), "--", "true")  # fmt: skip
    assert out.returncode == 0, out.stderr
    plan = topobind_cli("plan", *args, "-f", "json")
    assert (tmp_path / "plan.json").read_text() == plan.stdout
    target = tmp_path / "no" / "plan.json"
    live = ["-t", "live", "-l", "compact", "-r", "1"]
    out = topobind_cli("run", "--launcher", "none", *live, "--plan-json", str(target), "--",
                       "touch", str(tmp_path / "ran"))  # fmt: skip
    assert out.returncode == 2 and not (tmp_path / "ran").exists()
    assert out.stderr.splitlines() == [
        f"topobind: error: cannot write --plan-json {target}: directory {target.parent} does "
        "not exist; create it or give another --plan-json FILE"
    ]
