"""Small node probes the checks run inside their jobs (on the partition's node).

  python probe.py hugepages          JSON: hugetlb pools per page size and NUMA node
  python probe.py pick-cpus same-l3  two CPUs (OS indexes) on two cores of one L3 domain
  python probe.py pick-cpus cross-l3 the first CPUs of the first two L3 domains
  python probe.py cores              number of cores this job may use
  python probe.py load OUT -- CMD...  run CMD, write OUT (JSON): the CPU time other processes
                                     used on the node meanwhile; exit with CMD's status

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


BUSY_SHARE = 0.25  # as topobind calibrate: others above 25 % of the CPU time = a busy node


def _host_busy() -> tuple[float, int]:
    """(CPU-seconds all CPUs spent not idle, CPUs) from /proc/stat."""
    import os

    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1


def _load(out: str, cmd: list[str]) -> int:
    """Run ``cmd`` and record the load it ran under: the CPUs other processes kept busy
    (the host's busy time minus the command's own CPU time, over the wall time)."""
    import os
    import resource
    import subprocess
    import time

    busy0, cpus = _host_busy()
    own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load1 = os.getloadavg()[0]
    t0 = time.monotonic()
    status = subprocess.call(cmd)
    seconds = max(time.monotonic() - t0, 1e-3)
    busy1, _ = _host_busy()
    own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (own1.ru_utime - own0.ru_utime) + (own1.ru_stime - own0.ru_stime)
    others = min(max(0.0, (busy1 - busy0) - own) / seconds, float(cpus))
    share = others / cpus
    doc = {
        "cpus": cpus,
        "seconds": round(seconds, 3),
        "own_cpu_seconds": round(own, 3),
        "others_cpus": round(others, 3),
        "others_share": round(share, 3),
        "busy": share > BUSY_SHARE,
        "busy_share_limit": BUSY_SHARE,
        "loadavg_1m_at_start": round(load1, 2),
    }
    with open(out + ".tmp", "w") as fh:
        json.dump(doc, fh)
    os.replace(out + ".tmp", out)
    return status


def main(argv: list[str]) -> int:
    if argv[:1] == ["hugepages"]:
        return _hugepages()
    if argv[:1] == ["pick-cpus"] and len(argv) == 2:
        return _pick(argv[1])
    if argv[:1] == ["cores"]:
        return _cores()
    if argv[:1] == ["load"] and len(argv) >= 4 and argv[2] == "--":
        return _load(argv[1], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
