"""Slurm's CPU ids are not the OS's: ``scontrol show job -d`` prints ``CPU_IDs`` in Slurm's
abstract numbering (core by core in hwloc's logical order), which topobind turns into OS
indexes before it plans a node group (topobind.topo.slurm_allocation.machine_cpus).

The oracle is Slurm itself: a real ``slurmd -D -vvvvv`` loads each shared topology XML
(``HWLOC_XMLFILE``) and prints its block map, ``CPU map[abstract]=>machine``, which
task/affinity uses to bind; the map is read and slurmd is stopped before it serves anything.
And a real cgroup cpuset: a job step confined to CPU 1 still sees the whole node through
``lstopo --disallowed``, so another node's share (CPU 0 there) can be planned.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import TOPOLOGIES

from topobind.errors import TopobindError
from topobind.topo.slurm_allocation import machine_cpus
from topobind.topo.topology import node_cores, parse_xml

XMLS = sorted(TOPOLOGIES.glob("*.xml")) + sorted((TOPOLOGIES / "gpu").glob("*.xml"))
SMT_NODE = TOPOLOGIES / "16em64t-4s2c2t.xml"  # 4 sockets x 2 cores x 2 PUs, OS 0-7 then 8-15


def slurmd_block_map(xml: Path, tmp: Path) -> tuple[int, int, dict[int, int]]:
    """(CPUs, threads per core, {abstract id: OS index}) as Slurm's slurmd reads XML."""
    conf = tmp / "slurm.conf"
    conf.write_text(
        "ClusterName=oracle\nSlurmctldHost=localhost\n"
        f"SlurmdSpoolDir={tmp}/spool\nStateSaveLocation={tmp}/state\n"
        f"SlurmdPidFile={tmp}/slurmd.pid\nSlurmdPort=0\nProctrackType=proctrack/linuxproc\n"
        "TaskPlugin=task/affinity\nNodeName=n1 State=UNKNOWN\nPartitionName=p Nodes=n1\n"
    )
    (tmp / "spool").mkdir()
    env = {**os.environ, "HWLOC_XMLFILE": str(xml)}
    argv = ["slurmd", "-D", "-vvvvv", "-N", "n1", "-f", str(conf)]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    cpus = threads = 0
    block: dict[int, int] = {}
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the CPU count, then the map, one line per CPU it maps
            if m := re.search(r"CPU map\[(\d+)\]=>(\d+)", line):
                block[int(m.group(1))] = int(m.group(2))
            elif cpus:
                break
            elif m := re.search(r"debug:  CPUs:(\d+) .*ThreadsPerCore:(\d+)", line):
                cpus, threads = int(m.group(1)), int(m.group(2))
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert cpus, f"slurmd printed no CPU count for {xml.name}"
    return cpus, threads, block


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("slurmd") is None, reason="slurmd not installed (make setup)")
@pytest.mark.parametrize("xml", XMLS, ids=[p.stem for p in XMLS])
def test_abstract_ids_are_slurmds_own(xml: Path, tmp_path: Path) -> None:
    cpus, threads, block = slurmd_block_map(xml, tmp_path)
    text = xml.read_text()
    cores = node_cores(text, str(xml))
    assert sum(map(len, cores)) == cpus  # Slurm counts every PU the XML holds
    # (irregular nodes, PUs offline or no Package or Core level, get a partial map or none
    # from Slurm itself)
    if not block:
        assert 'type="Package"' not in text or 'type="Core"' not in text
        return
    for abstract, machine in block.items():
        assert machine_cpus(cores, frozenset({abstract}), threads, "n1") == {machine}, abstract
    assert machine_cpus(cores, frozenset(block), threads, "n1") == set(block.values())


def test_an_smt_node_is_numbered_core_by_core() -> None:
    cores = node_cores(SMT_NODE.read_text(), SMT_NODE.name)
    assert cores[:3] == [(0, 8), (4, 12), (1, 9)]
    # CPU_IDs=0-3 (a job of two cores) are OS 0,8,4,12, not OS 0-3 (four packages)
    assert machine_cpus(cores, frozenset(range(4)), 2, "n1") == {0, 8, 4, 12}
    # ThreadsPerCore=1 in slurm.conf over SMT hardware: an id is a whole core
    assert machine_cpus(cores, frozenset({1}), 1, "n1") == {4, 12}


