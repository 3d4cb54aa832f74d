"""The local one-node Slurm cluster (scripts/local-slurm): it starts, is idempotent, really
binds with task/affinity (--cpu-bind masks seen in /proc/self/status), runs MPI through
srun --mpi=pmix and mpirun inside an allocation, and stops leaving nothing behind.

Root only (the fixture skips otherwise). The start/stop tests use their own state directory,
so they never disturb the session's cluster (which other test files share).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import venv_bin
from paths import REPO
from slurm_helpers import (
    SCRIPT,
    SlurmCluster,
    job_info,
    run_script,
    sbatch_wait,
    slurm_cluster,  # noqa: F401  (session fixture)
    slurm_cluster3,  # noqa: F401  (session fixture)
    slurm_env,
    why_unavailable,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]

CPUS = "cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"
OMPI_ROOT = "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"


def write_job(path: Path, body: str, ntasks: int = 2) -> Path:
    path.write_text(f"#!/bin/bash\n#SBATCH --ntasks={ntasks}\n#SBATCH --time=2\n{body}")
    return path


def rank_cpus(output: str) -> dict[int, str]:
    """{rank: Cpus_allowed_list} from lines 'rank=R cpus=LIST ...'."""
    return {
        int(m.group(1)): m.group(2) for m in re.finditer(r"^rank=(\d+) cpus=(\S+)", output, re.M)
    }


def node_cpus(cluster: SlurmCluster) -> int:
    out = cluster.run(["scontrol", "-o", "show", "node", cluster.node])
    m = re.search(r"CPUTot=(\d+)", out.stdout)
    assert m, out.stdout + out.stderr
    return int(m.group(1))


@pytest.fixture
def two_cpus(slurm_cluster: SlurmCluster) -> SlurmCluster:  # noqa: F811
    if node_cpus(slurm_cluster) < 2:
        pytest.skip("needs a node with at least 2 CPUs")
    return slurm_cluster


# --- the running cluster ---------------------------------------------------------------------


def test_start_again_is_a_noop_and_status_env_work(slurm_cluster: SlurmCluster) -> None:  # noqa: F811
    before = run_script("status", slurm_cluster.state_dir)
    assert before.returncode == 0, before.stdout + before.stderr
    again = run_script("start", slurm_cluster.state_dir)
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stdout
    after = run_script("status", slurm_cluster.state_dir)
    assert after.returncode == 0
    # same daemons (pids) before and after the second start
    assert before.stdout.splitlines()[0] == after.stdout.splitlines()[0]
    assert re.search(
        rf"debug\*\s+up .*\s(idle|mixed|allocated)\s+{slurm_cluster.node}$", after.stdout, re.M
    )
    # 'env' is what a shell evals to use the cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TOPOBIND_SLURM_DIR"] = str(slurm_cluster.state_dir)
    out = subprocess.run(
        ["bash", "-c", f'eval "$({SCRIPT} env)"; echo "$SLURM_CONF"; sinfo -h -o %D'],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(slurm_cluster.conf), "1"]


def test_node_is_this_machine(slurm_cluster: SlurmCluster) -> None:  # noqa: F811
    real = subprocess.run(["slurmd", "-C"], capture_output=True, text=True).stdout
    want = dict(re.findall(r"(\w+)=(\S+)", real.splitlines()[0]))
    node = slurm_cluster.run(["scontrol", "-o", "show", "node", slurm_cluster.node]).stdout
    got = dict(re.findall(r"(\w+)=(\S+)", node))
    assert got["CPUTot"] == want["CPUs"] == str(os.cpu_count())
    assert int(got["Sockets"]) == int(want["SocketsPerBoard"]) * int(want["Boards"])
    assert got["CoresPerSocket"] == want["CoresPerSocket"]
    assert got["ThreadsPerCore"] == want["ThreadsPerCore"]
    assert got["RealMemory"] == want["RealMemory"]
    config = slurm_cluster.run(["scontrol", "show", "config"]).stdout
    for key, value in [
        ("SelectType", "select/cons_tres"),
        ("SelectTypeParameters", "CR_CORE"),
        ("TaskPlugin", "task/affinity"),
        ("ProctrackType", "proctrack/linuxproc"),
    ]:
        assert re.search(rf"^{key}\s+=\s+{value}$", config, re.M), f"{key} != {value}"


@pytest.mark.parametrize(
    "bind,expected,use_wait",
    [
        ("map_cpu:1,0", {0: "1", 1: "0"}, False),
        ("mask_cpu:0x1,0x2", {0: "0", 1: "1"}, False),
        ("mask_cpu:0x2,0x1", {0: "1", 1: "0"}, False),  # not what auto-binding would do
        # a fat mask stays fat; and the real 'sbatch --wait' once (not for the session's first
        # job: slurmctld takes ~2 s to schedule that, and sbatch --wait polls after 2 s, 10 s)
        ("mask_cpu:0x3,0x2", {0: "0-1", 1: "1"}, True),
    ],
)
def test_cpu_bind_is_applied(
    two_cpus: SlurmCluster, tmp_path: Path, bind: str, expected: dict[int, str], use_wait: bool
) -> None:
    script = write_job(
        tmp_path / "bind.sbatch",
        f"srun -n 2 --cpu-bind={bind} bash -c 'echo rank=$SLURM_PROCID {CPUS}'\n",
    )
    job = sbatch_wait(script, cluster=two_cpus, workdir=tmp_path, use_wait=use_wait)
    assert job.ok, job.describe()
    assert rank_cpus(job.output) == expected, job.describe()


def test_step_environment(two_cpus: SlurmCluster, tmp_path: Path) -> None:
    script = write_job(
        tmp_path / "env.sbatch",
        "env | grep -E '^SLURM_(CPUS_ON_NODE|JOB_CPUS_PER_NODE|CPU_BIND)' | sed 's/^/batch /'\n"
        "srun -n 2 --cpu-bind=map_cpu:1,0 bash -c "
        "'[ $SLURM_PROCID = 0 ] && env | grep ^SLURM_ | sed \"s/^/map /\"'\n"
        "srun -n 1 --exact bash -c 'env | grep ^SLURM_ | sed \"s/^/exact /\"'\n",
    )
    job = sbatch_wait(script, cluster=two_cpus, workdir=tmp_path)
    assert job.ok, job.describe()
    lines: dict[str, dict[str, str]] = {"batch": {}, "map": {}, "exact": {}}
    for where, key, value in re.findall(r"^(\w+) (SLURM_\w+)=(.*)$", job.output, re.M):
        lines[where][key] = value
    batch, mapped, exact = lines["batch"], lines["map"], lines["exact"]
    # the batch script: the job's CPUs, no binding variables (those are per step)
    assert batch == {"SLURM_CPUS_ON_NODE": "2", "SLURM_JOB_CPUS_PER_NODE": "2"}
    assert mapped["SLURM_CPU_BIND_TYPE"] == "map_cpu:"
    assert mapped["SLURM_CPU_BIND_LIST"] == "1,0"
    assert mapped["SLURM_CPU_BIND"] == "quiet,map_cpu:1,0"
    assert mapped["SLURM_STEP_NUM_TASKS"] == "2"
    assert mapped["SLURM_STEP_TASKS_PER_NODE"] == "2"
    assert mapped["SLURM_STEP_ID"] == "0"
    assert mapped["SLURM_CPUS_ON_NODE"] == "2"
    # an --exact step: SLURM_CPUS_ON_NODE is the step's CPUs, the job's stay in JOB_CPUS
    assert exact["SLURM_CPUS_ON_NODE"] == "1"
    assert exact["SLURM_JOB_CPUS_PER_NODE"] == "2"
    assert exact["SLURM_STEP_ID"] == "1"
    assert exact["SLURM_CPU_BIND"] == "quiet,mask_cpu:0x1"  # auto-binding shows as a mask


def test_mask_must_lie_in_the_step_allocation(two_cpus: SlurmCluster, tmp_path: Path) -> None:
    """A mask/map is honoured when its CPUs are in the step's allocation (the whole node
    is not needed), and the launch fails when they are not; --exact and -c limit a step to
    the CPUs it asks for (the lowest free ones)."""
    cases = {
        "whole": "-n 1 --cpu-bind=map_cpu:1",  # a step gets all the job's CPUs by default
        "c2": "-n 1 -c 2 --cpu-bind=mask_cpu:0x2",
        "exact": "-n 1 --exact --cpu-bind=map_cpu:1",  # holds CPU 0 only
        "c1": "-n 1 -c 1 --cpu-bind=mask_cpu:0x2",  # -c implies --exact
    }
    body = "".join(
        f"srun {flags} bash -c 'echo rank=$SLURM_PROCID {CPUS} case={name}' 2>&1;"
        f" echo rc={name}=$?\n"
        for name, flags in cases.items()
    )
    job = sbatch_wait(
        write_job(tmp_path / "outside.sbatch", body), cluster=two_cpus, workdir=tmp_path
    )
    assert job.ok, job.describe()
    ran = {case: cpus for cpus, case in re.findall(r"cpus=(\S+) case=(\w+)", job.output)}
    rcs = dict(re.findall(r"^rc=(\w+)=(\d+)$", job.output, re.M))
    assert ran == {"whole": "1", "c2": "1"}, job.describe()
    assert rcs["whole"] == rcs["c2"] == "0"
    assert rcs["exact"] != "0" and rcs["c1"] != "0"
    assert job.output.count("CPU binding outside of job step allocation") == 2, job.describe()


# --- several nodes ---------------------------------------------------------------------------


def test_three_nodes_are_separate_hosts_on_the_same_cpus(
    slurm_cluster3: SlurmCluster,  # noqa: F811
) -> None:
    """sinfo shows 3 idle nodes; a step on each runs with that node's host name and address,
    resolves every node's name (the nodes' own /etc/hosts), and sees this machine's CPUs."""
    c = slurm_cluster3
    assert c.nodes == ("node1", "node2", "node3")
    sinfo = c.run(["sinfo", "-h", "-o", "%D %T %N"])
    assert sinfo.stdout.split() == ["3", "idle", "node[1-3]"], sinfo.stdout + sinfo.stderr
    probe = (
        'echo "$(hostname) $SLURM_NODEID $(hostname -I) '
        "$(getent hosts node1 node2 node3 | awk '{print $1}' | tr '\\n' ,) "
        '$(nproc --all)"'
    )
    out = c.run(["srun", "-N", "3", "--ntasks-per-node=1", "bash", "-c", probe])
    assert out.returncode == 0, out.stderr
    rows = sorted(line.split() for line in out.stdout.splitlines())
    assert [r[:2] for r in rows] == [["node1", "0"], ["node2", "1"], ["node3", "2"]]
    addresses = rows[0][3].rstrip(",").split(",")
    assert [r[2] for r in rows] == addresses  # each node's address is the one all resolve
    assert len(set(addresses)) == 3 and all(r[3] == rows[0][3] for r in rows)
    assert {r[4] for r in rows} == {str(os.cpu_count())}
    # the host's /etc/hosts is untouched: node names do not resolve here
    assert subprocess.run(["getent", "hosts", "node2"], capture_output=True).returncode != 0


