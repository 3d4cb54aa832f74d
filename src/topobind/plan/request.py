"""The one planning entry: what a planning command asks for (:class:`PlanRequest`, one typed
value) and :func:`plan`, which every command and path that plans goes through.

The command layer turns its options into a :class:`PlanRequest` once
(``commands/common.request_from``): the layout spelled ``NAME[:N]`` is parsed there, and
whether the ranks per node follow the allocation is decided there (the commands that
launch inside a job, unless ``TOPOBIND_IGNORE_ALLOCATION_TASKS=1``), and the job's allocation
(:class:`topobind.topo.allocation.Allocation`, made once by its adapter) rides on the request:
planning reads no environment variable. :func:`plan` plans it:
the layout (``Layout.plan``, per-gpu included) then the memory (``--mem``/``--pages``), with
the ranks per node of ``req.ranks``, or, for a request that follows the allocation, the
allocation's (``launch.node_groups`` gives each group of nodes its ranks instead). The stages
(``layouts._plan_layout``, ``_plan_in_job``) are private to ``plan/``. A new planning option
(``--mem``) is one field of ``PlanRequest``, named as the option's ``dest``: ``request_from``
copies every field it finds by name.
"""

from __future__ import annotations

from topobind.errors import PlanError, TopobindError, plural
from topobind.plan.layouts import PlanRequest, _plan_layout, parse_layout
from topobind.plan.memory import plan_memory
from topobind.plan.model import Plan
from topobind.topo.topology import Topology

__all__ = ["IGNORE_ALLOCATION_TASKS", "PlanRequest", "parse", "plan"]

#: environment variable: "1" = plan without the allocation's task count (the ReFrame checks,
#: whose job holds the node with one task and launches every step itself)
IGNORE_ALLOCATION_TASKS = "TOPOBIND_IGNORE_ALLOCATION_TASKS"


def parse(layout: str, **values: object) -> PlanRequest:
    """A request for ``layout`` (``NAME[:N]``, checked against the registry) and ``values``
    (the other fields by name)."""
    spec, parameter = parse_layout(layout)
    return PlanRequest(spec, parameter, **values)  # type: ignore[arg-type]


def plan(topo: Topology, req: PlanRequest) -> Plan:
    """The plan ``req`` asks for on ``topo``: the layout's plan, then each rank's memory.
    Every command and path that plans (show, plan, env, run, verify, draw, bench, the SPANK
    step; once per node or per group of nodes) plans through here.

    The ranks per node: ``req.ranks`` (--ranks; None: the layout's default), or, for a request
    that follows the allocation (run, env, verify inside a job), see :func:`_plan_in_job`."""
    if req.follow_allocation:
        return _plan_in_job(topo, req)
    return _layout_then_memory(topo, req)


def _layout_then_memory(topo: Topology, req: PlanRequest) -> Plan:
    """The layout's plan of ``req`` on ``topo``, then each rank's memory."""
    return plan_memory(_plan_layout(topo, req), req.mem, req.pages, req.pages_min)


def _plan_in_job(topo: Topology, req: PlanRequest) -> Plan:
    """The plan of a command that launches inside this job (run, env, verify).

    In an allocation (``req.allocation``), without --ranks, the ranks per node are the tasks
    per node the job asked for (Slurm's ``SLURM_NTASKS_PER_NODE``, or ``SLURM_NTASKS`` /
    ``SLURM_JOB_NUM_NODES``) unless the layout sets the count itself (one rank per domain).
    An explicit --ranks wins. When the plan's ranks per node differ from the allocation's,
    the plan carries a warning."""
    try:
        alloc = req.allocation.tasks_per_node() if req.allocation is not None else None
    except TopobindError:
        if req.ranks is None and not req.layout.one_rank_per_domain:
            raise
        alloc = None  # not needed for the plan; an uneven allocation is the user's call
    ranks = req.ranks_for(alloc.count if alloc is not None else None)
    from_alloc = req.ranks is None and ranks is not None
    try:
        made = _layout_then_memory(topo, req._replace(ranks=ranks))
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
