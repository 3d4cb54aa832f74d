"""Inside Slurm, `topobind run/env/verify` plan for the allocation: ranks per node from
SLURM_NTASKS_PER_NODE (or SLURM_NTASKS / SLURM_JOB_NUM_NODES), one rankfile block per node
(host names from `scontrol show hostnames`), and verification per node.

Multi-node cases use fake SLURM_* variables and a stand-in `scontrol` on PATH (dry runs);
per-node verification runs the real probe on two "hosts" (a second UTS namespace); the
one-node case also runs on the real local cluster."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from topobind.plan import PlannedRank
from topobind.slurm import expand_counts
from topobind.verify import Observed, compare

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
WHEREAMI = REPO / "kernels" / "bin" / "whereami"
NO_SLURM = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
NODE4 = "synthetic:pack:1 l3:1 core:4 pu:1"  # a 4-core node: OS PUs 0-3
NODE8_SMT = "synthetic:pack:2 l3:1 core:4 pu:2"  # 2 x 4 cores x 2 PUs; eoc needs a rankfile


def tb(
    *args: str, slurm: dict[str, str] | None = None, path: str | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {**NO_SLURM, "TMPDIR": str(cwd), **(slurm or {})}
    if path:
        env["PATH"] = f"{path}:{env['PATH']}"
    return subprocess.run(
        [TOPOBIND, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def job(**kw: str) -> dict[str, str]:
    return {"SLURM_JOB_ID": "42", **{f"SLURM_{k.upper()}": v for k, v in kw.items()}}


def command(stdout: str) -> list[str]:
    line = next(ln for ln in stdout.splitlines() if not ln.startswith(("export ", "#")))
    return shlex.split(line)


def test_expand_counts() -> None:
    assert expand_counts("2") == [2]
    assert expand_counts("2(x3)") == [2, 2, 2]
    assert expand_counts("2(x2),1") == [2, 2, 1]


@pytest.mark.parametrize(
    "slurm,nodes,per_node",
    [
        (job(ntasks="2", ntasks_per_node="2"), 1, 2),  # the audit's example
        (job(ntasks="6", ntasks_per_node="2(x3)", job_num_nodes="3"), 3, 2),
        (job(ntasks="6", job_num_nodes="3"), 3, 2),
        (job(ntasks="4"), 1, 4),
    ],
)
def test_ranks_per_node_come_from_the_allocation(
    slurm: dict[str, str], nodes: int, per_node: int, tmp_path: Path
) -> None:
    args = ["run", "--dry-run", "-t", NODE4, "--rank-step", "always", "--", "./app"]
    out = tb(*args, slurm=slurm, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    argv = command(out.stdout)
    t = 4 // per_node
    masks = ",".join(hex(((1 << t) - 1) << (r * t)) for r in range(per_node))
    assert argv[:5] == [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={per_node * nodes}",
        f"--ntasks-per-node={per_node}",
        f"--cpu-bind=mask_cpu:{masks}",
    ]
    assert f"export OMP_NUM_THREADS={4 // per_node}" in out.stdout
    assert "warning" not in out.stderr
    step = Path(next(a for a in argv if a.endswith("/rankexec.txt"))).read_text()
    assert [ln.split("\t")[0] for ln in step.splitlines()[3:]] == [str(r) for r in range(per_node)]


def test_wrappers_can_ignore_the_allocations_task_count(tmp_path: Path) -> None:
    # A ReFrame check's job holds the node with one task and launches the steps itself.
    def ntasks(slurm: dict[str, str]) -> list[str]:
        args = ["run", "--dry-run", "-t", NODE4, "-l", "every-other-core", "--", "./a"]
        out = tb(*args, slurm=slurm, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "warning" not in out.stderr
        return command(out.stdout)[2:4]

    ignoring = {**job(ntasks="1"), "TOPOBIND_IGNORE_ALLOCATION_TASKS": "1"}
    assert ntasks(ignoring) == ["--ntasks=2", "--ntasks-per-node=2"]
    assert ntasks(job(ntasks="1")) == ["--ntasks=1", "--ntasks-per-node=1"]


def test_explicit_ranks_win_with_a_warning(tmp_path: Path) -> None:
    slurm = job(ntasks="2", ntasks_per_node="2")
    out = tb("run", "--dry-run", "-t", NODE4, "-r", "1", "--", "./a", slurm=slurm, cwd=tmp_path)
    assert out.returncode == 0
    assert command(out.stdout)[3] == "--ntasks-per-node=1"
    assert out.stderr.splitlines()[0] == (
        "topobind: warning: the plan has 1 rank per node but the allocation has 2 tasks per "
        "node (SLURM_NTASKS_PER_NODE=2); --ranks 1 is used"
    )


def test_layouts_with_one_rank_per_domain_keep_their_count(tmp_path: Path) -> None:
    slurm = job(ntasks="4")
    out = tb("run", "--dry-run", "-t", NODE8_SMT, "-l", "per-socket", "--", "./a", slurm=slurm,
             cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0
    assert command(out.stdout)[3] == "--ntasks-per-node=2"
    assert "warning: the plan has 2 ranks per node but the allocation has 4 tasks per node " \
        "(SLURM_NTASKS=4); layout per-socket sets one rank per domain" in out.stderr  # fmt: skip


@pytest.mark.parametrize(
    "slurm,args,message",
    [
        (job(ntasks="5", job_num_nodes="2"), [], "tasks do not divide evenly over its nodes"),
        (job(ntasks_per_node="2(x2),1", job_num_nodes="3"), [], "different task counts per"),
        (job(ntasks="8"), [], "the 8 ranks per node come from the allocation, SLURM_NTASKS=8"),
        (job(ntasks="4"), ["-l", "every-other-core"], "4 ranks but only 2 usable cores"),
    ],
)
def test_allocations_that_cannot_be_planned(
    slurm: dict[str, str], args: list[str], message: str, tmp_path: Path
) -> None:
    out = tb("run", "--dry-run", "-t", NODE4, *args, "--", "./a", slurm=slurm, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and message in out.stderr
    assert out.stderr.startswith("topobind: error: ")
    assert not list(tmp_path.iterdir()), "a failed dry run left files"
    # an explicit --ranks needs no task count from the allocation
    out = tb("run", "--dry-run", "-t", NODE4, "-r", "1", "--", "./a", slurm=slurm, cwd=tmp_path)
    assert out.returncode == 0


def test_env_follows_the_allocation(tmp_path: Path) -> None:
    out = tb("env", "-t", NODE4, slurm=job(ntasks="2"), cwd=tmp_path)
    assert "export OMP_NUM_THREADS=2" in out.stdout and "export OMP_PLACES=cores" in out.stdout
    out = tb("env", "-t", NODE4, cwd=tmp_path)  # outside Slurm: one process, exact places
    assert "export OMP_NUM_THREADS=4" in out.stdout


# --------------------------------------------------------------------------- several nodes
@pytest.fixture
def fake_scontrol(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        'echo "$@" >> "$(dirname "$0")/calls"\n'
        '[ "$1 $2" = "show hostnames" ] || exit 1\n'
        'case "$3" in\n'
        "  'cn[07-08]') printf 'cn07\\ncn08\\n' ;;\n"
        '  *) echo "scontrol: error: Invalid hostlist: $3" >&2; exit 1 ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return bin_dir


TWO_NODES = job(ntasks="4", ntasks_per_node="2", job_num_nodes="2", job_nodelist="cn[07-08]")


@pytest.mark.parametrize("mpi", ["openmpi4", "openmpi5"])
def test_rankfile_has_one_block_per_node(mpi: str, fake_scontrol: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    args = ["run", "--dry-run", "-t", NODE8_SMT, "-l", "every-other-core", "--launcher",
            "mpirun", "--mpi", mpi, "--", "./app"]  # fmt: skip
    out = tb(*args, slurm=TWO_NODES, path=str(fake_scontrol), cwd=work)
    if "mpirun not found" in out.stderr:
        pytest.skip(out.stderr)
    assert out.returncode == 0, out.stderr
    argv = command(out.stdout)
    assert argv[1:3] == ["-np", "4"]
    # several nodes: the rankfile goes where every node reads it (here: the working directory)
    rankfile = Path(work.glob(".topobind-run-*/rankfile").__next__()).read_text()
    ranks = [ln for ln in rankfile.splitlines() if ln.startswith("rank ")]
    slots = ["0,2", "4,6"] if mpi == "openmpi5" else ["0-1,4-5", "8-9,12-13"]  # 5: logical
    assert ranks == [
        f"rank 0=cn07 slot={slots[0]}",
        f"rank 1=cn07 slot={slots[1]}",
        f"rank 2=cn08 slot={slots[0]}",
        f"rank 3=cn08 slot={slots[1]}",
    ]
    assert (fake_scontrol / "calls").read_text() == "show hostnames cn[07-08]\n"


def test_ppr_launch_on_several_nodes_needs_no_host_names(
    fake_scontrol: Path, tmp_path: Path
) -> None:
    args = ["run", "--dry-run", "-t", NODE4, "--launcher", "mpirun", "--", "./app"]
    out = tb(*args, slurm=TWO_NODES, path=str(fake_scontrol), cwd=tmp_path)
    if "mpirun not found" in out.stderr:
        pytest.skip(out.stderr)
    assert out.returncode == 0, out.stderr
    argv = command(out.stdout)
    assert argv[1:3] == ["-np", "4"] and "ppr:2:" in argv[4] and "# rankfile" not in out.stdout
    assert not (fake_scontrol / "calls").exists()


def test_host_names_that_cannot_be_expanded(fake_scontrol: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    slurm = {**TWO_NODES, "SLURM_JOB_NODELIST": "bad[1-2"}
    args = ["run", "--dry-run", "-t", NODE8_SMT, "-l", "every-other-core", "--launcher",
            "mpirun", "--", "./app"]  # fmt: skip
    out = tb(*args, slurm=slurm, path=str(fake_scontrol), cwd=work)
    if "mpirun not found" in out.stderr:
        pytest.skip(out.stderr)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "topobind: error: cannot expand SLURM_JOB_NODELIST ('scontrol show hostnames bad[1-2': "
        "scontrol: error: Invalid hostlist: bad[1-2); the rankfile needs every node's host name"
    ]
    assert not list(work.iterdir())
    out = tb(*args, slurm={**TWO_NODES, "SLURM_JOB_NODELIST": ""}, cwd=work)
    assert out.returncode == 2 and out.stderr.splitlines() == [
        "topobind: error: cannot name the job's nodes: SLURM_JOB_NODELIST is unset (the "
        "rankfile needs every node's host name)"
    ]


# --------------------------------------------------------------------------- verify per node
def _plan(*cpus: int) -> list[PlannedRank]:
    return [PlannedRank(i, ((c,),), (c,)) for i, c in enumerate(cpus)]


def _obs(host: str, rank: int, cpu: int) -> Observed:
    return Observed(host, rank, 0, cpu, (cpu,))


def test_compare_per_node_block_and_cyclic() -> None:
    plan = _plan(0, 1)
    block = [_obs("a", 0, 0), _obs("a", 1, 1), _obs("b", 2, 0), _obs("b", 3, 1)]
    cyclic = [_obs("a", 0, 0), _obs("b", 1, 0), _obs("a", 2, 1), _obs("b", 3, 1)]
    for observed in (block, cyclic):
        rows = compare(plan, observed, nnodes=2)
        assert [(r.rank, r.status) for r in rows] == [(i, "OK") for i in range(4)]
    # rank 2 is node b's local rank 0: planned CPU 0, whatever rank % 2 says
    rows = compare(plan, [_obs("a", 0, 0), _obs("a", 1, 1), _obs("b", 2, 1), _obs("b", 3, 0)])
    assert [r.status for r in rows] == ["OK", "OK", "MISMATCH", "MISMATCH"]
    assert rows[2].reason == "ran on 1, planned 0"


def test_compare_per_node_missing_and_crowded_nodes() -> None:
    plan = _plan(0, 1)
    rows = compare(plan, [_obs("a", 0, 0), _obs("a", 1, 1)], nnodes=2)  # node b never ran
    assert [(r.rank, r.status) for r in rows] == [(0, "OK"), (1, "OK"), (2, "MISSING"),
                                                  (3, "MISSING")]  # fmt: skip
    crowded = [_obs("a", r, r % 2) for r in range(4)]  # all 4 ranks on one node
    rows = compare(plan, crowded, nnodes=2)
    assert [r.status for r in rows[2:]] == ["UNPLANNED", "UNPLANNED"]
    assert "a ran more than the 2 ranks per node" in rows[2].reason
    rows = compare(plan, [_obs("a", 0, 0), _obs("a", 1, 1), _obs("b", 2, 0), _obs("b", 3, 1)])
    assert len(rows) == 4 and all(r.status == "OK" for r in rows)  # nodes: the hosts seen


TWO_HOST_LAUNCH = """#!/usr/bin/env python3
# Two "nodes": ranks 0,1 on this host, ranks 2,3 in a new UTS namespace named node-b; rank i
# bound with taskset to the i-th CPU of $CPUS, one OpenMP thread each.
import os, subprocess, sys
procs = []
for rank, cpu in enumerate(os.environ["CPUS"].split()):
    cmd = ["taskset", "-c", cpu, *sys.argv[1:]]
    if rank >= 2:
        cmd = ["unshare", "--uts", "sh", "-c", 'hostname node-b && exec "$@"', "sh", *cmd]
    env = {**os.environ, "OMPI_COMM_WORLD_RANK": str(rank), "OMP_NUM_THREADS": "1",
           "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    procs.append(subprocess.Popen(cmd, env=env))
sys.exit(max(p.wait() for p in procs))
"""


@pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first")
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 PUs")
def test_verify_compares_each_node_with_the_plan(tmp_path: Path) -> None:
    launch = tmp_path / "two-hosts"
    launch.write_text(TWO_HOST_LAUNCH)
    launch.chmod(0o755)

    def verify(cpus: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                TOPOBIND,
                "verify",
                "-l",
                "compact",
                "-r",
                "2",
                *extra,
                "-f",
                "json",
                "--",
                str(launch),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            env={**NO_SLURM, "CPUS": cpus},
            timeout=60,
        )

    out = verify("0 1 0 1")
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [(r["rank"], r["cpu"], r["status"]) for r in rows] == [
        (0, 0, "OK"), (1, 1, "OK"), (2, 0, "OK"), (3, 1, "OK")]  # fmt: skip
    assert len({r["host"] for r in rows}) == 2 and rows[2]["host"] == "node-b"
    out = verify("0 1 1 0")  # node-b's ranks swapped: caught on that node only
    assert out.returncode == 1
    rows = json.loads(out.stdout)["rows"]
    assert [r["status"] for r in rows] == ["OK", "OK", "MISMATCH", "MISMATCH"]
    out = verify("0 1 0 1", "--nodes", "3")  # a third node never reported
    assert out.returncode == 1
    assert [r["status"] for r in json.loads(out.stdout)["rows"]][4:] == ["MISSING"] * 2


def test_dry_run_on_several_nodes_puts_the_plan_where_every_node_reads_it(tmp_path: Path) -> None:
    shared = tmp_path / "submit"
    shared.mkdir()
    local = tmp_path / "local-tmp"
    local.mkdir()
    slurm = {**job(ntasks="4", job_num_nodes="2"), "SLURM_SUBMIT_DIR": str(shared)}
    env_tmp = {**slurm, "TMPDIR": str(local)}
    always = ("--rank-step", "always")
    out = tb("run", "--dry-run", "-t", NODE4, *always, "--", "./a", slurm=env_tmp, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    argv = command(out.stdout)
    step = Path(next(a for a in argv if a.endswith("/rankexec.txt")))
    assert step.parent.parent == shared and step.exists()
    assert not list(local.iterdir())
    one_node = tb("run", "--dry-run", "-t", NODE4, *always, "--", "./a",
                  slurm={**job(ntasks="2"), "TMPDIR": str(local)}, cwd=tmp_path)  # fmt: skip
    argv = command(one_node.stdout)
    assert Path(next(a for a in argv if a.endswith("/rankexec.txt"))).parent.parent == local


def test_compare_after_a_missing_rank_checks_the_others_against_their_own_pus() -> None:
    plan = _plan(0, 1)
    # block (a: 0,1; b: 2,3), rank 2 missing: rank 3 is b's local rank 1, planned CPU 1
    rows = compare(plan, [_obs("a", 0, 0), _obs("a", 1, 1), _obs("b", 3, 1)], nnodes=2)
    assert [(r.rank, r.status) for r in rows] == [(0, "OK"), (1, "OK"), (2, "MISSING"),
                                                  (3, "OK")]  # fmt: skip
    # cyclic (a: 0,2; b: 1,3), rank 3 missing: rank 1 is b's local rank 0, planned CPU 0
    rows = compare(plan, [_obs("a", 0, 0), _obs("a", 2, 1), _obs("b", 1, 0)], nnodes=2)
    assert [(r.rank, r.status) for r in rows] == [(0, "OK"), (1, "OK"), (2, "OK"),
                                                  (3, "MISSING")]  # fmt: skip
    # and a rank after the gap on the wrong PU is still caught
    rows = compare(plan, [_obs("a", 0, 0), _obs("a", 1, 1), _obs("b", 3, 0)], nnodes=2)
    assert [r.status for r in rows] == ["OK", "OK", "MISSING", "MISMATCH"]
