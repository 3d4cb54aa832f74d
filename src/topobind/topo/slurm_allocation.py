"""The Slurm adapter of :mod:`topobind.topo.allocation`: what a Slurm job was given (nodes,
tasks per node, host names, each node's CPUs) from ``SLURM_*`` and ``scontrol``, as the one
:class:`~topobind.topo.allocation.Allocation` record (:func:`allocation`). With the Flux
adapter, the only module that reads ``SLURM_*`` for planning and launch.

Only variables the user asked for count as the allocation's task count:
``SLURM_NTASKS_PER_NODE`` (``--ntasks-per-node``) and ``SLURM_NTASKS`` (``-n``), the latter
divided by ``SLURM_JOB_NUM_NODES``. ``SLURM_TASKS_PER_NODE`` is not used: sbatch sets it even
without ``-n`` (to the CPU count with ``--exclusive``, measured on Slurm 22.05).
"""

import os
import re
from collections.abc import Mapping

from topobind.errors import TopobindError, plural
from topobind.inputs import whole_number
from topobind.topo.allocation import (
    MAX_NODES,
    MAX_TASKS_PER_NODE,
    Allocation,
    NodeShare,
    TasksPerNode,
    machine_cpus,
)
from topobind.topo.hostlist import shown
from topobind.topo.topology import MAX_PUS, parse_list

__all__ = ["MAX_NODES", "MAX_TASKS_PER_NODE", "NodeShare", "TasksPerNode", "machine_cpus"]

_COUNT = re.compile(r"^([0-9]+)(?:\(x([0-9]+)\))?$", re.ASCII)


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def in_slurm(env: Mapping[str, str] | None = None) -> bool:
    return "SLURM_JOB_ID" in _env(env)


def nodes(env: Mapping[str, str] | None = None) -> int:
    e = _env(env)
    name = "SLURM_JOB_NUM_NODES" if e.get("SLURM_JOB_NUM_NODES") else "SLURM_NNODES"
    text = e.get(name) or "1"
    return whole_number(text, name, 1, MAX_NODES)


def expand_counts(text: str, limit: int = MAX_NODES) -> list[int]:
    """Slurm's compressed per-node counts: ``2(x3),1`` -> ``[2, 2, 2, 1]``; at most ``limit``
    nodes (checked before expanding), each count from 1 to :data:`MAX_TASKS_PER_NODE`."""
    out: list[int] = []
    shown = text if len(text) <= 60 else text[:60] + "..."
    for part in text.split(","):
        m = _COUNT.match(part.strip())
        if not m:
            raise TopobindError(f"cannot read the per-node count {shown!r} (expected e.g. 2(x3))")
        count, repeat = (int(g[:10]) for g in (m.group(1), m.group(2) or "1"))
        if not 1 <= count <= MAX_TASKS_PER_NODE or repeat < 1:
            raise TopobindError(
                f"the per-node count {shown!r} has {part.strip()!r}: give counts from 1 to "
                f"{MAX_TASKS_PER_NODE} tasks, each repeated (xN) at least once"
            )
        if len(out) + repeat > limit:
            raise TopobindError(
                f"the per-node count {shown!r} names more than {plural(limit, 'node')} (the "
                "job's node count, or topobind's limit); check SLURM_JOB_NUM_NODES and the "
                "per-node task counts (SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE)"
            )
        out.extend([count] * repeat)
    return out


