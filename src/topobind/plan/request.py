"""What a planning command asks for, as one typed value the engine takes.

The command layer turns its options into a :class:`PlanRequest` once
(``commands/common.request_from``): the layout spelled ``NAME[:N]`` is parsed there, and
whether the ranks per node follow the Slurm allocation is decided there (the commands that
launch inside a job, unless ``TOPOBIND_IGNORE_ALLOCATION_TASKS=1``). The engine
(:func:`plan`, :func:`plan_for_job`, ``pernode.plans``, ``jobrun.node_groups``) reads only the
request. A new planning option (``--mem``) is one field here, named as the option's ``dest``:
``request_from`` copies every field it finds by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from topobind.errors import PlanError, TopobindError, plural
from topobind.plan.layouts import Layout, parse_layout, plan_layout
from topobind.plan.memory import plan_memory
from topobind.plan.model import Plan
from topobind.topo import slurm_allocation as slurm
from topobind.topo.topology import Topology, load

#: environment variable: "1" = plan without the allocation's task count (the ReFrame checks,
#: whose job holds the node with one task and launches every step itself)
IGNORE_ALLOCATION_TASKS = "TOPOBIND_IGNORE_ALLOCATION_TASKS"


@dataclass(frozen=True)
class PlanRequest:
    """One planning request: a layout of the registry and the options every layout reads."""

    layout: Layout  # the registry's layout, parsed once from NAME[:N]
    parameter: int | None = None  # N of a layout spelled NAME:N (l3-groups:N)
    topology: str = "live"  # where the topology comes from (topology.load)
    ranks: int | None = None  # --ranks: wins over the allocation and the layout's default
    threads: int | None = None  # OpenMP threads per rank
    smt: bool = False  # every PU of a core
    cpukind: str = "performance"  # which kind of cores (cpukinds)
    options: Mapping[str, object] = field(default_factory=dict)  # per-layout options given
    follow_allocation: bool = False  # ranks per node from the Slurm allocation (run, env, verify)
    mem: str = "local"  # --mem: each rank's NUMA memory policy (topobind.plan.memory)
    pages: str = "thp"  # --pages: the page size of the program's large allocations
    pages_min: int | None = None  # --pages-min: bytes per rank the pool must hold (auto)

    @property
    def spelled(self) -> str:
        """The layout as the user wrote it: ``spread``, ``l3-groups:32``."""
        return self.layout.name + ("" if self.parameter is None else f":{self.parameter}")

    def ranks_for(self, tasks: int | None) -> int | None:
        """The ranks per node of a plan, where ``tasks`` is what the allocation gives a node:
        --ranks wins; a layout with one rank per domain sets its own count; otherwise the
        allocation's tasks when the request follows the allocation (None: the layout's
        default)."""
        if self.ranks is not None or self.layout.one_rank_per_domain:
            return self.ranks
        return tasks if self.follow_allocation else None


def parse(layout: str, **values: object) -> PlanRequest:
    """A request for ``layout`` (``NAME[:N]``, checked against the registry) and ``values``
    (the other fields by name)."""
    spec, parameter = parse_layout(layout)
    return PlanRequest(spec, parameter, **values)  # type: ignore[arg-type]


def plan(topo: Topology, req: PlanRequest, ranks: int | None) -> Plan:
    """The plan ``req`` asks for on ``topo`` with ``ranks`` per node: every path that plans
    (once per node, or per group of nodes) plans through here."""
    made = plan_layout(
        topo,
        req.layout,
        req.parameter,
        ranks=ranks,
        threads=req.threads,
        smt=req.smt,
        cpukind=req.cpukind,
        options=req.options,
    )
    return plan_memory(made, req.mem, req.pages, req.pages_min)


def plan_for_job(req: PlanRequest, topo: Topology | None = None) -> Plan:
    """The plan of a command that launches inside this job (run, env, verify).

    Inside Slurm, without --ranks, the ranks per node are the tasks per node the job asked
    for (``SLURM_NTASKS_PER_NODE``, or ``SLURM_NTASKS`` / ``SLURM_JOB_NUM_NODES``) unless the
    layout sets the count itself (one rank per domain). An explicit --ranks wins. When the
    plan's ranks per node differ from the allocation's, the plan carries a warning. A request
    that does not follow the allocation plans with the layout's own default."""
    if not req.follow_allocation:
        return plan(topo if topo is not None else load(req.topology), req, req.ranks)
    try:
        alloc = slurm.tasks_per_node()
    except TopobindError:
        if req.ranks is None and not req.layout.one_rank_per_domain:
            raise
        alloc = None  # not needed for the plan; an uneven allocation is the user's call
    ranks = req.ranks_for(alloc.count if alloc is not None else None)
    from_alloc = req.ranks is None and ranks is not None
    topo = topo if topo is not None else load(req.topology)
    try:
        made = plan(topo, req, ranks)
    except PlanError as exc:
        if not from_alloc or alloc is None:
            raise
        raise PlanError(
            f"{exc} (the {alloc.count} ranks per node come from the allocation, "
            f"{alloc.source}; give --ranks to override)"
        ) from exc
    if alloc is not None and made.nranks != alloc.count:
        why = (
            f"--ranks {req.ranks} is used"
            if req.ranks is not None
            else f"layout {req.spelled} sets one rank per domain; give --ranks to change it"
        )
        warning = (
            f"the plan has {plural(made.nranks, 'rank')} per node but the allocation has "
            f"{plural(alloc.count, 'task')} per node ({alloc.source}); {why}"
        )
        made = replace(made, warnings=(*made.warnings, warning))
    return made
