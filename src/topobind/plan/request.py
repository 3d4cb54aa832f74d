"""The one planning entry: what a planning command asks for (:class:`PlanRequest`, one typed
value) and :func:`plan`, which every command and path that plans goes through.

The command layer turns its options into a :class:`PlanRequest` once
(``commands/common.request_from``): the layout spelled ``NAME[:N]`` is parsed there, and
whether the ranks per node follow the Slurm allocation is decided there (the commands that
launch inside a job, unless ``TOPOBIND_IGNORE_ALLOCATION_TASKS=1``). :func:`plan` plans it:
the layout (``Layout.plan``, per-gpu included) then the memory (``--mem``/``--pages``);
:func:`plan_for_job` only decides the ranks per node from the allocation and calls
:func:`plan`, as ``launch.node_groups`` does per group of nodes. A new planning option
(``--mem``) is one field of ``PlanRequest``, named as the option's ``dest``: ``request_from``
copies every field it finds by name.
"""

from __future__ import annotations

from topobind.errors import PlanError, TopobindError, plural
from topobind.plan.layouts import PlanRequest, parse_layout, plan_layout
from topobind.plan.memory import plan_memory
from topobind.plan.model import Plan
from topobind.topo.topology import Topology, load

__all__ = ["IGNORE_ALLOCATION_TASKS", "PlanRequest", "parse", "plan", "plan_for_job"]

#: environment variable: "1" = plan without the allocation's task count (the ReFrame checks,
#: whose job holds the node with one task and launches every step itself)
IGNORE_ALLOCATION_TASKS = "TOPOBIND_IGNORE_ALLOCATION_TASKS"


def parse(layout: str, **values: object) -> PlanRequest:
    """A request for ``layout`` (``NAME[:N]``, checked against the registry) and ``values``
    (the other fields by name)."""
    spec, parameter = parse_layout(layout)
    return PlanRequest(spec, parameter, **values)  # type: ignore[arg-type]


def plan(topo: Topology, req: PlanRequest, ranks: int | None) -> Plan:
    """The plan ``req`` asks for on ``topo`` with ``ranks`` per node (None: the layout's
    default): the layout's plan, then each rank's memory. Every command and path that plans
    (show, plan, env, run, verify, draw, bench, the SPANK step; once per node or per group
    of nodes) plans through here."""
    made = plan_layout(topo, req._replace(ranks=ranks))
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
    # The allocation is read only here (a plan outside a job never imports it).
    from topobind.topo import slurm_allocation as slurm

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
        made = made._replace(warnings=(*made.warnings, warning))
    return made
