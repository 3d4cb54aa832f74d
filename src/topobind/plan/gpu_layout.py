"""The ``per-gpu`` layout: each rank gets G GPUs, the cores local to them, and the NIC
nearest to both (docs/gpu.md).

1. ``--reserve`` takes cores out first (the first usable core of every L3 domain or NUMA
   node, what low-noise nodes keep for the system).
2. A GPU's *domain* is the set of usable cores local to it (hwloc locality). GPUs are put in
   groups of G inside one domain; when a domain holds fewer than G GPUs (or not a multiple
   of G), the domains of one NUMA node, then of one package, are merged. G GPUs that do not
   fit in one package are refused.
3. Ranks: one per GPU group by default. Fewer ranks take evenly spaced groups (in the
   ``--order``); more ranks must be a multiple of the groups (ranks share a group's GPUs).
4. The ranks of one domain split its cores evenly, in core order, by GPU index; each rank
   takes the first T slots of its share (T defaults to the smallest share).
5. ``--order gpu`` numbers ranks by GPU index (rank i gets GPU i), ``--order cpu`` by
   their first core.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from topobind.errors import PlanError
from topobind.plan.gpu_options import ORDERS, RESERVES
from topobind.topo.devices import Gpu, Nic
from topobind.topo.gpus import listed
from topobind.topo.topology import Core, Topology, format_list

NVIDIA, INTEL = "10de", "8086"
ZE_HIERARCHY = "ZE_FLAT_DEVICE_HIERARCHY"


class GpuOptions(NamedTuple):
    """The per-gpu layout's options: what the layout registry offers on the command line."""

    gpus_per_rank: int = 1
    reserve: str = "none"
    order: str = "gpu"


class GpuRank(NamedTuple):
    """One rank of the layout: its slots (OS PU tuples, one per thread) and devices."""

    cores: tuple[Core, ...]
    places: tuple[tuple[int, ...], ...]
    gpus: tuple[Gpu, ...]
    nic: Nic | None


class _Domain(NamedTuple):
    cores: list[Core]
    gpus: list[Gpu]


def _reserved(cores: Sequence[Core], reserve: str) -> set[int]:
    """Logical indexes of the cores ``--reserve`` takes out."""
    if reserve not in RESERVES:
        raise PlanError(f"--reserve {reserve!r}: choose one of {', '.join(RESERVES)}")
    if reserve == "none":
        return set()
    first: dict[object, int] = {}
    for core in cores:
        key = core.l3 if reserve == "first-core-per-l3" else core.numa
        if key is None:
            raise PlanError(f"--reserve {reserve}: this topology has no L3 domains; use none")
        first.setdefault(key, core.logical)
    return set(first.values())


def _local(cores: Sequence[Core], gpu: Gpu) -> list[Core]:
    pus = set(gpu.pus)
    return [c for c in cores if pus.intersection(c.pus)]


def _domains(cores: Sequence[Core], gpus: Sequence[Gpu], per: int) -> list[_Domain]:
    """GPU domains, merged (NUMA node, then package) until each holds a multiple of G."""
    local = {g.os: _local(cores, g) for g in gpus}
    keys = (
        lambda g: tuple(c.logical for c in local[g.os]),
        lambda g: tuple(sorted({n for c in local[g.os] for n in c.numa})),
        lambda g: tuple(sorted({c.package for c in local[g.os]})),
    )
    for key in keys:
        groups: dict[object, list[Gpu]] = {}
        for g in gpus:
            groups.setdefault(key(g), []).append(g)
        if all(len(v) % per == 0 for v in groups.values()):
            out = []
            for members in groups.values():
                mine = {c.logical for g in members for c in local[g.os]}
                out.append(_Domain([c for c in cores if c.logical in mine], members))
            return _disjoint(out)
    sizes = sorted({len(v) for v in groups.values()})
    raise PlanError(
        f"--gpus-per-rank {per}: the GPUs of one package number "
        f"{'/'.join(map(str, sizes))}, not a multiple of {per}; use --gpus-per-rank "
        f"{_divisors(sizes)}"
    )


def _divisors(sizes: list[int]) -> str:
    ok = [d for d in range(1, max(sizes) + 1) if all(s % d == 0 for s in sizes)]
    return " or ".join(map(str, ok))


