"""OpenMPI ``mpirun`` flags (5.x PRRTE spelling and 4.x ORTE spelling), or a rankfile.

Flags are emitted only when OpenMPI's ``ppr`` mapper reproduces the plan exactly; this
module simulates that mapper (objects in hwloc logical order, N ranks per object, each
taking ``pe`` consecutive cores/PUs of the object) and compares rank by rank. When no
``--map-by ppr:N:RESOURCE:pe=M`` expresses the plan, a rankfile is emitted instead.
Tests check every emitted form against OpenMPI's own mapper (tests/emit/test_openmpi_oracle.py).

Under a restricted affinity mask (``taskset``, a Slurm step's task/affinity mask) the plan
sees only the allowed PUs, but OpenMPI maps and numbers the whole node (the cgroup cpuset is
the only restriction hwloc applies): a ``ppr`` mapping would land on the node's first cores.
There a rankfile is emitted, with OS PU numbers (4.x, physical) or the whole node's hwloc
logical numbers (5.x), which is what OpenMPI reads.
"""

from collections.abc import Sequence
from typing import NamedTuple

from topobind.emit.devices import env_notes
from topobind.inputs import host_name
from topobind.plan.model import Plan
from topobind.topo.topology import Topology, format_list, parse_xml

DEFAULT_RANKFILE = "topobind.rankfile"


class MpiLaunch(NamedTuple):
    argv: list[str]
    notes: list[str]
    rankfile: str | None = None  # rankfile text when the argv refers to one
    resource: str | None = None  # the ppr resource used (None: rankfile)


def _hwthreads_only(plan: Plan) -> bool:
    """OpenMPI counts slots and binds by hwloc Core objects. A topology without them (PUs
    right under a cache or NUMA node; topobind takes each PU as a core) has no core for it
    ("No objects of type core", 4.x; no slots, 5.x): map and bind hardware threads there
    (5.x: ``:hwtcpus``, ``:oversubscribe``; 4.x: ``--use-hwthread-cpus``; both
    ``--bind-to hwthread``), and name PUs in rankfiles."""
    return "Core" in plan.topology.missing_levels


def _resources(plan: Plan, smt: bool) -> list[tuple[str, list[list[int]]]]:
    """(PRRTE resource name, objects) with each object's cores (or PUs with SMT) in order.
    Levels hwloc does not have are left out: no ``package`` without Package objects (nor
    ``node``: OpenMPI 5 refuses its ``pe`` bindings there as spanning packages)."""
    topo = plan.topology
    missing = topo.missing_levels
    core_by = {c.logical: c for c in topo.cores}

    def units(core_ids: tuple[int, ...]) -> list[int]:
        if smt:
            return [pu for cid in core_ids for pu in core_by[cid].pus]
        return list(core_ids)

    res: list[tuple[str, list[list[int]]]] = []
    if smt:
        res.append(("hwthread", [[pu] for pu in topo.pus]))
    if "Core" not in missing:
        res.append(("core", [units((c.logical,)) for c in topo.cores]))
    if topo.shared_cache_level == 3:
        res.append(("l3cache", [units(d.cores) for d in topo.l3_domains]))
    if topo.numa_nodes:
        res.append(("numa", [units(n.cores) for n in topo.numa_nodes]))
    if "Package" not in missing:
        res.append(("package", [units(p.cores) for p in topo.packages]))
        res.append(("node", [units(tuple(c.logical for c in topo.cores))]))
    return res


def _simulate(objects: list[list[int]], per: int, pe: int) -> list[list[int]] | None:
    out: list[list[int]] = []
    for obj in objects:
        if len(obj) < per * pe:
            return None
        for k in range(per):
            out.append(obj[k * pe : (k + 1) * pe])
    return out


def affinity_restricted(topo: Topology) -> bool:
    """True when this process's affinity mask hides PUs that OpenMPI will still map."""
    return any(
        why.startswith("not in this process's affinity") for why in topo.excluded_pus.values()
    )


def _node_numbering(topo: Topology) -> tuple[dict[int, int], dict[int, int]]:
    """(OS PU -> hwloc logical core index, OS PU -> hwloc logical PU index) over the node as
    OpenMPI numbers it: the affinity mask does not restrict it, the cgroup cpuset does."""
    whole = topo
    if affinity_restricted(topo) and topo.xml:
        whole = parse_xml(topo.xml, topo.source, affinity=None, hostname=topo.hostname)
    return _numbering(whole)


def _numbering(node: Topology) -> tuple[dict[int, int], dict[int, int]]:
    return {pu: c.logical for c in node.cores for pu in c.pus}, node.pu_logical()


