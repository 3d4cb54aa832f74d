"""Layouts: one function per layout, Topology x request -> Plan, and the request they read.

:class:`PlanRequest` is the one request record: the command layer makes it
(``commands/common.request_from``), :func:`topobind.plan.request.plan` (the one planning
entry) checks it and calls :meth:`Layout.plan` of the requested layout, every layout
(``per-gpu`` included) answering ``Layout.plan(node, view, request) -> Plan``.

Vocabulary. A *slot* is what one OpenMP thread gets: a core (default; the thread's place is
the core's first usable PU) or, with ``smt=True``, a single PU (so a 2-way SMT core holds two
threads). Ranks take their threads' slots in hwloc logical order. See docs/layouts.md for
the exact semantics and pictures.
"""

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

from topobind.errors import PlanError, TopobindError
from topobind.inputs import whole_number
from topobind.plan.gpu_options import GPU_HELP, ORDERS, RESERVES
from topobind.plan.model import Plan, RankPlan
from topobind.topo import cpukinds
from topobind.topo.allocation import Allocation
from topobind.topo.topology import Core, Topology, format_list


class Slot(NamedTuple):
    core: Core
    place: tuple[int, ...]  # OS PU indexes


class LayoutOption(NamedTuple):
    """A command-line option that only some layouts read (``--gpus-per-rank N`` ...).
    :func:`topobind.cli.commands.common.add_layout_args` adds it to every planning command (the
    command layer turns ``most``/``choices`` into its argparse type); the parsed value reaches
    the planner as ``PlanRequest.options[dest]``."""

    flag: str
    dest: str
    help: str
    metavar: str = "N"
    most: int | None = None  # a count from 1 to most
    choices: tuple[str, ...] = ()  # one of these words


class Layout:
    """One layout of the vocabulary: the CLI, its help, the plan schema and docs/layouts.md
    all derive from (or are tested against) :data:`REGISTRY`. A plain class, each one an
    entry of the registry equal only to itself, defined before :class:`PlanRequest`, whose
    field names it: a NamedTuple field typed by a forward reference costs a ``compile``
    at import, the process's first (``make bench-plan``)."""

    __slots__ = ("name", "planner", "help", "one_rank_per_domain", "parameter", "options",
                 "needs_gpus")  # fmt: skip

    def __init__(
        self,
        name: str,  # what --layout takes (before any ':PARAMETER')
        planner: "Planner",
        help: str,
        one_rank_per_domain: bool = False,  # sets its own rank count (one rank per domain)
        parameter: str | None = None,  # e.g. "N": spelled NAME:N, N a positive integer
        options: tuple[LayoutOption, ...] = (),
        needs_gpus: bool = False,  # plans only on a node whose topology lists GPUs
    ) -> None:
        self.name = name
        self.planner = planner
        self.help = help
        self.one_rank_per_domain = one_rank_per_domain
        self.parameter = parameter
        self.options = options
        self.needs_gpus = needs_gpus

    def __repr__(self) -> str:
        return f"Layout({self.name!r})"

    @property
    def usage(self) -> str:
        """How it is spelled in help and docs: ``per-l3``, ``l3-groups:N``."""
        return f"{self.name}:{self.parameter}" if self.parameter else self.name

    @property
    def pattern(self) -> str:
        """Regular expression of every valid spelling (the plan schema's ``layout``)."""
        return f"{self.name}:[1-9][0-9]*" if self.parameter else self.name

    def plan(self, node: Topology, view: Topology, req: "PlanRequest") -> Plan:
        """The plan of this layout on ``view`` (``node`` restricted to the request's CPU
        kind), a Plan of the whole ``node``; ``req``'s counts already checked
        (:func:`topobind.plan.request.plan` calls it)."""
        return self.planner(node, view, req)


class PlanRequest(NamedTuple):
    """One planning request: a layout of the registry and the options every layout reads.
    A changed copy: ``request._replace(...)``."""

    layout: Layout  # the registry's layout, parsed once from NAME[:N]
    parameter: int | None = None  # N of a layout spelled NAME:N (l3-groups:N)
    topology: str = "live"  # where the topology comes from (topology.load)
    ranks: int | None = None  # --ranks: wins over the allocation and the layout's default
    threads: int | None = None  # OpenMP threads per rank
    smt: bool = False  # every PU of a core
    cpukind: str = "performance"  # which kind of cores (cpukinds)
    options: Mapping[str, object] = MappingProxyType({})  # per-layout options given
    follow_allocation: bool = False  # ranks per node from the allocation (run, env, verify)
    allocation: Allocation | None = None  # the job's (topo.allocation.detect), None: no manager
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


