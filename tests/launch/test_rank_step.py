"""The per-rank step (rankstep/bin/rankexec) and the checks of the real program, run for real:
the file it reads, its refusals, real libgomp's places, restricted masks under OpenMPI 4 and 5,
and --verify-running catching a program that rebinds itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, RANKEXEC, TOPOBIND, run_topobind
from cli_helpers import run_rankexec as rankexec
from ompi_oracle import have_ompi4, have_ompi5, ompi5_map
from paths import REPO, TOPOLOGIES
from plans import plan_of

from topobind.emit.openmpi import openmpi_argv
from topobind.launch.build import build, uniform_env_is_exact
from topobind.launch.mpi_launchers import get
from topobind.launch.rank_step import StepFiles
from topobind.launch.shape import JobShape
from topobind.plan.model import Plan
from topobind.topo.topology import load, parse_xml

WHEREAMI = REPO / "kernels" / "bin" / "whereami"
CPUS = os.sched_getaffinity(0)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not RANKEXEC.exists() or not WHEREAMI.exists(), reason="run 'make kernels' first"
    ),
]
needs_two = pytest.mark.skipif(not {0, 1} <= CPUS, reason="needs CPUs 0 and 1")
MPIS = [
    pytest.param("openmpi4", marks=pytest.mark.skipif(not have_ompi4(), reason="no OpenMPI 4")),
    pytest.param("openmpi5", marks=pytest.mark.skipif(not have_ompi5(), reason="no OpenMPI 5")),
]


def step_file(tmp_path: Path, body: str, mode: int = 0o600) -> Path:
    path = tmp_path / "rankexec.txt"
    path.write_text("topobind-rankexec 1\n" + body)
    path.chmod(mode)
    return path


def printenv(path: Path, **env: str) -> str:
    out = rankexec(path, "sh", "-c", 'echo "$OMP_PLACES|$GPU"', **env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# --------------------------------------------------------------------------- the file
def test_each_local_rank_gets_its_line_and_mpirun_variables_win(tmp_path: Path) -> None:
    path = step_file(tmp_path, "@*\n0\tOMP_PLACES={0}\tGPU=0\n1\tOMP_PLACES={1}\tGPU=a b\n")
    assert printenv(path) == "{0}|0"  # no launcher variable: one process, local rank 0
    assert printenv(path, SLURM_LOCALID="1") == "{1}|a b"
    # an mpirun inside sbatch: every rank inherits the batch step's SLURM_LOCALID=0
    assert printenv(path, SLURM_LOCALID="0", OMPI_COMM_WORLD_LOCAL_RANK="1") == "{1}|a b"
    assert printenv(path, SLURM_LOCALID="0", PMIX_LOCAL_RANK="1") == "{1}|a b"


def test_a_hosts_own_group_wins_over_the_default(tmp_path: Path) -> None:
    host = socket.gethostname()
    body = "@other,nodes\n0\tOMP_PLACES={7}\n@*\n0\tOMP_PLACES={0}\n"
    assert printenv(step_file(tmp_path, body)) == "{0}|"
    body += f"@x,{host}\n0\tOMP_PLACES={{1}}\n"
    assert printenv(step_file(tmp_path, body)) == "{1}|"


@pytest.mark.parametrize(
    "case,why",
    [
        ("group-writable", "writable by group or others (mode 0620): refused"),
        ("other-writable", "writable by group or others (mode 0602): refused"),
        ("other-owner", "not by this user"),
        ("symlink", "cannot open"),
        ("rank-not-planned", "plans no local rank 2 on"),
        ("not-a-step-file", "is not a topobind-rankexec 1, 2 or 3 file"),
    ],
)
def test_refuses_a_file_someone_else_can_change(tmp_path: Path, case: str, why: str) -> None:
    path = step_file(tmp_path, "@*\n0\tOMP_PLACES={0}\n")
    env: dict[str, str] = {}
    if case == "group-writable":
        path.chmod(0o620)
    elif case == "other-writable":
        path.chmod(0o602)
    elif case == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to give the file to another user")
        os.chown(path, 65534, 65534)
    elif case == "symlink":
        link = tmp_path / "link.txt"
        link.symlink_to(path)
        path = link
    elif case == "rank-not-planned":
        env = {"SLURM_LOCALID": "2"}
    else:
        path.write_text("#!/bin/sh\n")
    marker = tmp_path / "ran"
    out = rankexec(path, "touch", str(marker), **env)
    assert out.returncode == 125 and not marker.exists()
    assert out.stderr.startswith("topobind rankexec: error: ") and why in out.stderr
    assert out.stderr.count("\n") == 1


def test_program_that_cannot_run(tmp_path: Path) -> None:
    out = rankexec(step_file(tmp_path, "@*\n0\tX=1\n"), "/nonexistent/prog")
    assert out.returncode == 127
    assert (
        out.stderr == "topobind: error: cannot run /nonexistent/prog: No such file or directory\n"
    )


# --------------------------------------------------------------------------- exact places
def test_step_files_carry_the_plans_order_where_runtimes_would_not() -> None:
    xml = TOPOLOGIES / "16em64t-4s2c2t.xml"
    plan = plan_of(load(str(xml)), "compact", ranks=2)
    assert [list(p) for p in plan.ranks[0].places] == [[0], [4], [1], [5]]
    assert not uniform_env_is_exact(plan, get("mpirun"))
    assert not uniform_env_is_exact(plan, get("srun"))
    text = StepFiles(JobShape(plan=plan, launcher="mpirun", rank_step=True)).text()
    assert "\n0\tOMP_NUM_THREADS=4\tOMP_PLACES={0},{4},{1},{5}\tOMP_PROC_BIND=close\n" in text
    betzy = plan_of(load("betzy-epyc7742"), "per-l3", smt=True)
    assert not uniform_env_is_exact(betzy, get("srun"))
    one_pu = plan_of(load("synthetic:pack:1 core:4 pu:1"), "compact", ranks=4)
    assert uniform_env_is_exact(one_pu, get("mpirun"))


def _threads(out: str) -> list[int]:
    doc = json.loads(out.splitlines()[-1])
    return [p["cpu"] for p in sorted(doc["placement"], key=lambda p: p["thread"])]


@needs_two
def test_real_libgomp_orders_places_itself_and_the_step_fixes_it(tmp_path: Path) -> None:
    """A rank planned on [1, 0]: OMP_PLACES=cores inside its mask gives libgomp's own
    increasing order [0, 1]; the per-rank step's exact places give the plan's [1, 0]."""
    env = {"OMP_NUM_THREADS": "2", "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    probe = [str(WHEREAMI), "--spin-ms", "5"]
    plain = subprocess.run(
        ["taskset", "-c", "0,1", *probe], capture_output=True, text=True,
        env={**NO_SLURM, **env}, timeout=60, check=True,
    )  # fmt: skip
    assert _threads(plain.stdout) == [0, 1]
    path = step_file(tmp_path, "@*\n0\tOMP_PLACES={1},{0}\n")
    out = rankexec(path, "taskset", "-c", "0,1", *probe, **env)
    assert out.returncode == 0, out.stderr
    assert _threads(out.stdout) == [1, 0]


# --------------------------------------------------------------------------- restricted masks
def _restricted(xml: Path, keep: int) -> Plan:
    """A plan on ``xml`` seen through an affinity mask holding its last ``keep`` PUs."""
    whole = load(str(xml))
    mask = frozenset(sorted(whole.pus)[-keep:])
    topo = parse_xml(whole.xml, str(xml), affinity=mask)
    return plan_of(topo, "compact", ranks=2)


@pytest.mark.skipif(not have_ompi5(), reason="no OpenMPI 5")
@pytest.mark.parametrize(
    "name", ["16amd64-8n2c-cpusets.xml", "power8gpudistances.xml", "16em64t-4s2c2t.xml"]
)
def test_openmpi5_mapper_puts_ranks_on_the_planned_pus_under_a_mask(
    name: str, tmp_path: Path
) -> None:
    xml = TOPOLOGIES / name
    plan = _restricted(xml, 4)
    m = openmpi_argv(plan, 5, rankfile_path=str(tmp_path / "rf"), host="localhost")
    assert m.rankfile is not None and "--map-by" in m.argv  # never ppr under a mask
    (tmp_path / "rf").write_text(m.rankfile)
    got = ompi5_map(xml, plan.nranks, m.argv[3:], cwd=tmp_path)
    assert got == [list(r.cpus) for r in plan.ranks]  # only planned PUs: none outside the mask


@needs_two
@pytest.mark.parametrize("mpi", MPIS)
def test_run_verify_under_taskset_on_the_second_cpu(mpi: str, tmp_path: Path) -> None:
    out = subprocess.run(
        ["taskset", "-c", "1", TOPOBIND, "run", "--launcher", "mpirun", "--mpi", mpi,
         "--verify", "--", str(WHEREAMI), "--spin-ms", "5"],
        capture_output=True, text=True, env=NO_SLURM, cwd=tmp_path, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "all 1 threads on their planned CPUs" in out.stderr
    assert [p["cpu"] for p in json.loads(out.stdout)["placement"]] == [1]


# --------------------------------------------------------------------------- the real program
def run_checked(
    *program: str, ranks: str = "1", threads: str = "2", mpi: str | None = None, ms: str = "300"
) -> subprocess.CompletedProcess[str]:
    extra = ["--mpi", mpi] if mpi else []
    return run_topobind(
        "run", "-l", "compact", "-r", ranks, "-T", threads, *extra,
        "--verify-running", "--sample-ms", ms, "--", *program,
        env=NO_SLURM, timeout=180,
    )  # fmt: skip


SPIN = [str(WHEREAMI), "--spin-ms", "2500"]


@needs_two
@pytest.mark.parametrize("mpi", MPIS)
def test_verify_running_passes_a_program_where_planned(mpi: str) -> None:
    out = run_checked(*SPIN, ranks="2", threads="1", mpi=mpi)
    assert out.returncode == 0, out.stderr
    assert "the program's 2 threads ran on their planned CPUs" in out.stderr


@needs_two
def test_verify_running_catches_a_taskset_wrapper() -> None:
    out = run_checked("taskset", "-c", "0", *SPIN)
    assert out.returncode == 1, out.stderr
    assert "   0      1  " in out.stderr and "MISMATCH (ran on 0, planned 1)" in out.stderr
    assert "the program ran with a placement that differs from the plan" in out.stderr


@needs_two
def test_verify_running_catches_sched_setaffinity(tmp_path: Path) -> None:
    """A program that moves itself to CPU 1 (planned: CPU 0) with sched_setaffinity."""
    prog = tmp_path / "rebind.py"
    prog.write_text(
        "import os, time\nos.sched_setaffinity(0, {1})\nt = time.time()\n"
        "while time.time() - t < 4:\n    pass\n"
    )
    # sampled well after Python's start-up (slow on a busy machine) and the rebinding
    out = run_checked("python3", str(prog), threads="1", ms="2000")
    assert out.returncode == 1, out.stderr
    assert "MISMATCH (ran on 1, planned 0)" in out.stderr


def test_verify_running_reports_a_program_gone_before_the_sample() -> None:
    out = run_checked("true", threads="1")
    assert out.returncode == 1
    why = "MISSING (the program had ended before its sample at 300 ms, nothing observed"
    assert why in out.stderr, out.stderr


def test_dry_run_shows_the_sampling_step(tmp_path: Path) -> None:
    """The dry run prints the command the real run launches: the step with its %sample line."""
    out = run_topobind(
        "run", "--dry-run", "-l", "compact", "-r", "1", "-T", "1",
        "--verify-running", "--sample-ms", "250", "--", "true",
        env={**NO_SLURM, "TMPDIR": str(tmp_path)}, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (kept,) = tmp_path.glob("topobind-dry-run-*")
    assert out.stdout.startswith(
        f"# --verify-running: every rank's step samples where its threads run 250 ms after "
        f"start-up, into {kept}; only 'topobind run' compares the samples with the plan\n"
    )
    assert f"rankexec {kept / 'rankexec.txt'} -- true" in out.stdout
    assert f"%sample {kept} 250\n" in (kept / "rankexec.txt").read_text()


def test_build_puts_the_step_before_the_program(tmp_path: Path) -> None:
    plan = plan_of(load("synthetic:pack:1 core:4 pu:2"), "compact", ranks=2)
    shape = JobShape(plan=plan, launcher="mpirun", mpirun="/x/mpirun", mpi="openmpi5",
                     rank_step=True, rank_file=str(tmp_path / "s.txt"))  # fmt: skip
    launch = build(shape, ["./app", "a b"])
    i = launch.argv.index(str(RANKEXEC))
    assert launch.argv[0] == "/x/mpirun" and launch.argv[i:] == [
        str(RANKEXEC),
        str(tmp_path / "s.txt"),
        "--",
        "./app",
        "a b",
    ]
    assert launch.files[0][0] == str(tmp_path / "s.txt")
    assert replace(shape, rank_step=False) != shape


def test_per_node_plans_give_each_host_its_rankfile_block_and_step_group(tmp_path: Path) -> None:
    """A job whose second node holds only its last core (one rank there): build gives one
    rankfile block per host, one application context and one step file per group."""
    from topobind.launch.shape import NodePlan

    topo = load("synthetic:pack:1 core:4 pu:1")
    full = plan_of(topo, "compact", ranks=2, threads=1)
    small = plan_of(parse_xml(topo.xml, "n2", affinity=frozenset({3})), "compact", ranks=1)
    groups = (NodePlan(("n1",), full, 0, topo), NodePlan(("n2",), small, 2, topo))
    shape = JobShape(
        plan=full, launcher="mpirun", mpirun="/usr/bin/mpirun", mpi="openmpi4", nodes=2,
        groups=groups, rank_step=True, rank_file=str(tmp_path / "s.txt"),
        rankfile_path=str(tmp_path / "rf"),
    )  # fmt: skip
    launch = build(shape, ["./app"])
    files = dict(launch.files)
    ranks = [ln for ln in files[str(tmp_path / "rf")].splitlines() if ln.startswith("rank ")]
    assert ranks == ["rank 0=n1 slot=0", "rank 1=n1 slot=1", "rank 2=n2 slot=3"]
    assert launch.argv[:4] == ["/usr/bin/mpirun", "--rankfile", str(tmp_path / "rf"), "--mca"]
    step0, step1 = str(tmp_path / "rankexec-0.txt"), str(tmp_path / "rankexec-1.txt")
    i = launch.argv.index(":")
    assert launch.argv[i - 4 : i + 1] == [str(RANKEXEC), step0, "--", "./app", ":"]
    assert launch.argv[i + 1 : i + 3] == ["-np", "1"] and launch.argv[-4:] == [
        str(RANKEXEC), step1, "--", "./app",
    ]  # fmt: skip
    assert files[step0].splitlines()[2:] == [
        "@*", "0\tOMP_NUM_THREADS=1\tOMP_PLACES={0}\tOMP_PROC_BIND=close",
        "1\tOMP_NUM_THREADS=1\tOMP_PLACES={1}\tOMP_PROC_BIND=close",
    ]  # fmt: skip
    assert files[step1].splitlines()[2:] == [
        "@*", "0\tOMP_NUM_THREADS=1\tOMP_PLACES={3}\tOMP_PROC_BIND=close",
    ]  # fmt: skip
    assert launch.env["TOPOBIND_LAYOUT"] == "compact" and launch.nodes == 2


def test_per_node_plans_through_srun_are_one_plain_step(tmp_path: Path) -> None:
    """The same job through srun: not a heterogeneous step but one step, tasks in node order
    from SLURM_HOSTFILE, no srun binding, one step file whose sections bind each rank."""
    from topobind.launch.shape import NodePlan

    topo = load("synthetic:pack:1 core:4 pu:1")
    full = plan_of(topo, "compact", ranks=2, threads=1)
    small = plan_of(parse_xml(topo.xml, "n2", affinity=frozenset({3})), "compact", ranks=1)
    groups = (
        NodePlan(("n1", "n3"), full, 0, topo, "n1,n3: 2 task(s), CPUs 0-3"),
        NodePlan(("n2",), small, 4, topo, "n2: 1 task(s), CPUs 3"),
    )
    shape = JobShape(
        plan=full, launcher="srun", nodes=3, groups=groups, rank_step=True,
        rank_file=str(tmp_path / "s.txt"), rankfile_path=str(tmp_path / "rf"),
    )  # fmt: skip
    launch = build(shape, ["./app"])
    hostfile = str(tmp_path / "hostfile")
    assert launch.argv == [
        "srun", "--nodes=3", "--ntasks=5", "--distribution=arbitrary", "--cpu-bind=none",
        str(RANKEXEC), str(tmp_path / "s.txt"), "--", "./app",
    ]  # fmt: skip
    assert launch.env["SLURM_HOSTFILE"] == hostfile and launch.nodes == 3
    # the same ranks on every node: said, so the job's SLURM_NTASKS_PER_NODE cannot contradict
    same = replace(
        shape, groups=(groups[0], replace(groups[1], plan=plan_of(topo, "compact", ranks=2)))
    )
    assert build(same, ["./app"]).argv[1:5] == [
        "--nodes=3",
        "--ntasks=6",
        "--ntasks-per-node=2",
        "--distribution=arbitrary",
    ]
    files = dict(launch.files)
    assert files[hostfile].split() == ["n1", "n1", "n3", "n3", "n2"]
    assert files[str(tmp_path / "s.txt")].splitlines() == [
        "topobind-rankexec 2", "# layout compact; a section per group of nodes",
        "# n1,n3: 2 task(s), CPUs 0-3", "@n1,n3",
        "0\t%cpus=0\tOMP_NUM_THREADS=1\tOMP_PLACES={0}\tOMP_PROC_BIND=close",
        "1\t%cpus=1\tOMP_NUM_THREADS=1\tOMP_PLACES={1}\tOMP_PROC_BIND=close",
        "# n2: 1 task(s), CPUs 3", "@n2",
        "0\t%cpus=3\tOMP_NUM_THREADS=1\tOMP_PLACES={3}\tOMP_PROC_BIND=close",
    ]  # fmt: skip


def _mask(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    prog = ["sh", "-c", 'grep Cpus_allowed_list /proc/self/status | cut -f2; echo "$X"']
    return rankexec(path, *prog, **env)


@needs_two
def test_the_step_binds_each_rank_where_its_line_says(tmp_path: Path) -> None:
    host = socket.gethostname()
    last = max(os.sched_getaffinity(0))
    path = tmp_path / "v2.txt"
    path.write_text(f"topobind-rankexec 2\n@{host}\n0\t%cpus={last}\tX=a\n1\t%cpus=0-{last}\tX=b\n")
    path.chmod(0o600)
    assert _mask(path).stdout.split() == [str(last), "a"]
    assert _mask(path, SLURM_LOCALID="1").stdout.split() == [f"0-{last}", "b"]
    # a CPU the process may not use: one line naming it, exit 125, the program not run
    path.write_text(f"topobind-rankexec 2\n@*\n0\t%cpus={last + 4096}\n")
    out = _mask(path)
    assert out.returncode == 125 and out.stdout == ""
    assert out.stderr == (
        f"topobind rankexec: error: local rank 0: cannot bind to CPUs {last + 4096}: Invalid "
        "argument (CPUs outside this task's set?)\n"
    )


def test_a_node_named_otherwise_than_its_host_takes_its_slurm_name(tmp_path: Path) -> None:
    """Groups name Slurm's nodes; a host whose name differs (or is qualified) still finds
    its section: by its name up to the first '.', else by SLURMD_NODENAME."""
    host = socket.gethostname().split(".")[0]
    path = step_file(tmp_path, "@nid0042\n0\tX=slurm-name\n@other\n0\tX=other\n")
    assert _mask(path, SLURMD_NODENAME="nid0042").stdout.split()[-1] == "slurm-name"
    out = _mask(path, SLURMD_NODENAME="nid0099")
    assert out.returncode == 125 and "plans no local rank 0 on nid0099" in out.stderr
    path = step_file(tmp_path, f"@{host}\n0\tX=host\n@nid0042\n0\tX=slurm-name\n")
    # the host's own name wins over SLURMD_NODENAME
    assert _mask(path, SLURMD_NODENAME="nid0042").stdout.split()[-1] == "host"


# ------------------------------------------------------------- memory policy read back
def _top_node() -> int:
    nodes = [int(n[4:]) for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit()]
    return max(nodes)


@pytest.mark.parametrize("mode", ["bind", "interleave", "preferred"])
def test_a_policy_the_kernel_narrows_is_refused(tmp_path: Path, mode: str) -> None:
    """issue 31 item 2: the kernel drops a NUMA node that does not exist (or that the cpuset
    does not allow) from set_mempolicy's mask without a word; %mem=interleave:0,5 on a 1-node
    machine ran as interleave:0 with exit 0. rankexec reads the policy back and refuses."""
    missing = _top_node() + 5
    marker = tmp_path / "ran"
    path = tmp_path / "v3.txt"
    path.write_text(f"topobind-rankexec 3\n@*\n0\t%mem={mode}:0,{missing}\tX=1\n")
    path.chmod(0o600)
    out = rankexec(path, "touch", str(marker))
    assert out.returncode == 125 and not marker.exists(), out.stderr
    assert out.stderr == (
        f"topobind rankexec: error: local rank 0: memory policy {mode}:0,{missing}: the kernel "
        f"dropped NUMA node {missing} (not on this node, or not allowed to this task: cpuset) "
        f"and kept {mode}:0; refused\n"
    )
    # the planned policy itself runs, and is the one the program has
    path.write_text(f"topobind-rankexec 3\n@*\n0\t%mem={mode}:0\tX=1\n")
    ok = rankexec(path, "sh", "-c", "head -1 /proc/self/numa_maps")
    assert ok.returncode == 0, ok.stderr
    policy = ok.stdout.split(" file=")[0].split(" ", 1)[1]  # "prefer (many):0" from Linux 5.15
    assert policy in ({f"{mode}:0"} if mode != "preferred" else {"prefer:0", "prefer (many):0"})


# ------------------------------------------------------------- hostile step input (item 8)
def _sample_step(tmp_path: Path, sample: str) -> Path:
    path = tmp_path / "sample.txt"
    path.write_text(f"topobind-rankexec 1\n{sample}\n@*\n0\tX=1\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    "sample",
    ["%sample  200", "%sample / 200", "%sample // 200", "%sample rel/dir 200",
     "%sample {d} 99999999999999999999", "%sample {d} 600001", "%sample {d} -5",
     "%sample {d} 2x", "%sample {d} "],
)  # fmt: skip
def test_a_sample_line_without_a_directory_or_with_a_huge_delay_is_refused(
    tmp_path: Path, sample: str
) -> None:
    """issue 31 item 8: an empty directory made a sampler running as root write into /; a
    huge delay left a detached sampler sleeping for ever."""
    before = set(Path("/").glob("sample-*"))
    marker = tmp_path / "ran"
    out = rankexec(_sample_step(tmp_path, sample.format(d=tmp_path)), "touch", str(marker))
    assert out.returncode == 125 and not marker.exists(), out.stderr
    assert out.stderr == (
        "topobind rankexec: error: "
        f"{tmp_path / 'sample.txt'}: malformed %sample line (%sample DIR MS: DIR an absolute "
        "directory, not /; MS 0 .. 600000)\n"
    )
    assert set(Path("/").glob("sample-*")) == before


def test_the_sampler_ends_with_its_program(tmp_path: Path) -> None:
    """The longest delay allowed (10 min) and a program that ends at once: the sampler
    writes its (empty, 'ended') sample when the program is gone, not 10 minutes later."""
    out = rankexec(_sample_step(tmp_path, f"%sample {tmp_path} 600000"), "true")
    assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("sample-*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (sample,) = tmp_path.glob("sample-*.json")
    doc = json.loads(sample.read_text())
    assert doc["ended"] is True and doc["placement"] == []


@pytest.mark.parametrize("value", ["\u0660", "1x", "-1", " 1", "+1", "99999999999999999999", ""])
def test_an_unreadable_local_rank_is_an_error(tmp_path: Path, value: str) -> None:
    """issue 31 item 8: OMPI_COMM_WORLD_LOCAL_RANK=<Arabic-Indic zero> was skipped, and the
    rank ran rank 0's line (or, with SLURM_LOCALID set, another variable's); issue 37: set
    and empty is unreadable too (docs/step-file.md), it was skipped."""
    path = step_file(tmp_path, "@*\n0\tOMP_PLACES={0}\n1\tOMP_PLACES={1}\n")
    marker = tmp_path / "ran"
    for extra in ({}, {"SLURM_LOCALID": "1"}):
        out = rankexec(path, "touch", str(marker), OMPI_COMM_WORLD_LOCAL_RANK=value, **extra)
        assert out.returncode == 125 and not marker.exists(), out.stderr
        assert out.stderr == (
            f"topobind rankexec: error: OMPI_COMM_WORLD_LOCAL_RANK={value} is not a rank number "
            "(0 .. 100000000): the launcher's variable is unreadable; unset it or launch "
            "through topobind run\n"
        )


@pytest.mark.parametrize(
    "layout,ranks,smt", [("compact", 4, False), ("spread", 3, True), ("per-numa", None, False)]
)
def test_a_binding_step_line_gives_the_mask_srun_would(
    layout: str, ranks: int | None, smt: bool
) -> None:
    """The ``%cpus=`` masks of a step file that binds (``step_file.planned_masks``, the one
    rule of the SPANK path and the per-node launches) are the sets srun's mask_cpu gives."""
    from topobind.launch.step_file import planned_masks

    plan = plan_of(load(str(TOPOLOGIES / "24em64t-2n6c2t-pci.xml")), layout, ranks, smt=smt)
    assert list(planned_masks(plan)) == get("srun").masks(plan)
    assert len(set(planned_masks(plan))) == plan.nranks > 1