# --- MPI -------------------------------------------------------------------------------------

HELLO_C = r"""
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0, n = 0;
  char cpus[256] = "";
  cpu_set_t set;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  sched_getaffinity(0, sizeof set, &set);
  for (int c = 0; c < CPU_SETSIZE && n < 200; c++)
    if (CPU_ISSET(c, &set)) n += snprintf(cpus + n, sizeof cpus - n, "%s%d", n ? "," : "", c);
  printf("rank=%d cpus=%s size=%d sum=%d\n", rank, cpus, size, sum);
  MPI_Finalize();
  return 0;
}
"""

MPIS = {
    "ompi4": Path("/usr/bin"),
    "ompi5": venv_bin("mpirun").parent,
}


@pytest.fixture(scope="module", params=sorted(MPIS))
def mpi(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, Path]:
    """(name, mpirun, hello binary built with that MPI's mpicc)."""
    name = request.param
    bindir = MPIS[name]
    if not (bindir / "mpicc").exists() or not (bindir / "mpirun").exists():
        pytest.skip(f"{name}: no mpicc/mpirun in {bindir}")
    d = tmp_path_factory.mktemp(f"hello-{name}")
    (d / "hello.c").write_text(HELLO_C)
    out = subprocess.run(
        [str(bindir / "mpicc"), "-O1", "-o", str(d / "hello"), str(d / "hello.c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return name, bindir / "mpirun", d / "hello"


def test_mpi_hello_through_srun_pmix(
    two_cpus: SlurmCluster, tmp_path: Path, mpi: tuple[str, Path, Path]
) -> None:
    _, _, hello = mpi
    body = f"srun --mpi=pmix -n 2 --cpu-bind=map_cpu:1,0 {hello}\n"
    job = sbatch_wait(write_job(tmp_path / "pmix.sbatch", body), cluster=two_cpus, workdir=tmp_path)
    assert job.ok, job.describe()
    assert rank_cpus(job.output) == {0: "1", 1: "0"}, job.describe()
    assert job.output.count("size=2 sum=1") == 2, job.describe()  # one MPI job, not singletons


def test_mpirun_inside_the_allocation(
    two_cpus: SlurmCluster, tmp_path: Path, mpi: tuple[str, Path, Path]
) -> None:
    """mpirun takes its slots from the allocation and binds; with the daemon forced onto the
    (only) node it launches it through srun (the multi-node path) and still works."""
    name, mpirun, hello = mpi
    on_hn = (
        "--mca ras_base_launch_orted_on_hn 1"
        if name == "ompi4"
        else "--prtemca ras_base_launch_orted_on_hn 1"
    )
    verbose = "--mca plm_base_verbose 5" if name == "ompi4" else "--prtemca plm_base_verbose 5"
    body = (
        OMPI_ROOT
        + f"{mpirun} -n 2 --map-by core --bind-to core {hello}\n"
        + f"{mpirun} -n 3 {hello} >/dev/null 2>&1; echo too-many-rc=$?\n"
        + f"{mpirun} -n 2 --map-by core --bind-to core {on_hn} {verbose} {hello} 2>&1"
        + " | grep -E '^rank=|^\\s*srun ' | sed 's/^rank=/via-srun rank=/'\n"
    )
    job = sbatch_wait(
        write_job(tmp_path / "mpirun.sbatch", body), cluster=two_cpus, workdir=tmp_path
    )
    assert job.ok, job.describe()
    direct = rank_cpus(job.output)
    assert sorted(direct.values()) == ["0", "1"], job.describe()  # one core each
    assert job.output.count("size=2 sum=1") == 4, job.describe()
    assert re.search(r"^too-many-rc=[1-9]", job.output, re.M), "3 ranks on 2 slots must fail"
    assert re.search(r"^\s*srun .*--ntasks=1 (orted|prted) ", job.output, re.M), job.describe()
    via = dict(re.findall(r"^via-srun rank=(\d+) cpus=(\S+)", job.output, re.M))
    assert sorted(via.values()) == ["0", "1"], job.describe()


# --- start / stop in a directory of its own --------------------------------------------------


def _pids_with(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                pids.append(int(p.name))
    return pids


@pytest.fixture
def own_dir(tmp_path: Path) -> Iterator[Path]:
    reason = why_unavailable()
    if reason:
        pytest.skip(reason)
    d = tmp_path / "cluster"
    yield d
    if _pids_with(f"{d}/"):
        run_script("stop", d)


def test_lifecycle_unclean_stop_and_stale_pid_files(own_dir: Path) -> None:
    d = own_dir
    st = run_script("status", d)
    assert st.returncode == 1 and "not running" in st.stdout
    first = run_script("start", d)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "nodes node1 are idle" in first.stdout
    default_conf = REPO / "build" / "local-slurm" / "slurm.conf"
    conf = (d / "slurm.conf").read_text()
    if default_conf.exists():  # ports derive from the directory: no clash with the other one
        port = re.search(r"^SlurmctldPort=(\d+)", conf, re.M)
        assert port and f"SlurmctldPort={port.group(1)}\n" not in default_conf.read_text()
    assert run_script("start", d).stdout.count("already running") == 1

    # a drained node is resumed by 'start'
    env = slurm_env(d)
    node = "node1"
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=drain", "reason=test"],
        env=env,
        check=True,
    )
    resumed = run_script("start", d)
    assert "state=resume" in resumed.stdout and f"{node} idle" in resumed.stdout

    # a running job, then the daemons die without a clean stop
    sub = subprocess.run(
        ["sbatch", "--parsable", "-o", str(d / "sleep.out"), "--wrap", "srun sleep 3171"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    job_id = int(sub.stdout.strip())
    for _ in range(100):
        if _pids_with("sleep 3171") and job_info(job_id, env).get("JobState") == "RUNNING":
            break
        time.sleep(0.1)
    assert _pids_with("sleep 3171"), (
        f"the job's step did not start: {job_info(job_id, env)}\n"
        + (d / "sleep.out").read_text(errors="replace")
        + (d / "log" / "slurmd.log").read_text(errors="replace")[-3000:]
    )
    for name in ("slurmctld", "slurmd-node1"):
        os.kill(int((d / f"{name}.pid").read_text()), signal.SIGKILL)
    time.sleep(0.3)
    # stale pid files: one names a dead pid, the other a live process that is not Slurm (us)
    (d / "slurmd-node1.pid").write_text("4194000\n")
    (d / "slurmctld.pid").write_text(f"{os.getpid()}\n")
    st = run_script("status", d)
    assert st.returncode == 1 and "not running properly" in st.stdout, st.stdout

    again = run_script("start", d)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "cleaning up" in again.stdout and "clear job state" in again.stdout
    assert not _pids_with("sleep 3171"), "the orphaned job step survived the restart"
    queue = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env)
    assert queue.returncode == 0 and queue.stdout.strip() == ""  # no ghost job

    busy = run_script("start", d, args=["--nodes", "2"])
    assert busy.returncode == 1 and "already running with 1 node(s)" in busy.stderr
    netns = run_script("netns", d, args=["node1"]).stdout.strip()
    assert netns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout

    stop = run_script("stop", d)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert _pids_with(f"{d}/") == []
    # the node's namespace, its veth and the bridge are gone
    assert (
        netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert netns.split("-")[0] not in links
    assert not (d / "running").exists()
    st = run_script("status", d)
    assert st.returncode == 1 and "not running" in st.stdout
    assert run_script("stop", d).returncode == 0  # stopping a stopped cluster is fine


def test_port_in_use_is_a_clear_error(own_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env |= {"TOPOBIND_SLURM_DIR": str(own_dir), "TOPOBIND_SLURM_PORT": str(port)}
        out = subprocess.run(
            [str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=60
        )
    assert out.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr
    assert "TOPOBIND_SLURM_PORT" in out.stderr
    assert _pids_with(f"{own_dir}/") == []


def test_bad_node_counts(own_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TOPOBIND_SLURM_DIR"] = str(own_dir)
    for bad in ("0", "65", "abc", "07", "-1", "1 2", ""):  # '' started 1 node (issue 47)
        for argv in (["--nodes", bad], [f"--nodes={bad}"]):
            out = subprocess.run([str(SCRIPT), "start", *argv], capture_output=True,
                                 text=True, timeout=30, env=env)  # fmt: skip
            assert out.returncode == 1 and out.stderr == (
                f"local-slurm: error: --nodes {bad or repr('')}: give a whole number of nodes "
                "from 1 to 64; nothing started\n"
            )
    assert not own_dir.exists() and _pids_with(f"{own_dir}/") == []  # nothing started
    for bad in ("node0", "node65", "nodeX"):
        out = subprocess.run([str(SCRIPT), "kill-node", bad], capture_output=True, text=True,
                             timeout=30, env=env)  # fmt: skip
        assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
        assert f"kill-node {bad}: name a node of the cluster (node1..node64)" in out.stderr


def test_many_nodes_start_kill_any_and_stop(own_dir: Path) -> None:
    """40 nodes (node1..node40, each its own slurmd and namespace) start, every one idle; any
    node can be killed (its slurmd goes, slurmctld still lists it) and 'start' revives it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env |= {"TOPOBIND_SLURM_DIR": str(own_dir)}
    started = run_script("start", own_dir, args=["--nodes", "40"])
    try:
        assert started.returncode == 0, started.stderr
        conf = {"SLURM_CONF": str(own_dir / "slurm.conf")}
        sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True,
                               text=True, timeout=30, env=env | conf)  # fmt: skip
        states = dict(line.split() for line in sinfo.stdout.splitlines())
        assert sorted(states) == sorted(f"node{i}" for i in range(1, 41))
        assert set(states.values()) == {"idle"}, states
        killed = run_script("kill-node", own_dir, args=["node37"])
        assert killed.returncode == 0 and "killed everything on node37" in killed.stdout
        assert len(_slurmd_args(own_dir)) == 39
        assert not any(a.endswith("-N node37 ") for a in _slurmd_args(own_dir))
        again = run_script("start", own_dir)
        assert again.returncode == 0 and "node node37 has no slurmd; starting it" in again.stdout
        assert any(a.endswith("-N node37 ") for a in _slurmd_args(own_dir))
    finally:
        assert run_script("stop", own_dir).returncode == 0
    assert _pids_with(f"{own_dir}/") == []


def test_the_daemons_do_not_hold_the_callers_lock(own_dir: Path, tmp_path: Path) -> None:
    """Started under 'flock LOCK' (the lock's descriptor open in the caller), munged,
    slurmctld and slurmd must not keep that descriptor: they would hold the lock for as long
    as the cluster runs (another checkout's cluster blocked every test waiting on it)."""
    lock = tmp_path / "the.lock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TOPOBIND_SLURM_DIR"] = str(own_dir)
    started = subprocess.run(["flock", str(lock), str(SCRIPT), "start", "--nodes", "2"],
                             capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        holders = []
        for pid in _pids_with(f"{own_dir}/"):
            fds = Path(f"/proc/{pid}/fd")
            for fd in fds.iterdir() if fds.exists() else []:
                try:
                    if os.readlink(fd) == str(lock):
                        holders.append(pid)
                except OSError:
                    continue
        assert holders == []
        again = subprocess.run(["flock", "-n", str(lock), "true"], timeout=30)
        assert again.returncode == 0  # free once 'start' returned
    finally:
        assert run_script("stop", own_dir).returncode == 0


def _slurmd_args(d: Path) -> list[str]:
    """The command lines of the slurmd of the cluster in ``d``."""
    out = []
    for pid in _pids_with(f"{d}/slurm.conf -N "):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return out


def test_usage() -> None:
    out = subprocess.run([str(SCRIPT), "bogus"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: scripts/local-slurm start [--nodes N]|stop|status|env")