#: what a layout answers: (the node, the view of it to plan on, the request) -> the plan
Planner = Callable[[Topology, Topology, PlanRequest], Plan]


def _slots(cores: Sequence[Core], smt: bool) -> list[Slot]:
    if smt:
        return [Slot(c, (pu,)) for c in cores for pu in c.pus]
    return [Slot(c, (c.pus[0],)) for c in cores]


def _unit(smt: bool) -> str:
    return "PUs" if smt else "cores"


def _rank(rank: int, slots: Sequence[Slot]) -> RankPlan:
    cores: list[int] = []
    for s in slots:
        if s.core.logical not in cores:
            cores.append(s.core.logical)
    return RankPlan(
        rank=rank,
        places=tuple(s.place for s in slots),
        cores=tuple(cores),
        numa=tuple(sorted({n for s in slots for n in s.core.numa})),
        l3=tuple(sorted({s.core.l3 for s in slots if s.core.l3 is not None})),
    )


def _evenly(items: Sequence[Slot], count: int) -> list[Slot]:
    """``count`` items evenly spaced over ``items`` (first one always taken)."""
    n = len(items)
    return [items[(i * n) // count] for i in range(count)]


def _block_spread(slots: Sequence[Slot], ranks: int, threads: int) -> list[list[Slot]]:
    """Cut ``slots`` into ``ranks`` equal consecutive regions; each rank takes ``threads``
    slots evenly spaced inside its own region."""
    n = len(slots)
    out = []
    for r in range(ranks):
        region = slots[(r * n) // ranks : ((r + 1) * n) // ranks]
        if len(region) < threads:
            raise PlanError(
                f"rank {r} region holds {len(region)} slots but {threads} threads were asked"
            )
        out.append(_evenly(region, threads))
    return out


def _resolve_counts(
    capacity: int, ranks: int | None, threads: int | None, default_ranks: int, smt: bool
) -> tuple[int, int]:
    if ranks is not None and ranks < 1:
        raise PlanError(f"--ranks must be at least 1 (got {ranks})")
    if threads is not None and threads < 1:
        raise PlanError(f"--threads must be at least 1 (got {threads})")
    if ranks is None and threads is None:
        ranks = default_ranks
    if ranks is None:
        assert threads is not None
        ranks = max(1, capacity // threads)
    if threads is None:
        threads = capacity // ranks
        if threads < 1:
            raise PlanError(
                f"{ranks} ranks but only {capacity} usable {_unit(smt)} for this layout; "
                f"use --ranks {capacity} or fewer" + ("" if smt else " (or --smt to use every PU)")
            )
    if ranks * threads > capacity:
        raise PlanError(
            f"{ranks} ranks x {threads} threads = {ranks * threads} but this layout has only "
            f"{capacity} usable {_unit(smt)}; lower --ranks/--threads"
            + ("" if smt else " or add --smt to use every PU")
        )
    return ranks, threads


def _check_counts(topo: Topology, req: PlanRequest) -> None:
    """Bound the work before any layout runs: no layout gives a rank, or a thread, less than
    a slot of its own, so neither count may exceed the usable slots (cores, or PUs with
    --smt)."""
    slots = sum(len(c.pus) for c in topo.cores) if req.smt else len(topo.cores)
    for flag, value in (("--ranks", req.ranks), ("--threads", req.threads)):
        if value is None:
            continue
        if value < 1:
            raise PlanError(f"{flag} must be at least 1 (got {value})")
        if value > slots:
            more = len(topo.pus) > slots
            raise PlanError(
                f"{flag} {value} is more than the {slots} usable {_unit(req.smt)} of this "
                f"topology; use {flag} {slots} or fewer"
                + (f" (or --smt to use all {len(topo.pus)} PUs)" if more else "")
            )


# --------------------------------------------------------------------------- layouts
def compact(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    """Fill slots in logical order: rank 0 takes the first T slots, rank 1 the next T..."""
    slots = _slots(topo.cores, req.smt)
    ranks, threads = _resolve_counts(len(slots), req.ranks, req.threads, 1, req.smt)
    return [slots[r * threads : (r + 1) * threads] for r in range(ranks)]


def spread(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    """Ranks spread evenly over the whole node; each rank's threads spread inside its share."""
    slots = _slots(topo.cores, req.smt)
    ranks, threads = _resolve_counts(len(slots), req.ranks, req.threads, 1, req.smt)
    return _block_spread(slots, ranks, threads)


def every_other_core(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    """Half the cores: every other core inside each L3 domain (inside each NUMA node where
    there is no shared cache), so every NUMA node and L3 domain keeps the same share; then
    spread over those cores like ``spread``."""
    chosen: list[Core] = []
    groups: dict[object, list[Core]] = {}
    for core in topo.cores:
        key = ("l3", core.l3) if core.l3 is not None else ("numa", core.numa, core.package)
        groups.setdefault(key, []).append(core)
    for core in topo.cores:
        key = ("l3", core.l3) if core.l3 is not None else ("numa", core.numa, core.package)
        if groups[key].index(core) % 2 == 0:
            chosen.append(core)
    slots = _slots(chosen, req.smt)
    ranks, threads = _resolve_counts(len(slots), req.ranks, req.threads, len(slots), req.smt)
    if req.ranks is None and req.threads is not None:
        ranks, threads = _resolve_counts(len(slots), None, req.threads, 1, req.smt)
    return _block_spread(slots, ranks, threads)


def _per_domain(
    topo: Topology, req: PlanRequest, domains: list[list[Core]], what: str
) -> list[list[Slot]]:
    """One rank per domain (or k ranks per domain when --ranks is a multiple of the number of
    domains; or an evenly spaced subset of domains when --ranks is smaller)."""
    if not domains:
        raise PlanError(f"layout {req.spelled!r} needs {what}, and this topology has none")
    nd = len(domains)
    ranks = req.ranks if req.ranks is not None else nd  # at least 1 (_check_counts)
    if ranks > nd and ranks % nd:
        raise PlanError(
            f"layout {req.spelled!r}: {ranks} ranks over {nd} {what}; use at most {nd} ranks "
            f"or a multiple of {nd}"
        )
    if ranks <= nd:
        picked = [domains[(i * nd) // ranks] for i in range(ranks)]
        regions = [_slots(d, req.smt) for d in picked]
    else:
        per = ranks // nd
        regions = []
        for d in domains:
            s = _slots(d, req.smt)
            regions.extend(s[(i * len(s)) // per : ((i + 1) * len(s)) // per] for i in range(per))
    smallest = min(len(r) for r in regions)
    if smallest < 1:  # more ranks per domain than its slots
        fewest = min(len(_slots(d, req.smt)) for d in domains)
        raise PlanError(
            f"layout {req.spelled!r}: {ranks} ranks over {nd} {what} leave a rank without a "
            f"usable {_unit(req.smt)[:-1]} (the smallest holds {fewest}); use --ranks "
            f"{nd * fewest} or fewer" + ("" if req.smt else " (or --smt to use every PU)")
        )
    threads = req.threads if req.threads is not None else smallest
    if threads > smallest:
        raise PlanError(
            f"layout {req.spelled!r}: {threads} threads per rank but the smallest of the {what} "
            f"holds {smallest} usable {_unit(req.smt)} per rank; use --threads {smallest} or fewer"
        )
    return [region[:threads] for region in regions]


def _cores_by(topo: Topology, key: Callable[[Core], object]) -> list[list[Core]]:
    groups: dict[object, list[Core]] = {}
    for core in topo.cores:
        groups.setdefault(key(core), []).append(core)
    return list(groups.values())


def per_l3(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    if topo.shared_cache_level is None:
        raise PlanError(
            "layout 'per-l3' needs a cache shared by several cores and this topology has "
            "none; use per-numa or per-socket"
        )
    return _per_domain(topo, req, _cores_by(topo, lambda c: c.l3), "L3 domains")


def per_numa(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    # NUMA nodes sharing the same cores (KNL DDR + MCDRAM) form one domain.
    homeless = [pu for c in topo.cores if not c.numa for pu in c.pus]
    if homeless and topo.numa_nodes:
        raise PlanError(
            f"layout 'per-numa': usable PUs {format_list(homeless)} belong to no usable NUMA "
            f"node (the topology's NUMA nodes with usable PUs: "
            f"{format_list([n.os_index for n in topo.numa_nodes])}; the others are not in the "
            "allowed nodeset or hold no usable PU); use per-socket"
        )
    domains = _cores_by(topo, lambda c: c.numa) if not homeless else []
    return _per_domain(topo, req, domains, "NUMA nodes")


def per_socket(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    return _per_domain(topo, req, _cores_by(topo, lambda c: c.package), "packages")


def l3_groups(topo: Topology, req: PlanRequest, size: int) -> list[list[Slot]]:
    """Bundle neighbouring L3 domains of the same NUMA node until a group holds ``size``
    slots; never cross a NUMA node. One rank per group."""
    if topo.shared_cache_level is None:
        raise PlanError("layout 'l3-groups' needs L3 domains and this topology has none")
    groups: list[list[Core]] = []
    current: list[Core] = []
    current_numa: object = None
    for dom in _cores_by(topo, lambda c: c.l3):
        numa = dom[0].numa
        if current and (numa != current_numa or len(_slots(current, req.smt)) >= size):
            groups.append(current)
            current = []
        current_numa = numa
        current = current + dom
    if current:
        groups.append(current)
    if req.threads is None:
        sizes = [len(_slots(g, req.smt)) for g in groups]
        req = req._replace(threads=min(size, min(sizes)))
    return _per_domain(topo, req, groups, f"L3 groups of {size} {_unit(req.smt)}")


# --------------------------------------------------------------------------- the registry
#: Largest N of ``l3-groups:N`` (and of any numeric layout parameter): more than any node's PUs.
MAX_LAYOUT_PARAMETER = 1 << 20


def by_slots(assign: Callable[[Topology, PlanRequest], list[list[Slot]]]) -> Planner:
    """A layout that hands each rank its slots, as a :data:`Planner`."""

    def planner(node: Topology, view: Topology, req: PlanRequest) -> Plan:
        assignment = assign(view, req)
        rank_plans = tuple(_rank(i, slots) for i, slots in enumerate(assignment))
        return Plan(
            topology=node,
            layout=req.spelled,
            threads=len(assignment[0]),
            smt=req.smt,
            ranks=rank_plans,
            warnings=tuple(_warnings(view, rank_plans, req.smt)),
        )

    return planner


def _l3_groups(topo: Topology, req: PlanRequest) -> list[list[Slot]]:
    assert req.parameter is not None
    return l3_groups(topo, req, req.parameter)


def _per_gpu(node: Topology, view: Topology, req: PlanRequest) -> Plan:
    """The per-gpu layout (topobind.plan.gpu_layout): its ranks carry GPUs, a NIC and their
    variables."""
    # The GPU planner only here: a plan of another layout never imports it.
    from topobind.plan.gpu_layout import GpuOptions, assign, rank_env

    opts = GpuOptions(**req.options)  # type: ignore[arg-type]
    ranks, more = assign(node, view.cores, req.ranks, req.threads, req.smt, opts)
    rank_plans = []
    for i, r in enumerate(ranks):
        base = _rank(i, [Slot(c, p) for p in r.places for c in r.cores if p[0] in c.pus])
        env = rank_env(r.gpus, r.nic)
        rank_plans.append(base._replace(gpus=r.gpus, nic=r.nic, env=env))
    return Plan(
        topology=node,
        layout=req.spelled,
        threads=len(ranks[0].places),
        smt=req.smt,
        ranks=tuple(rank_plans),
        warnings=tuple(_warnings(node, rank_plans, req.smt)),
        notes=tuple(more),
    )


REGISTRY: tuple[Layout, ...] = (
    Layout("compact", by_slots(compact), "fill cores in hwloc logical order (rank 0 first)"),
    Layout(
        "spread",
        by_slots(spread),
        "ranks spread evenly over the node, threads spread inside each rank's share",
    ),
    Layout(
        "every-other-core",
        by_slots(every_other_core),
        "half the cores, every other core of each L3 domain, spread over all",
    ),
    Layout(
        "per-l3",
        by_slots(per_l3),
        "one rank per L3 domain (shared cache domain), threads = its cores",
        one_rank_per_domain=True,
    ),
    Layout(
        "per-numa",
        by_slots(per_numa),
        "one rank per NUMA node, threads = its cores",
        one_rank_per_domain=True,
    ),
    Layout(
        "per-socket",
        by_slots(per_socket),
        "one rank per package (socket), threads = its cores",
        one_rank_per_domain=True,
    ),
    Layout(
        "l3-groups",
        by_slots(_l3_groups),
        "bundle neighbouring L3 domains of one NUMA node up to N threads per rank",
        one_rank_per_domain=True,
        parameter="N",
    ),
    Layout(
        "per-gpu",
        _per_gpu,
        GPU_HELP,
        one_rank_per_domain=True,
        needs_gpus=True,
        options=(
            LayoutOption("--gpus-per-rank", "gpus_per_rank", "GPUs per rank (default 1)", "G",
                         most=64),
            LayoutOption(
                "--reserve", "reserve",
                "cores left out: none (default), first-core-per-l3 (low-noise nodes), "
                "first-core-per-numa", "WHICH", choices=RESERVES,
            ),
            LayoutOption(
                "--order", "order", "rank i gets GPU i (gpu, default), or ranks in core "
                "order (cpu)", "gpu|cpu", choices=ORDERS,
            ),
        ),
    ),
)  # fmt: skip

#: usage -> help, e.g. ``{"l3-groups:N": "bundle ..."}`` (for help texts and listings).
LAYOUTS: dict[str, str] = {lay.usage: lay.help for lay in REGISTRY}


def layout_names() -> str:
    """``compact, spread, ..., l3-groups:N``: every layout as help and errors list them."""
    return ", ".join(lay.usage for lay in REGISTRY)


def layout_help() -> str:
    """``--layout``'s help: every layout and what it does."""
    return "; ".join(f"{lay.usage}: {lay.help}" for lay in REGISTRY)


def per_domain_names() -> str:
    """The layouts that set their own rank count, as help texts list them."""
    return ", ".join(lay.usage for lay in REGISTRY if lay.one_rank_per_domain)


def layout_pattern() -> str:
    """The regular expression a plan's ``layout`` matches (plan.schema.json)."""
    return "^(" + "|".join(lay.pattern for lay in REGISTRY) + ")$"


def parse_layout(text: str) -> tuple[Layout, int | None]:
    """``"l3-groups:32"`` -> (the l3-groups Layout, 32). Raises PlanError naming the layout."""
    name, sep, param = text.partition(":")
    layout = next((lay for lay in REGISTRY if lay.name == name), None)
    if layout is None:
        shown = text if len(text) <= 60 else text[:60] + "..."
        from topobind.errors import did_you_mean

        hint = did_you_mean(name, [lay.name for lay in REGISTRY])
        raise PlanError(f"unknown layout {shown!r}{hint}; choose one of: {layout_names()}")
    if layout.parameter is None:
        if sep:
            raise PlanError(f"layout {name!r} takes no ':{param[:20]}'; use --layout {name}")
        return layout, None
    example = f"{name}:32"
    if not sep:
        raise PlanError(f"layout {name!r} needs a size: {layout.usage}, e.g. {example}")
    try:
        return layout, whole_number(param, layout.parameter, 1, MAX_LAYOUT_PARAMETER)
    except TopobindError:
        raise PlanError(
            f"layout {text[:60]!r}: {layout.parameter} must be a whole number from 1 to "
            f"{MAX_LAYOUT_PARAMETER} (ASCII digits), e.g. {example}"
        ) from None


def one_rank_per_domain(layout: str) -> bool:
    """True for a layout that sets its own rank count (``l3-groups:N`` for any N)."""
    return parse_layout(layout)[0].one_rank_per_domain


def _plan_layout(topo: Topology, req: PlanRequest) -> Plan:
    """The layout stage of :func:`topobind.plan.request.plan` (the one planning entry, which
    adds the memory plan; private to ``plan/``): the request's per-layout options and counts
    checked, the CPU kind chosen, then :meth:`Layout.plan`."""
    foreign = sorted(set(req.options) - {o.dest for o in req.layout.options})
    if foreign:
        flags = ", ".join("--" + d.replace("_", "-") for d in foreign)
        raise PlanError(f"{flags}: not an option of layout {req.layout.usage!r}; leave it out")
    view, notes = cpukinds.restrict(topo, req.cpukind)
    _check_counts(view, req)
    made = req.layout.plan(topo, view, req)
    if req.layout.name != "per-gpu" and topo.devices.refusal:
        # a node whose GPUs cannot be told apart plans any layout that needs no GPU
        notes = (*notes, f"GPUs not used by this layout and not listed: {topo.devices.refusal}")
    return made._replace(notes=(*notes, *made.notes)) if notes else made


def _warnings(topo: Topology, ranks: Sequence[RankPlan], smt: bool) -> list[str]:
    out: list[str] = []
    if smt and len({len(c.pus) for c in topo.cores}) > 1:
        out.append(
            "some cores have fewer usable PUs than others (a cgroup holding only one PU of a "
            "core, or offline PUs): SMT threads are not evenly spread"
        )
    if any(not r.numa for r in ranks):
        out.append("the topology reports no NUMA node for some cores; memory locality unknown")
    return out