# ------------------------------------------------------------------ issue 37 item 24
@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("@*\n0\tX=1\n0\tX=2\n", "local rank 0 has 2 lines for this host (in the @* groups)"),
        ("@*\n0\tX=1\n@*\n0\tX=2\n", "local rank 0 has 2 lines for this host (in the @* groups)"),
        (f"@{socket.gethostname()}\n0\tX=1\n@other,{socket.gethostname()}\n0\tX=2\n",
         "local rank 0 has 2 lines for this host (in the groups naming it)"),
        ("@*\n+0\tX=1\n", "malformed line +0?X=1 (a line starts with its local rank: ASCII "
         "digits, 0 .. 100000000)"),
        ("@*\n0\t%preload=/no/such/libshim.so\tX=1\n", "local rank 0: %preload=/no/such/"
         "libshim.so: No such file or directory; rebuild it (make kernels) or plan without it"),
        ("@*\n0\t%preload=/tmp\tX=1\n", "%preload=/tmp: not a regular file"),
    ],
)  # fmt: skip
def test_a_rank_with_two_lines_a_signed_rank_and_a_missing_preload_are_refused(
    tmp_path: Path, body: str, why: str
) -> None:
    """The first line won silently; '+0' was rank 0; a missing %preload= library ran the
    rank without it (the loader only warns)."""
    path = tmp_path / "rankexec.txt"
    path.write_text("topobind-rankexec 3\n" + body)
    path.chmod(0o600)
    marker = tmp_path / "ran"
    out = rankexec(path, "touch", str(marker))
    assert out.returncode == 125 and not marker.exists(), out
    assert out.stderr.startswith("topobind rankexec: error: ") and out.stderr.count("\n") == 1
    assert why in out.stderr, out.stderr
    other = rankexec(path, "touch", str(marker), OMPI_COMM_WORLD_LOCAL_RANK="1")
    malformed = why.startswith("malformed")  # a malformed line fails every rank
    assert other.returncode == 125 and ("plans no local rank 1" in other.stderr) != malformed