def find_ppr(plan: Plan, version: int = 5) -> tuple[str, int] | None:
    """The first (resource, ranks-per-object) whose ppr mapping equals the plan, else None.

    OpenMPI 5 refuses a ppr binding that spans packages ("bound to CPUs in more than one
    package"); such plans get a rankfile there. Under a restricted affinity mask OpenMPI's
    ppr mapper starts at the node's first core, not the plan's: a rankfile there too."""
    if affinity_restricted(plan.topology):
        return None
    if version == 5:
        core_pkg = {c.logical: c.package for c in plan.topology.cores}
        if any(len({core_pkg[c] for c in r.cores}) > 1 for r in plan.ranks):
            return None
    pus = plan.smt or _hwthreads_only(plan)
    want = [sorted(r.cpus) if pus else sorted(r.cores) for r in plan.ranks]
    for name, objects in _resources(plan, pus):
        if version == 4 and name in ("core", "hwthread"):
            continue  # OpenMPI 4 leaves ppr:N:core ranks unbound ("Bound: N/A")
        if plan.nranks % len(objects):
            continue
        per = plan.nranks // len(objects)
        got = _simulate(objects, per, plan.threads)
        if got is not None and [sorted(g) for g in got] == want:
            return name, per
    return None


def _resource_name(resource: str, version: int) -> str:
    return "socket" if (version == 4 and resource == "package") else resource


WHOLE_CORE_NOTE = (
    "--bind-to core binds each rank to every PU of its cores, so OMP_PLACES=cores gives each "
    "thread a whole core (all its PUs), not only the planned PU; for exactly the planned PUs "
    "launch with 'topobind run' (its per-rank step, rankstep/bin/rankexec, exports each "
    "rank's exact OMP_PLACES) or export OMP_PLACES per rank from ranks[].places"
)


def openmpi_argv(
    plan: Plan,
    version: int = 5,
    rankfile_path: str = DEFAULT_RANKFILE,
    host: str | None = None,
    exact_places: bool = False,
    hosts: Sequence[str] | None = None,
    nodes: int = 1,
) -> MpiLaunch:
    """``mpirun`` argv for the plan (one node; ``hosts``: the same plan on each of them, in a
    rankfile when one is needed; ``nodes``: the same plan on that many nodes, no rankfile
    needed). ``exact_places``: every rank exports its exact OMP_PLACES
    (the per-rank step), so no note about OMP_PLACES=cores on SMT cores."""
    notes: list[str] = env_notes(plan)  # per-gpu plans: per-rank device variables
    if not exact_places and not plan.smt and plan.topology.smt > 1:
        notes.append(WHOLE_CORE_NOTE)
    pus = plan.smt or _hwthreads_only(plan)
    bind = "hwthread" if pus else "core"
    found = find_ppr(plan, version)
    argv = ["mpirun", "-np", str(plan.nranks * (len(hosts) if hosts else nodes))]
    if found is not None:
        resource, per = found
        res = _resource_name(resource, version)
        pe = plan.threads
        if version == 5:
            mod = f":pe={pe}" if pe > 1 else ""
            mod += ":hwtcpus" if pus else ""
            mod += _oversubscribe_5(plan, notes)
            argv += ["--map-by", f"ppr:{per}:{res}{mod}", "--bind-to", bind]
        else:
            mod = f":PE={pe}"  # always: without PE OpenMPI 4 may leave ranks unbound
            argv += ["--map-by", f"ppr:{per}:{res}{mod}", "--bind-to", bind]
            if pus:
                argv.append("--use-hwthread-cpus")
        return MpiLaunch(argv=argv, notes=notes, resource=resource)

    text = rankfile_text(plan, version, host, hosts=hosts)
    argv += rankfile_flags(plan, version, rankfile_path, notes)
    notes.append(
        f"this process's affinity mask hides PUs that OpenMPI maps anyway: the rankfile names "
        f"the planned PUs ({version}.x)"
        if affinity_restricted(plan.topology)
        else f"no --map-by ppr:N:RESOURCE:pe=M expresses this plan: use the rankfile ({version}.x)"
    )
    return MpiLaunch(argv=argv, rankfile=text, notes=notes, resource=None)


def _by_pu(plan: Plan) -> bool:
    """Rankfiles list PUs, not cores: SMT plans, and plans under a restricted affinity mask
    (a whole core could hold PUs outside the mask), and topologies without Core objects."""
    return plan.smt or affinity_restricted(plan.topology) or _hwthreads_only(plan)