def _disjoint(domains: list[_Domain]) -> list[_Domain]:
    """A core local to several domains (nested localities) goes to the smallest one; a
    domain left without cores keeps no GPU (the caller notes the GPUs left out)."""
    taken: set[int] = set()
    kept: dict[int, _Domain] = {}  # position in ``domains`` -> the domain with its cores left
    for i, dom in sorted(enumerate(domains), key=lambda item: len(item[1].cores)):
        cores = [c for c in dom.cores if c.logical not in taken]
        taken.update(c.logical for c in cores)
        kept[i] = dom._replace(cores=cores)
    return [kept[i] for i in range(len(domains)) if kept[i].cores]


def _slots(cores: Sequence[Core], smt: bool) -> list[tuple[int, ...]]:
    if smt:
        return [(pu,) for c in cores for pu in c.pus]
    return [(c.pus[0],) for c in cores]


def _pick_groups(groups: list[tuple[_Domain, tuple[Gpu, ...]]], ranks: int | None) -> list[int]:
    """Indexes (with repeats for shared groups) of the GPU group of every rank."""
    n = len(groups)
    if ranks is None:
        return list(range(n))
    if ranks < 1:
        raise PlanError(f"--ranks must be at least 1 (got {ranks})")
    if ranks <= n:
        return [(i * n) // ranks for i in range(ranks)]
    if ranks % n:
        raise PlanError(
            f"layout 'per-gpu': {ranks} ranks over {n} GPU groups; use at most {n} ranks or a "
            f"multiple of {n} (ranks sharing a GPU group)"
        )
    return [i for i in range(n) for _ in range(ranks // n)]


def assign(
    topo: Topology,
    cores: Sequence[Core],
    ranks: int | None,
    threads: int | None,
    smt: bool,
    opts: GpuOptions,
) -> tuple[list[GpuRank], list[str]]:
    """The ranks of the per-gpu layout on ``cores`` (a view of ``topo``), and notes."""
    if opts.order not in ORDERS:
        raise PlanError(f"--order {opts.order!r}: choose one of {', '.join(ORDERS)}")
    if opts.gpus_per_rank < 1:
        raise PlanError(f"--gpus-per-rank must be at least 1 (got {opts.gpus_per_rank})")
    if topo.devices.refusal:
        raise PlanError(topo.devices.refusal)
    all_gpus = topo.devices.gpus
    if not all_gpus:
        raise PlanError(
            f"layout 'per-gpu': {topo.source} has no GPU (no PCI device of class 0302/0380 from "
            "NVIDIA, AMD or Intel, nor a GPU driver's device); use another layout, or a topology "
            "exported with I/O devices (lstopo-no-graphics --of xml, not --no-io)"
        )
    reserved = _reserved(cores, opts.reserve)
    usable = [c for c in cores if c.logical not in reserved]
    notes: list[str] = list(topo.devices.notes)
    gpus = [g for g in all_gpus if _local(usable, g)]
    if len(gpus) < len(all_gpus):
        left = listed([g.os for g in all_gpus if g not in gpus])
        notes.append(f"GPUs {left} have no usable core near them (cgroup, --reserve): not used")
    if not gpus:
        raise PlanError(
            "layout 'per-gpu': no usable core is local to any GPU (cgroup or --reserve); "
            "ask the job for cores near its GPUs"
        )
    if opts.gpus_per_rank > len(gpus):
        raise PlanError(
            f"--gpus-per-rank {opts.gpus_per_rank}: the node has only {len(gpus)} usable GPUs"
        )
    notes.extend(_preset_variables(topo, gpus))
    notes.extend(_identity_notes(gpus))
    if len({g.vendor for g in gpus}) > 1:
        notes.append("GPUs of several vendors: each rank's variable names only its own GPUs")
    groups: list[tuple[_Domain, tuple[Gpu, ...]]] = []
    domains = _domains(usable, gpus, opts.gpus_per_rank)
    kept = {g.os for d in domains for g in d.gpus}
    if len(kept) < len(gpus):
        left = listed([g.os for g in gpus if g.os not in kept])
        notes.append(f"GPUs {left}: every core near them went to GPUs nearer still; not used")
    for dom in domains:
        members = sorted(dom.gpus, key=lambda g: (g.index, g.pci or ""))
        for k in range(0, len(members), opts.gpus_per_rank):
            groups.append((dom, tuple(members[k : k + opts.gpus_per_rank])))
    groups.sort(key=lambda dg: _order_key(dg, opts.order))
    picked = _pick_groups(groups, ranks)
    out = _split(groups, picked, threads, smt)
    nics = _choose_nics(topo, out)
    result = [GpuRank(r.cores, r.places, r.gpus, nic) for r, nic in zip(out, nics, strict=True)]
    if opts.order == "cpu":
        result.sort(key=lambda r: min(c.logical for c in r.cores))
    return result, notes


def _preset_variables(topo: Topology, gpus: Sequence[Gpu]) -> list[str]:
    """A plan made where the visible GPUs are already narrowed (Slurm's --gpus sets
    CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES): the plan's per-rank values replace the
    variable. Live: the runtime renumbers the job's GPUs from 0, the plan numbers the node's;
    a topology file: the plan numbers the GPUs of that file, whatever the variable says."""

    names = sorted({g.variable for g in gpus if g.variable and g.variable in os.environ})
    if topo.source != "live":
        return [
            f"{name}={os.environ[name]} is already set, but the plan numbers the GPUs of "
            f"{topo.source}, so its per-rank values replace it; unset {name}, or check that "
            "the plan's indexes are the GPUs this job may use"
            for name in names
        ]
    return [
        f"{name}={os.environ[name]} is already set (the job holds only some GPUs): the plan "
        "numbers the node's GPUs, so its per-rank values replace it; plan with the whole "
        "node's GPUs (sbatch --exclusive) or check the indexes"
        for name in names
    ]


def _identity_notes(gpus: Sequence[Gpu]) -> list[str]:
    """What the per-rank variables rest on: an index guessed from the bus order (AMD, Intel
    without their runtime's device), a user's own ZE_FLAT_DEVICE_HIERARCHY, MIG slices."""
    notes = []
    guessed = [g.os for g in gpus if g.runtime is None and g.vendor != NVIDIA]
    if guessed:
        notes.append(
            f"GPUs {listed(guessed)}: no runtime device (rsmi/ze) in the topology, so their "
            "indexes are their order on the PCI bus; check them with the vendor's tool "
            "(rocm-smi, xpu-smi) or export the topology with hwloc's GPU plugins"
        )
    if any(g.vendor == INTEL for g in gpus) and ZE_HIERARCHY in os.environ:
        notes.append(
            f"{ZE_HIERARCHY}={os.environ[ZE_HIERARCHY][:20]} is your own setting: kept; "
            "ZE_AFFINITY_MASK numbers the devices that mode shows (COMPOSITE: whole GPUs)"
        )
    if any(g.vendor == "1002" for g in gpus) and "HIP_VISIBLE_DEVICES" in os.environ:
        notes.append(
            "HIP_VISIBLE_DEVICES is set: HIP renumbers what ROCR_VISIBLE_DEVICES leaves "
            "visible, so it may hide a rank's GPU; unset it"
        )
    if any(g.mig for g in gpus):
        notes.append(
            "GPUs with MIG slices: a rank gets its GPU's first slice (CUDA_VISIBLE_DEVICES="
            "MIG-<uuid>; CUDA shows one slice per process), the other slices stay unused"
        )
    return notes


def _order_key(group: tuple[_Domain, tuple[Gpu, ...]], order: str) -> tuple[object, ...]:
    dom, gpus = group
    if order == "cpu":
        return (min(c.logical for c in dom.cores), gpus[0].index)
    return (gpus[0].vendor or "", gpus[0].index, gpus[0].pci or "")


def _split(
    groups: list[tuple[_Domain, tuple[Gpu, ...]]],
    picked: list[int],
    threads: int | None,
    smt: bool,
) -> list[GpuRank]:
    """Cores of each domain split evenly between its ranks (in GPU index order)."""
    by_domain: dict[int, list[int]] = {}  # id(domain) -> positions in ``picked``
    for pos, gi in enumerate(picked):
        by_domain.setdefault(id(groups[gi][0]), []).append(pos)
    share: dict[int, list[Core]] = {}
    for positions in by_domain.values():
        dom = groups[picked[positions[0]]][0]
        positions.sort(key=lambda p: (groups[picked[p]][1][0].index, p))
        m, n = len(positions), len(dom.cores)
        if m > n:
            raise PlanError(
                f"layout 'per-gpu': {m} ranks share the {n} usable cores near GPUs "
                f"{listed([g.os for g in dom.gpus])}; use fewer --ranks"
            )
        for i, p in enumerate(positions):
            share[p] = dom.cores[(i * n) // m : ((i + 1) * n) // m]
    slots = {p: _slots(share[p], smt) for p in share}
    smallest = min(len(s) for s in slots.values())
    t = threads if threads is not None else smallest
    if t < 1:
        raise PlanError(f"--threads must be at least 1 (got {t})")
    if t > smallest:
        unit = "PUs" if smt else "cores"
        raise PlanError(
            f"layout 'per-gpu': {t} threads per rank but the smallest rank's share near its "
            f"GPUs holds {smallest} usable {unit}; use --threads {smallest} or fewer"
            + ("" if smt else " (or --smt)")
        )
    out = []
    for p, gi in enumerate(picked):
        places = tuple(slots[p][:t])
        used = {pu for pl in places for pu in pl}
        cores = tuple(c for c in share[p] if used.intersection(c.pus))
        out.append(GpuRank(cores, places, groups[gi][1], None))
    return out


def _choose_nics(topo: Topology, ranks: list[GpuRank]) -> list[Nic | None]:
    """Per rank: the NIC nearest its cores and GPUs (same locality, then NUMA node, then
    package, then any), the least used one among equally near NICs."""
    nics = topo.devices.nics
    if not nics:
        return [None] * len(ranks)
    pkg_of = {pu: c.package for c in topo.cores for pu in c.pus}
    used: dict[str, int] = {n.os: 0 for n in nics}
    out: list[Nic | None] = []
    for r in ranks:
        best = min(nics, key=lambda n: (_distance(r, n, pkg_of), used[n.os], n.pci or "", n.os))
        used[best.os] += 1
        out.append(best)
    return out


def _distance(r: GpuRank, n: Nic, pkg_of: dict[int, int]) -> int:
    """0: the NIC shares the rank's (or its GPUs') locality; 1: its NUMA node; 2: its
    package; 3: elsewhere."""
    pus = {pu for c in r.cores for pu in c.pus} | {pu for g in r.gpus for pu in g.pus}
    if pus.intersection(n.pus):
        return 0
    if {x for c in r.cores for x in c.numa}.intersection(n.numa):
        return 1
    pkgs = {c.package for c in r.cores}
    return 2 if pkgs.intersection(pkg_of[p] for p in n.pus if p in pkg_of) else 3


def rank_env(gpus: Sequence[Gpu], nic: Nic | None) -> dict[str, str]:
    """The per-rank variables: each vendor's visible-devices variable (its runtime indexes;
    a MIG slice's UUID), the order or mode those indexes mean (``CUDA_DEVICE_ORDER=
    PCI_BUS_ID``: CUDA numbers fastest first otherwise; ``ZE_FLAT_DEVICE_HIERARCHY=
    COMPOSITE`` unless the user set it), and ``UCX_NET_DEVICES=<hca>:1`` for an OpenFabrics
    NIC. ``ROCR_VISIBLE_DEVICES`` alone for AMD: HIP_VISIBLE_DEVICES would renumber again."""
    env: dict[str, str] = {}
    for g in gpus:
        if g.variable is not None:
            value = g.mig[0] if g.mig else str(g.index)
            env[g.variable] = ",".join(filter(None, [env.get(g.variable), value]))
    if "CUDA_VISIBLE_DEVICES" in env:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if "ZE_AFFINITY_MASK" in env and ZE_HIERARCHY not in os.environ:
        env[ZE_HIERARCHY] = "COMPOSITE"
    if nic is not None and nic.kind == "openfabrics":
        env["UCX_NET_DEVICES"] = f"{nic.os}:1"
    return env


def describe(gpus: Sequence[Gpu]) -> str:
    return ",".join(f"{g.os}({g.pci})" for g in gpus) or "-"


def locality_text(pus: Sequence[int], numa: Sequence[int]) -> str:
    return f"PUs {format_list(list(pus)) or 'none usable'}, NUMA {format_list(list(numa)) or '?'}"
