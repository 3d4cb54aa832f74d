"""Small node probes the checks run inside their jobs (on the partition's node).

  python probe.py hugepages          JSON: hugetlb pools per page size and NUMA node
  python probe.py pick-cpus same-l3  two CPUs (OS indexes) on two cores of one L3 domain
  python probe.py pick-cpus cross-l3 the first CPUs of the first two L3 domains
  python probe.py cores              number of cores this job may use

Exit status 3 with a one-line message when the node cannot provide what is asked.
"""

from __future__ import annotations

import json
import sys


def _hugepages() -> int:
    from topobind.kernels.hugepages import hugepages_status

    status = hugepages_status()
    doc = {
        str(kib): {
            "nr": pool.nr,
            "free": pool.free,
            "nodes": {str(n): {"nr": v.nr, "free": v.free} for n, v in pool.nodes.items()},
        }
        for kib, pool in status.items()
    }
    print(json.dumps(doc))
    return 0


def _pick(kind: str) -> int:
    from topobind.topo.topology import load

    topo = load("live")
    cores_by_l3: dict[int, list[int]] = {}
    for core in topo.cores:
        if core.l3 is not None:
            cores_by_l3.setdefault(core.l3, []).append(core.pus[0])
    domains = [cpus for _l3, cpus in sorted(cores_by_l3.items())]
    if kind == "same-l3":
        two = next((d[:2] for d in domains if len(d) >= 2), None)
        if two is None:
            print("no L3 domain holds two usable cores", file=sys.stderr)
            return 3
    elif kind == "cross-l3":
        if len(domains) < 2:
            print(f"the node has {len(domains)} L3 domain(s); cross-l3 needs two", file=sys.stderr)
            return 3
        two = [domains[0][0], domains[1][0]]
    else:
        print(f"unknown pair kind {kind!r}", file=sys.stderr)
        return 2
    print(",".join(str(c) for c in two))
    return 0


def _cores() -> int:
    from topobind.topo.topology import load

    print(len(load("live").cores))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["hugepages"]:
        return _hugepages()
    if argv[:1] == ["pick-cpus"] and len(argv) == 2:
        return _pick(argv[1])
    if argv[:1] == ["cores"]:
        return _cores()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