def test_the_writer_never_gives_a_host_two_sections() -> None:
    from topobind.errors import TopobindError
    from topobind.launch.step_file import Section, step_text

    plan = plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=2)
    assert step_text("x", [Section(("a",), plan), Section(("b", "*"), plan)]).count("\n0\t") == 2
    for hosts in (("*",), ("b", "a")):
        with pytest.raises(TopobindError, match="two sections"):
            step_text("x", [Section(("a", "*"), plan), Section(hosts, plan)])


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"0\x00\t%cpus=1\tX=1\n", "line 3, column 2: control byte 0x00 (NUL)"),
        (b"0\tX=a\x00b\t%mem=bind:0\n", "line 3, column 6: control byte 0x00 (NUL)"),
        (b"0\tX=1\r\n", "line 3, column 6: control byte 0x0d (CR"),
        (b"0\tX=\x1b[31m\n", "line 3, column 5: control byte 0x1b (ESC)"),
    ],
)
def test_a_nul_or_control_byte_is_refused_before_anything_applies(
    tmp_path: Path, body: bytes, where: str
) -> None:
    """Issue 47: the NUL ended the rank's line: `0<NUL>...` ran the rank unbound with exit 0,
    `X=a<NUL>b` dropped the fields after it, %mem= included."""
    path = tmp_path / "rankexec.txt"
    path.write_bytes(b"topobind-rankexec 3\n@*\n" + body)
    path.chmod(0o600)
    marker = tmp_path / "ran"
    out = rankexec(path, "touch", str(marker))
    assert out.returncode == 125 and not marker.exists(), out
    assert out.stderr.startswith(f"topobind rankexec: error: {path}: {where}"), out.stderr
    assert out.stderr.count("\n") == 1 and "write it again with topobind" in out.stderr


