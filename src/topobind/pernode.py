"""A plan per group of nodes when a Slurm job holds different shares of its nodes.

``sbatch -N 3 -n 5`` holds 2 tasks on two nodes and 1 on the third; a job sharing nodes with
other jobs holds different CPUs on each (``scontrol show job -d``: ``CPU_IDs``). One plan
applied on every node is then wrong, so each group of nodes with the same share (tasks, CPUs:
:func:`topobind.slurm.node_shares`) gets a plan of its own, made from the node topology
restricted to the CPUs the job holds there. The launch is one heterogeneous srun step (one
MPI job, ranks numbered across the components in node order): one component per group with
its ``--nodelist``, tasks, ``--cpu-bind`` masks and OpenMP variables. Through OpenMPI's
``mpirun``: a rankfile naming every host with its own group's slots, and one application
context per group (``-np N ... : -np M ...``) for its OpenMP variables and its per-rank
step file (``rankexec-K.txt``, read by kernels/bin/rankexec).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, replace

from topobind import slurm
from topobind.emit.omp import omp_env
from topobind.emit.srun import srun_argv
from topobind.errors import TopobindError
from topobind.layouts import make_plan, one_rank_per_domain
from topobind.plan import Plan, PlannedRank
from topobind.topology import Topology, format_list, parse_xml
from topobind.verify import Observed, Row, compare


@dataclass(frozen=True)
class NodePlan:
    share: slurm.NodeShare
    plan: Plan  # for each node of the share
    first_rank: int  # global rank of the plan's rank 0 on share.hosts[0] (node order, block)
    node: Topology  # the whole node (not restricted to the share's CPUs)


def plans(args: argparse.Namespace, topo: Topology) -> list[NodePlan] | None:
    """One plan per share of the job's nodes; None when every node holds the same share (one
    plan fits all), outside Slurm, or when TOPOBIND_IGNORE_ALLOCATION_TASKS=1."""
    if os.environ.get("TOPOBIND_IGNORE_ALLOCATION_TASKS") == "1":
        return None
    shares = slurm.node_shares()
    if shares is None or len(shares) < 2:
        return None
    if not topo.xml:
        raise TopobindError(
            f"topology {topo.source!r} has no XML to restrict to each node's CPUs; the job's "
            "nodes hold different CPUs (use the live topology or an hwloc XML)"
        )
    whole = parse_xml(topo.xml, topo.source, hostname=shares[0].hosts[0])
    out: list[NodePlan] = []
    for share in shares:
        ranks = args.ranks
        if ranks is None and not one_rank_per_domain(args.layout):
            ranks = share.tasks
        node = parse_xml(topo.xml, topo.source, affinity=share.cpus, hostname=share.hosts[0])
        try:
            plan = make_plan(node, args.layout, ranks=ranks, threads=args.threads, smt=args.smt)
        except TopobindError as exc:
            raise TopobindError(f"{exc} (on {describe(share)})") from exc
        first = out[-1].first_rank + out[-1].plan.nranks * len(out[-1].share.hosts) if out else 0
        out.append(NodePlan(share, plan, first, whole))
    return out


def describe(share: slurm.NodeShare) -> str:
    cpus = ",".join(str(c) for c in sorted(share.cpus))
    return f"{','.join(share.hosts)}: {share.tasks} task(s), CPUs {cpus}"


def srun_argv_per_node(node_plans: list[NodePlan], step: list[list[str]]) -> list[str]:
    """One heterogeneous srun step: component k runs ``step[k]`` on node_plans[k]'s nodes
    with its masks and OpenMP variables (``env K=V ...``: --export cannot carry commas)."""
    argv: list[str] = ["srun"]
    for k, (np_, cmd) in enumerate(zip(node_plans, step, strict=True)):
        hosts = np_.share.hosts
        s = srun_argv(np_.plan)
        if k:
            argv.append(":")
        argv += [
            f"--nodes={len(hosts)}",
            f"--nodelist={','.join(hosts)}",
            f"--ntasks={np_.plan.nranks * len(hosts)}",
            *s.argv[1:],
            *_omp_prefix(np_.plan),
            *cmd,
        ]
    return argv


def compare_per_node(node_plans: list[NodePlan], observed: list[Observed]) -> list[Row]:
    """Each group's ranks against its own plan (ranks numbered from the group's first)."""
    rows: list[Row] = []
    groups = {h: np_ for np_ in node_plans for h in np_.share.hosts}
    for np_ in node_plans:
        first = np_.first_rank
        mine = [replace(o, rank=o.rank - first) for o in observed if groups.get(o.host) is np_]
        planned = [PlannedRank(r.rank, r.places, r.cpus) for r in np_.plan.ranks]
        rows += [
            replace(r, rank=r.rank + first)
            for r in compare(planned, mine, nnodes=len(np_.share.hosts))
        ]
    for o in observed:
        if o.host not in groups:
            rows.append(Row(o.rank, o.thread, (), o, "UNPLANNED", f"{o.host} is not in the job"))
    rows.sort(key=lambda r: (r.rank, r.thread, r.observed.host if r.observed else ""))
    return rows


def _omp_prefix(plan: Plan) -> list[str]:
    return ["env", *(f"{key}={value}" for key, value in omp_env(plan).items())]


def rankfile_per_node(node_plans: list[NodePlan], version: int) -> str:
    """One OpenMPI rankfile naming every host with its group's slots, ranks in node order.
    4.x: OS PU indexes (``--mca rmaps_rank_file_physical 1``). 5.x: hwloc logical core (PU
    with SMT) indexes of the WHOLE node: PRRTE numbers them over the node, not over the CPUs
    the job holds there (a plan restricted to CPU 1 of 2 must say slot=1, not 0)."""
    out = [f"# topobind rankfile for OpenMPI {version}.x, a plan per group of nodes"]
    rank = 0
    for np_ in node_plans:
        core_of = {pu: i for i, core in enumerate(np_.node.cores) for pu in core.pus}
        pu_logical = np_.node.pu_logical()
        out.append(f"# {describe(np_.share)}")
        for host in np_.share.hosts:
            for r in np_.plan.ranks:
                if version == 5:
                    index = pu_logical if np_.plan.smt else core_of
                    ids = sorted({index[pu] for pu in r.cpus})
                else:
                    ids = list(r.cpus) if np_.plan.smt else list(np_.plan.core_pus(r))
                out.append(f"rank {rank}={host} slot={format_list(ids)}")
                rank += 1
    return "\n".join(out) + "\n"


def mpirun_argv_per_node(
    node_plans: list[NodePlan], step: list[list[str]], version: int, rankfile_path: str
) -> list[str]:
    """``mpirun`` (argv[0] to be replaced by its path) with the rankfile of
    :func:`rankfile_per_node` and one application context per group."""
    smt = any(np_.plan.smt for np_ in node_plans)
    bind = "hwthread" if smt else "core"
    if version == 5:
        mod = ":hwtcpus" if smt else ""
        argv = ["mpirun", "--map-by", f"rankfile:file={rankfile_path}{mod}", "--bind-to", bind]
    else:
        argv = ["mpirun", "--rankfile", rankfile_path, "--mca", "rmaps_rank_file_physical", "1"]
    for k, (np_, cmd) in enumerate(zip(node_plans, step, strict=True)):
        if k:
            argv.append(":")
        argv += ["-np", str(np_.plan.nranks * len(np_.share.hosts)), *_omp_prefix(np_.plan), *cmd]
    return argv
