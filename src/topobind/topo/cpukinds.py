"""Nodes with several kinds of cores (hwloc CPU kinds: P-cores and E-cores).

hwloc ranks the kinds by efficiency: the higher the value, the more performant the kind
(``lstopo --cpukinds``). Layouts plan on a *view* of the topology that keeps only the PUs of
the chosen kind (:func:`restrict`); the plan itself keeps the whole topology, so hwloc
logical indexes (rankfiles) and OS indexes (masks) stay those of the node.
"""

from __future__ import annotations

from topobind.errors import PlanError
from topobind.topo.topology import Core, Topology, format_list

CHOICES = ("performance", "efficiency", "all")
DEFAULT = "performance"


def kind_names(topo: Topology) -> list[str]:
    """A label per kind (same order as ``topo.cpu_kinds``, least performant first)."""
    n = len(topo.cpu_kinds)
    if n < 2:
        return ["the only kind"] * n
    return [
        "most performant" if i == n - 1 else "most efficient" if i == 0 else "intermediate"
        for i in range(n)
    ]


def kinds_text(topo: Topology) -> list[str]:
    """``show`` lines: one per CPU kind, when the node has several."""
    if len(topo.cpu_kinds) < 2:
        return []
    names = kind_names(topo)
    return [
        f"CPU kind {i} ({names[i]}; efficiency {k.efficiency}, {k.core_type or 'unnamed'}): "
        f"PUs {format_list(k.pus)}"
        for i, k in enumerate(topo.cpu_kinds)
    ]


def chosen_pus(topo: Topology, choice: str) -> frozenset[int] | None:
    """The PUs of ``choice`` (None: every PU, the node has one kind or ``all`` was asked)."""
    if choice not in CHOICES:
        raise PlanError(f"--cpukind {choice!r}: choose one of {', '.join(CHOICES)}")
    if len(topo.cpu_kinds) < 2 or choice == "all":
        return None
    kind = topo.cpu_kinds[-1] if choice == "performance" else topo.cpu_kinds[0]
    return frozenset(kind.pus)


def restrict(topo: Topology, choice: str) -> tuple[Topology, list[str]]:
    """(the view of ``topo`` holding only the chosen kind's PUs, notes for the plan)."""
    keep = chosen_pus(topo, choice)
    if keep is None:
        return topo, []
    cores: list[Core] = []
    for core in topo.cores:
        pus = tuple(pu for pu in core.pus if pu in keep)
        if pus:
            cores.append(core._replace(pus=pus))
    others = sorted(set(topo.pus) - keep)
    notes = [
        f"this node has {len(topo.cpu_kinds)} kinds of cores; the plan uses only the "
        f"{'most performant' if choice == 'performance' else 'most efficient'} kind "
        f"(PUs {format_list(sorted(keep))}), not PUs {format_list(others)}; "
        "--cpukind all uses every core"
    ]
    return topo.replace(cores=tuple(cores)), notes