def test_a_line_of_40000_variables_applies_and_one_over_the_bound_is_refused(
    tmp_path: Path,
) -> None:
    """Issue 47: variables cost the square of their number (setenv each). 40,000 reach the
    program; a line over TB_STEP_MAX_FIELDS (65,536) is refused whole, one line, nothing
    applied (the time is `make bench-rankstep`'s, not a test's)."""
    from topobind.launch.step_file import MAX_FIELDS

    many = "\t".join(f"V{i}={i}" for i in range(40_000))
    out = rankexec(step_file(tmp_path, f"@*\n0\t{many}\tV7=last\n"), "env")
    env = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert out.returncode == 0 and env["V39999"] == "39999" and env["V7"] == "last", out.stderr
    assert out.stdout.count("V7=") == 1
    over = "\t".join(f"V{i}={i}" for i in range(MAX_FIELDS + 1))
    marker = tmp_path / "ran"
    out = rankexec(step_file(tmp_path, f"@*\n0\t{over}\n"), "touch", str(marker))
    assert out.returncode == 125 and not marker.exists() and out.stderr.count("\n") == 1
    assert "the line has more than 65536 fields" in out.stderr


def test_the_writer_refuses_a_control_byte_and_too_many_fields() -> None:
    from topobind.errors import TopobindError
    from topobind.launch.step_file import MAX_FIELDS, Section, step_text

    plan = plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=2)
    for extra, why in [
        ({"X": "a\x00b"}, "without control characters"),
        ({f"V{i}": "1" for i in range(MAX_FIELDS)}, "more than the step file's 65,536"),
    ]:
        with pytest.raises(TopobindError, match=why):
            step_text("x", [Section(("*",), plan)], env=extra)
    with pytest.raises(TopobindError, match="line 3 would hold the control character"):
        step_text("x", [Section(("*",), plan)], sample=("/tmp/a\nb", 10))