def tasks_per_node(env: Mapping[str, str] | None = None) -> TasksPerNode | None:
    """Tasks per node the job asked for; None outside Slurm or when no task count was asked.

    Raises when the allocation holds different task counts on different nodes: a plan
    describes one node and is applied on every node."""
    e = _env(env)
    if not in_slurm(e):
        return None
    per_node = e.get("SLURM_NTASKS_PER_NODE", "").strip()
    if per_node:
        n = nodes(e)
        counts = expand_counts(per_node, n)
        source = f"SLURM_NTASKS_PER_NODE={per_node}"
        if len(counts) not in (1, n):
            raise TopobindError(
                f"{source} names {len(counts)} nodes but the job has {n} "
                f"(SLURM_JOB_NUM_NODES={n}); give --ranks R (ranks per node)"
            )
        if len(set(counts)) > 1:
            raise TopobindError(
                f"the allocation has different task counts per node ({source}); topobind plans "
                "the same ranks on every node: give --ranks R (ranks per node)"
            )
        return TasksPerNode(counts[0], source)
    total = e.get("SLURM_NTASKS", "").strip()
    if not total:
        return None
    n = nodes(e)
    tasks = whole_number(total, "SLURM_NTASKS", 1, MAX_NODES * MAX_TASKS_PER_NODE)
    source = f"SLURM_NTASKS={total}" + (f" over SLURM_JOB_NUM_NODES={n}" if n > 1 else "")
    if tasks % n:
        raise TopobindError(
            f"the allocation's tasks do not divide evenly over its nodes ({source}); "
            "topobind plans the same ranks on every node: give --ranks R (ranks per node)"
        )
    return TasksPerNode(tasks // n, source)


def hostnames(env: Mapping[str, str] | None = None, nodelist: str | None = None) -> list[str]:
    """The job's nodes, in Slurm's order (``scontrol show hostnames $SLURM_JOB_NODELIST``);
    with ``nodelist``: the nodes of that host list (any number)."""
    e = _env(env)
    want: int | None = None
    if nodelist is None:
        nodelist = e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST") or ""
        want = nodes(e)
    if not nodelist:
        raise TopobindError(
            "cannot name the job's nodes: SLURM_JOB_NODELIST is unset (the rankfile needs "
            "every node's host name)"
        )
    failed = "cannot expand SLURM_JOB_NODELIST"
    fix = "; the rankfile needs every node's host name"
    hosts = _scontrol(e, ["show", "hostnames", nodelist], failed, fix).split()
    if want is not None and len(hosts) != want:
        raise TopobindError(
            f"{failed} ('scontrol show hostnames {nodelist}': {len(hosts)} host names for "
            f"SLURM_JOB_NUM_NODES={want}){fix}"
        )
    return hosts


def _scontrol(env: Mapping[str, str], args: list[str], failed: str, fix: str = "") -> str:
    """stdout of ``scontrol ARGS``; when it fails, one line: FAILED (the command: why)FIX."""
    import subprocess  # here: 'topobind env' reads the allocation from the environment only

    command = f"'scontrol {' '.join(args)}'"
    try:
        done = subprocess.run(
            ["scontrol", *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            env=dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise TopobindError(f"{failed} ({command}: {why}){fix}") from exc
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise TopobindError(f"{failed} ({command}: {why}){fix}")
    return done.stdout


def _job_cpu_ids(env: Mapping[str, str]) -> dict[str, frozenset[int]]:
    """{host: the job's CPU ids on it} from ``scontrol show job -d $SLURM_JOB_ID``: Slurm's
    abstract ids, not the OS's (see :func:`machine_cpus`)."""

    failed = "cannot read the job's CPUs per node"
    out_text = _scontrol(env, ["show", "job", "-d", env.get("SLURM_JOB_ID", "")], failed)
    pairs = re.findall(r"^\s*Nodes=(\S+) CPU_IDs=(\S+)", out_text, re.M)
    if not pairs:
        raise TopobindError(f"{failed} (scontrol printed no 'Nodes= CPU_IDs=' lines)")
    out: dict[str, frozenset[int]] = {}
    for nodelist, ids in pairs:
        cpus = frozenset(
            parse_list(ids, MAX_PUS - 1, f"{failed}: scontrol's CPU_IDs of {nodelist}")
        )
        for host in hostnames(env, nodelist):
            out[host] = cpus
    return out


def _threads_per_core(env: Mapping[str, str], hosts: list[str]) -> dict[str, int]:
    """{host: ThreadsPerCore} from one ``scontrol show node -o`` of the job's nodes; empty
    when Slurm does not show them (``PrivateData=nodes``)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or ",".join(hosts)
    try:
        text = _scontrol(env, ["show", "node", "-o", nodelist], "cannot read the job's nodes")
    except TopobindError:
        return {}
    out: dict[str, int] = {}
    for line in text.splitlines():
        name = re.search(r"^NodeName=(\S+)", line)
        threads = re.search(r"\bThreadsPerCore=([0-9]{1,9})\b", line)
        if name and threads:
            out[name.group(1)] = int(threads.group(1))
    return out


def tasks_on_each_node(env: Mapping[str, str] | None = None) -> list[int] | None:
    """Tasks on each node of the job, in Slurm's order; None when no task count was asked."""
    e = _env(env)
    per_node = e.get("SLURM_NTASKS_PER_NODE", "").strip()
    if not per_node and e.get("SLURM_NTASKS", "").strip():
        per_node = e.get("SLURM_STEP_TASKS_PER_NODE") or e.get("SLURM_TASKS_PER_NODE", "")
    if not per_node.strip():
        return None
    n = nodes(e)
    counts = expand_counts(per_node.strip(), n)
    if len(counts) == 1 and n > 1:
        counts *= n
    if len(counts) != n:
        raise TopobindError(
            f"the allocation's tasks per node ({per_node}) do not name its {n} nodes"
        )
    return counts


def node_shares(env: Mapping[str, str] | None = None) -> list[NodeShare] | None:
    """The job's nodes grouped by what it holds on them (tasks, CPUs), in Slurm's order;
    None outside Slurm, on one node, or when the job asked for no task count."""
    e = _env(env)
    if not in_slurm(e) or nodes(e) < 2:
        return None
    counts = tasks_on_each_node(e)
    if counts is None:
        return None
    hosts = hostnames(e)
    cpus = _job_cpu_ids(e)
    threads = _threads_per_core(e, hosts)
    missing = [h for h in hosts if h not in cpus]
    if missing:
        raise TopobindError(f"'scontrol show job -d' names no CPUs of the job on {shown(missing)}")
    shares: list[NodeShare] = []
    for host, count in zip(hosts, counts, strict=True):
        last = shares[-1] if shares else None
        share = (count, cpus[host], threads.get(host, 0))
        if last is not None and (last.tasks, last.cpu_ids, last.threads_per_core) == share:
            shares[-1] = NodeShare((*last.hosts, host), *share)
        else:
            shares.append(NodeShare((host,), *share))
    return shares


def allocation(env: Mapping[str, str] | None = None) -> Allocation:
    """This Slurm job's :class:`~topobind.topo.allocation.Allocation`: the node count now,
    the rest (tasks a node, host names, shares: ``scontrol``) on first use."""
    env = dict(_env(env))
    step = env.get("SLURM_STEP_ID", "")
    # a task of a job step (srun), on one node: not the batch script (no SLURM_STEP_ID in
    # Slurm 22.05) nor Slurm's special steps (batch, extern, interactive: ids >= 0xfffffff0)
    in_step = step.isdigit() and int(step) < 0xFFFFFFF0
    cpt = env.get("SLURM_CPUS_PER_TASK", "").strip()
    job = env.get("SLURM_JOB_ID", "").strip()
    return Allocation(
        "slurm",
        nodes(env),
        tasks=lambda: tasks_per_node(env),
        hosts=lambda: hostnames(env),
        shares=lambda: node_shares(env),
        cpus_per_task=cpt,
        workdir=env.get("SLURM_SUBMIT_DIR") or None,
        step_host=(env.get("SLURMD_NODENAME") or _hostname()) if in_step else None,
        job_id=job if job.isascii() and job.isdigit() and len(job) <= 20 else "",
    )


def _hostname() -> str:
    import socket

    return socket.gethostname()


def node_name(env: Mapping[str, str] | None = None) -> str | None:
    """This node's name in Slurm (``SLURMD_NODENAME``, set in a job's steps), or None."""
    return _env(env).get("SLURMD_NODENAME") or None