@pytest.mark.parametrize(
    "ids,threads,message",
    [
        (
            {0}, 4,
            "Slurm counts 4 threads per core on n1 but its topology has 2: give topobind that "
            "node's hwloc XML (-t), or fix the node's ThreadsPerCore in slurm.conf",
        ),
        (
            {15, 16}, 2,
            "Slurm gives the job CPU 16 on n1, but the topology has only 8 cores of 2 "
            "thread(s) there: give topobind that node's hwloc XML (-t)",
        ),
    ],
)  # fmt: skip
def test_ids_the_topology_cannot_hold(ids: set[int], threads: int, message: str) -> None:
    cores = node_cores(SMT_NODE.read_text(), SMT_NODE.name)
    with pytest.raises(TopobindError) as err:
        machine_cpus(cores, frozenset(ids), threads, "n1")
    assert str(err.value) == message


CPUSET = Path("/sys/fs/cgroup/cpuset")


@pytest.mark.slow
@pytest.mark.root
def test_a_cgroup_confined_step_still_plans_the_other_nodes_cpus(tmp_path: Path) -> None:
    """The batch step holds CPU 1 of its node (a cpuset cgroup, as task/cgroup makes it); a
    node group of the job holds CPU 0 on its nodes. The whole-node XML keeps CPU 0, and the
    group's topology is that XML with the group's CPUs as its allowed set."""
    if len(os.sched_getaffinity(0)) < 2 or not (CPUSET / "cpuset.cpus").exists():
        pytest.skip("needs 2 CPUs and a cgroup v1 cpuset hierarchy")
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cpuset cgroup")
    group = CPUSET / f"topobind-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cpuset.cpus").write_text("1")
        (group / "cpuset.mems").write_text((CPUSET / "cpuset.mems").read_text())
        script = (
            f"echo $$ > {group}/tasks; "
            f"exec {sys.executable} -c 'from topobind.topo import topology as t; "
            'import sys; sys.stdout.write(t.load("live").xml + "\\0" + t.live_whole_xml())\''
        )
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        group.rmdir()
    assert done.returncode == 0, done.stderr
    confined, whole = done.stdout.split("\0")
    assert [c.pus for c in parse_xml(confined, "live").cores] == [(1,)]
    cpus = sorted(os.sched_getaffinity(0))[:2]
    assert [pu for core in node_cores(whole, "live") for pu in core][:2] == cpus
    other = parse_xml(whole, "live", job_cpus=frozenset({0}))
    assert [c.pus for c in other.cores] == [(0,)]
    assert parse_xml(whole, "live").cores[0].pus == (1,)  # without: this step's cgroup


def test_unknown_threads_per_core_reads_the_topologys_with_a_warning(tmp_path: Path) -> None:
    """A site hiding its nodes from users (PrivateData=nodes): scontrol show node fails, the
    ids are read with the topology's threads per core, and the plan says so."""
    from topobind.launch.node_groups import _numbering_warnings
    from topobind.topo.slurm_allocation import NodeShare, _threads_per_core
    from topobind.topo.topology import load

    if shutil.which("scontrol") is None:
        pytest.skip("scontrol not installed (make setup)")
    (tmp_path / "empty.conf").write_text("")  # (a missing one: scontrol retries for 60 s)
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": str(tmp_path / "empty.conf")}
    assert _threads_per_core(env, ["n1"]) == {}  # a real scontrol that cannot answer
    cores = node_cores(SMT_NODE.read_text(), SMT_NODE.name)
    assert machine_cpus(cores, frozenset({2, 3}), 0, "n1") == {4, 12}
    shares = [NodeShare(("n1", "n2"), 2, frozenset({0, 1}), 0)]
    assert _numbering_warnings(load(str(SMT_NODE)), str(SMT_NODE), shares) == [
        "'scontrol show node' shows no ThreadsPerCore of n1,n2: Slurm's CPU ids of the job "
        "are read with the topology's threads per core"
    ]
