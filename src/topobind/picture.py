"""A text picture of a plan on its topology, for terminals and docs.

One line per NUMA node (grouped by package); inside it one bracket per L3 domain; one cell
per core showing which rank uses it (``.`` = unused). With SMT plans a cell shows the rank on
each PU of the core (``0/1``).
"""

from __future__ import annotations

from topobind.plan import Plan


def _cell(plan: Plan, pus: tuple[int, ...], owner: dict[int, int], width: int) -> str:
    if plan.smt:
        text = "/".join(str(owner[pu]) if pu in owner else "." for pu in pus)
    else:  # the rank using the core, through whichever PU of it
        used = [owner[pu] for pu in pus if pu in owner]
        text = str(used[0]) if used else "."
    return text.rjust(width)


def plan_picture(plan: Plan) -> str:
    topo = plan.topology
    owner = {pu: r.rank for r in plan.ranks for place in r.places for pu in place}
    width = max(len(str(plan.nranks - 1)), 1)
    if plan.smt:
        width = width * topo.smt + topo.smt - 1
    lines = [
        f"{plan.layout}: {plan.nranks} ranks x {plan.threads} threads on {topo.source}",
        "one cell per core, in hwloc logical order; the number is the rank using it "
        "('.' unused)" + ("; SMT: rank per PU of the core" if plan.smt else ""),
    ]
    by_numa: dict[tuple[int, ...], list[int]] = {}
    for core in topo.cores:
        by_numa.setdefault(core.numa, []).append(core.logical)
    cores = {c.logical: c for c in topo.cores}
    for pkg in topo.packages:
        lines.append(f"Package L#{pkg.logical}")
        for numa, members in by_numa.items():
            in_pkg = [c for c in members if cores[c].package == pkg.logical]
            if not in_pkg:
                continue
            label = "NUMA " + (",".join(map(str, numa)) if numa else "?")
            groups: list[list[int]] = []
            for c in in_pkg:
                if groups and cores[groups[-1][-1]].l3 == cores[c].l3:
                    groups[-1].append(c)
                else:
                    groups.append([c])
            cells = [
                "[" + " ".join(_cell(plan, cores[c].pus, owner, width) for c in g) + "]"
                for g in groups
            ]
            lines.append(f"  {label:<8}" + "".join(cells))
    return "\n".join(lines)