def rankfile_flags(plan: Plan, version: int, rankfile_path: str, notes: list[str]) -> list[str]:
    """The mpirun flags that map and bind by the rankfile at ``rankfile_path``."""
    return rankfile_mode_flags(_by_pu(plan), version, rankfile_path, _oversubscribe_5(plan, notes))


def rankfile_mode_flags(by_pu: bool, version: int, rankfile_path: str, mod: str = "") -> list[str]:
    """The flags of a rankfile listing PUs (``by_pu``) or cores; ``mod``: a 5.x map-by
    modifier such as ``:oversubscribe``. 4.x reads OS PU indexes (physical)."""
    if version == 5:
        mod = (":hwtcpus" if by_pu else "") + mod
        bind = "hwthread" if by_pu else "core"
        return ["--map-by", f"rankfile:file={rankfile_path}{mod}", "--bind-to", bind]
    return ["--rankfile", rankfile_path, "--mca", "rmaps_rank_file_physical", "1"]


def _oversubscribe_5(plan: Plan, notes: list[str]) -> str:
    """OpenMPI 5 counts one slot per core even with ``:hwtcpus``; more ranks than cores
    (one rank per PU) is refused unless oversubscription is allowed."""
    if _hwthreads_only(plan):
        notes.append(
            "this topology has no hwloc Core objects, so OpenMPI 5 counts no slots: "
            "':oversubscribe' lets it place the ranks (each still gets its own planned PUs)"
        )
        return ":oversubscribe"
    if plan.smt and plan.nranks > len(plan.topology.cores):
        notes.append(
            "OpenMPI 5 counts cores, not PUs, as slots: ':oversubscribe' lets it place one "
            "rank per PU (the plan still gives every rank its own PU)"
        )
        return ":oversubscribe"
    return ""


class RankfileBlock(NamedTuple):
    """Ranks of one plan on ``hosts`` (each host runs every rank of the plan, in order);
    ``node``: the whole node's topology that OpenMPI 5 numbers (default: the plan's node,
    without this process's affinity mask); ``about``: a comment line."""

    plan: Plan
    hosts: tuple[str, ...]
    node: Topology | None = None
    about: str = ""


def rankfile_text(
    plan: Plan, version: int = 5, host: str | None = None, hosts: Sequence[str] | None = None
) -> str:
    """OpenMPI rankfile for one plan. 5.x: ``slot=`` lists hwloc logical core indexes
    (logical PU indexes with SMT, used with ``:hwtcpus``), numbered over the node as OpenMPI
    sees it (not restricted by this process's affinity mask). 4.x: OS PU indexes, used with
    ``--mca rmaps_rank_file_physical 1``. With ``hosts``: one block per node, node *k*
    holding ranks ``k*R .. k*R+R-1`` placed like the plan's ranks ``0 .. R-1``."""
    names = tuple(hosts) if hosts else (host or plan.topology.hostname or "localhost",)
    header = f"# topobind rankfile for OpenMPI {version}.x, layout {plan.layout}"
    return rankfile_blocks([RankfileBlock(plan, names)], version, header)


def rankfile_blocks(blocks: Sequence[RankfileBlock], version: int, header: str) -> str:
    """The one rankfile writer: every block's hosts with their ranks, global ranks in block
    and host order. PUs or cores as :func:`rankfile_uses_pus` says for all the blocks."""
    by_pu = rankfile_uses_pus([b.plan for b in blocks])
    lines = [header]
    rank = 0
    for b in blocks:
        for name in b.hosts:  # a space or '=' in a name would write a rankfile OpenMPI misreads
            host_name(name, "rankfile host")
        if b.about:
            lines.append(f"# {b.about}")
        core_of, pu_logical = (
            _node_numbering(b.plan.topology) if b.node is None else _numbering(b.node)
        )
        for k, name in enumerate(b.hosts):
            if len(b.hosts) > 1:
                lines.append(f"# node {k}: {name}")
            for r in b.plan.ranks:
                if version == 5:
                    index = pu_logical if by_pu else core_of
                    ids = sorted({index[pu] for pu in r.cpus})
                    lines.append(f"# rank {rank}: OS PUs {format_list(r.cpus)}")
                else:
                    ids = list(r.cpus) if by_pu else list(b.plan.core_pus(r))
                # Ranges keep lines short: OpenMPI's rankfile parser truncates long lines.
                lines.append(f"rank {rank}={name} slot={format_list(ids)}")
                rank += 1
    return "\n".join(lines) + "\n"


def rankfile_uses_pus(plans: Sequence[Plan]) -> bool:
    """A rankfile lists PUs, not cores, when any of its plans needs it (:func:`_by_pu`)."""
    return any(_by_pu(p) for p in plans)
