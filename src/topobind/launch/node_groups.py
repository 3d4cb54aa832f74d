"""A plan per group of nodes when a job holds different shares of its nodes.

``sbatch -N 3 -n 5`` holds 2 tasks on two nodes and 1 on the third; a job sharing nodes with
other jobs holds different CPUs on each (Slurm's ``scontrol show job -d``: ``CPU_IDs``, its
abstract ids; Flux's R: core ids; read as OS indexes through
:func:`topobind.topo.allocation.machine_cpus`). One plan applied on every node is then wrong,
so each group of nodes with the same share (tasks, CPUs: the job's
:meth:`topobind.topo.allocation.Allocation.shares`) gets a plan of its own, made from the node
topology restricted to the CPUs the job holds there (:class:`topobind.launch.shape.NodePlan`). The
launch itself is :func:`topobind.launch.build.build` with these groups (``JobShape.groups``): one
plain srun step whose per-rank step binds each rank from its group's section of one file, or one
mpirun with a rankfile naming every host and an application context per group, each
group's ranks through the per-rank step with its own file. Here:
the groups' plans, their description, the comparison of each group with its own plan (the
probe's report or the running program's samples), and the group ``topobind env`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from topobind.errors import TopobindError
from topobind.launch.rank_step import job_env
from topobind.launch.shape import JobShape, NodePlan
from topobind.launch.verify import Observed, Row, compare
from topobind.launch.verify_devices import EnvRow, check_env
from topobind.plan import request
from topobind.plan.model import PlannedRank
from topobind.plan.request import PlanRequest
from topobind.topo.allocation import NodeShare, machine_cpus
from topobind.topo.topology import Topology, format_list, live_whole_xml, node_cores, parse_xml


def plans(req: PlanRequest, topo: Topology) -> list[NodePlan] | None:
    """One plan per share of the job's nodes; None when every node holds the same share (one
    plan fits all), outside an allocation, or for a request that does not follow it."""
    if not req.follow_allocation or req.allocation is None:
        return None
    alloc = req.allocation
    shares = alloc.shares()
    if shares is None or len(shares) < 2:
        return None
    if not topo.xml:
        raise TopobindError(
            f"topology {topo.source!r} has no XML to restrict to each node's CPUs; the job's "
            "nodes hold different CPUs (use the live topology or an hwloc XML)"
        )
    whole = parse_xml(topo.xml, topo.source, hostname=shares[0].hosts[0])
    # The whole node, PUs outside this host's cgroup included: Slurm numbers them all, and
    # another node's share may hold CPUs this host's job step does not.
    xml = live_whole_xml() if topo.source == "live" else topo.xml
    cores = node_cores(xml, topo.source)
    warnings = _numbering_warnings(whole, topo.source, shares)
    out: list[NodePlan] = []
    for share in shares:
        # this group's ranks, from its own share of the allocation
        tasks = share.tasks or None  # 0: the manager names no task count (Flux)
        mine = req._replace(ranks=req.ranks_for(tasks), follow_allocation=False)
        host = share.hosts[0]
        manager = alloc.manager.capitalize()
        cpus = machine_cpus(cores, share.cpu_ids, share.threads_per_core, host, manager)
        where = describe(share, cpus)
        try:
            node = parse_xml(xml, topo.source, hostname=host, job_cpus=cpus)
            plan = request.plan(node, mine)
        except TopobindError as exc:
            raise TopobindError(f"{exc} (on {where})") from exc
        if warnings and not out:
            plan = plan._replace(warnings=(*plan.warnings, *warnings))
        first = out[-1].first_rank + out[-1].plan.nranks * len(out[-1].hosts) if out else 0
        out.append(NodePlan(tuple(share.hosts), plan, first, whole, where))
    return out


def job_topology(req: PlanRequest, topo: Topology) -> Topology:
    """``topo`` kept to the CPUs the job holds on its nodes where the manager does not confine
    a job itself (``Allocation.restricted``: Flux, whose jobs see the whole node) and every
    node holds the same share: a ``flux alloc -n1 -c1`` instance plans its one core, not the
    node. Flux numbers a node's cores as the broker's hwloc shows them (this topology's
    order). Else ``topo`` itself."""
    alloc = req.allocation
    if alloc is None or not alloc.restricted or not topo.xml:
        return topo
    shares = alloc.shares()
    if not shares or len(shares) != 1:
        return topo  # several shares: a plan per group (plans)
    share = shares[0]
    cores = node_cores(topo.xml, topo.source)
    where = share.hosts[0]
    cpus = machine_cpus(cores, share.cpu_ids, share.threads_per_core, where, "Flux")
    if cpus >= {pu for c in topo.cores for pu in c.pus}:
        return topo
    return parse_xml(topo.xml, topo.source, hostname=topo.hostname, job_cpus=cpus)


def _numbering_warnings(whole: Topology, source: str, shares: Sequence[NodeShare]) -> list[str]:
    """When Slurm's CPU ids may name other PUs than topobind reads: an XML file lacking PUs
    of its node (offline, or dropped because it was exported inside a job without
    ``--disallowed``; Slurm numbers every PU it sees), or nodes whose ThreadsPerCore Slurm
    did not show (the topology's is used)."""
    out = []
    absent = sorted(pu for pu, why in whole.excluded_pus.items() if why == "offline")
    if absent and source != "live":  # live: lstopo --disallowed; only offline PUs are absent
        out.append(
            f"{source} lacks PUs {format_list(absent)} of its node (offline, or exported "
            "inside a job): Slurm's CPU ids of the job may then name other PUs; export the "
            "node's topology with 'lstopo-no-graphics --disallowed --of xml' outside any job"
        )
    unknown = [h for share in shares if not share.threads_per_core for h in share.hosts]
    if unknown:
        out.append(
            f"'scontrol show node' shows no ThreadsPerCore of {','.join(unknown)}: Slurm's CPU "
            "ids of the job are read with the topology's threads per core"
        )
    return out


def describe(share: NodeShare, cpus: frozenset[int]) -> str:
    """``node1,node2: 2 task(s), CPUs 0,1``: CPUS, the OS indexes of the share's CPUs (no
    task count where the manager names none; GPUs where it names them)."""
    listed = ",".join(str(c) for c in sorted(cpus))
    tasks = f"{share.tasks} task(s), " if share.tasks else ""
    gpus = f", GPUs {','.join(str(g) for g in sorted(share.gpu_ids))}" if share.gpu_ids else ""
    return f"{','.join(share.hosts)}: {tasks}CPUs {listed}{gpus}"


def compare_per_node(
    node_plans: Sequence[NodePlan], observed: list[Observed], match_threads: bool = False
) -> list[Row]:
    """Each group's ranks against its own plan. The ranks a group reported are numbered from
    the group's first rank (block distribution in node order, what ``topobind run``
    launches), or, when they are not (``srun -m cyclic``), in their order; a rank of such a
    group that no node reported takes the next number no node reported. ``match_threads``:
    the observations are samples of the running program (see :func:`compare`)."""
    rows: list[Row] = []
    groups = {h: np_ for np_ in node_plans for h in np_.hosts}
    total = sum(np_.plan.nranks * len(np_.hosts) for np_ in node_plans)
    unseen = iter(sorted(set(range(total)) - {o.rank for o in observed}))
    for np_ in node_plans:
        mine = [o for o in observed if groups.get(o.host) is np_]
        number, block = _numbering(np_, mine)
        back = {v: k for k, v in number.items()}
        planned = [PlannedRank(r.rank, r.places, r.cpus) for r in np_.plan.ranks]
        local = [replace(o, rank=number[o.rank]) for o in mine]
        for r in compare(planned, local, nnodes=len(np_.hosts), match_threads=match_threads):
            if r.rank not in back:  # a rank no node of the group reported
                back[r.rank] = np_.first_rank + r.rank if block else next(unseen, -1)
            rows.append(replace(r, rank=back[r.rank]))
    for o in observed:
        if o.host not in groups:
            rows.append(Row(o.rank, o.thread, (), o, "UNPLANNED", f"{o.host} is not in the job"))
    rows.sort(key=lambda r: (r.rank, r.thread, r.observed.host if r.observed else ""))
    return rows


def _numbering(np_: NodePlan, mine: list[Observed]) -> tuple[dict[int, int], bool]:
    """{global rank: rank in the group's numbering} of the ranks the group reported, and
    whether they are in block order from the group's first rank (host i of the group holds
    the plan's ranks from first + i * ranks per node) rather than numbered in their order."""
    first, per = np_.first_rank, np_.plan.nranks
    where = {h: i for i, h in enumerate(np_.hosts)}
    block = all(
        0 <= o.rank - first < per * len(where) and (o.rank - first) // per == where[o.host]
        for o in mine
    )
    if block:
        return {o.rank: o.rank - first for o in mine}, True
    return {r: i for i, r in enumerate(sorted({o.rank for o in mine}))}, False


def check_env_per_node(node_plans: Sequence[NodePlan], probe_text: str) -> list[EnvRow]:
    """Per-rank variables (per-gpu plans) of each group's ranks against its own plan."""
    rows: list[EnvRow] = []
    for np_ in node_plans:
        planned = [
            PlannedRank(r.rank, r.places, r.cpus, r.env, tuple(g.pci or "" for g in r.gpus))
            for r in np_.plan.ranks
        ]
        rows += [r for r in check_env(planned, probe_text) if r.host in np_.hosts]
    return sorted(rows, key=lambda r: (r.rank, r.host, r.variable))


def env_group(node_plans: Sequence[NodePlan], step_host: str | None) -> NodePlan:
    """The group whose variables ``topobind env`` prints in a job whose nodes differ.

    When every group's variables are the same, they fit every node (the first group). Else
    they fit only the nodes of one group: inside a job step (``step_host``, the allocation's:
    a task on one node) this node's group; in the batch script, whose exports reach every
    node of the launch that follows, an error naming the fix."""
    variables = [job_env(JobShape(plan=g.plan)) for g in node_plans]
    if all(v == variables[0] for v in variables):
        return node_plans[0]
    host = step_host
    if host is not None:
        short = host.split(".", 1)[0]  # as rankexec matches: the name, or it up to the '.'
        for g in node_plans:
            if host in g.hosts or short in g.hosts:
                return g
        raise TopobindError(f"this host {host!r} is not one of the job's nodes")
    names = dict.fromkeys(k for v in variables for k in v)
    name = next(k for k in names if len({v.get(k) for v in variables}) > 1)
    differ = "; ".join(
        f"{','.join(g.hosts)}: {name}={v.get(name, '(unset)')}"
        for g, v in zip(node_plans, variables, strict=True)
    )
    raise TopobindError(
        f"the job's nodes hold different shares and need different variables ({differ}); "
        "one export cannot fit every node: launch with 'topobind run' (a plan per group of "
        "nodes), or run 'topobind env' on each node inside the job step"
    )
