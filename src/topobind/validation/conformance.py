"""Does this node conform to what the site expects? (NHC-style, one line per finding.)

The expectation is the site's ``node:`` section (with its ``hosts:`` overrides for the host
list this node is in) or a golden hwloc XML. The node is read live: the topology
(packages, NUMA nodes, L3 domains, cores, SMT, memory per NUMA node, GPUs, NICs), the hugetlb
pools per NUMA node, and the settings that change results (NUMA balancing, transparent huge
pages, the CPU frequency governor) where the kernel exposes them. The findings feed
``topobind site check --live`` (exit status 1 with one line each: usable from LBNL NHC or
Slurm's HealthCheckProgram), NodeCheck, and ``--drain`` (``scontrol update ... reason=``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topobind.topo import hostlist

COUNT_KEYS = ("packages", "numa_nodes", "l3_domains", "cores", "smt")
AT_LEAST_KEYS = ("hugepages_2m_per_numa", "hugepages_1g_per_numa")
EXACT_KEYS = (*COUNT_KEYS, "gpus", "nics", "gpu_numa", "nic_numa", "numa_balancing", "thp",
              "governor")  # fmt: skip
MEMORY_SLACK = 0.05  # memory per NUMA node: the kernel and firmware keep a few percent


@dataclass(frozen=True)
class Finding:
    key: str
    expected: Any
    found: Any
    where: str  # the file (or XML) the expectation came from

    def text(self, host: str) -> str:
        if self.key == "memory_gib_per_numa":
            want = f"at least {self.expected * (1 - MEMORY_SLACK):.1f} GiB on every NUMA node"
        elif self.key in AT_LEAST_KEYS:
            want = f"at least {self.expected} on every NUMA node"
        else:
            want = str(self.expected)
        return f"{host}: {self.key}: expected {want}, found {self.found} ({self.where})"


def whole_node() -> Any:
    """This node's hardware, whatever the job's cpuset or affinity mask allows this process
    (a plain ``srun -N3`` gives a task 1 CPU: the node still has all its cores): hwloc's
    XML with the disallowed PUs kept, read as if a job held every CPU. Where that cannot be
    read and this process is restricted, TopobindError (one line): counting a mask would
    call a good node non-conforming."""
    import os

    from topobind.errors import TopobindError
    from topobind.topo import topology

    try:
        xml = topology.live_whole_xml()
        every = frozenset(pu for core in topology.node_cores(xml, "live") for pu in core)
        return topology.parse_xml(xml, "live", hostname=os.uname().nodename, job_cpus=every)
    except TopobindError as exc:
        topo = topology.load("live")
        allowed = len(os.sched_getaffinity(0))
        if allowed < (os.cpu_count() or allowed):
            raise TopobindError(
                f"cannot read the whole node ({exc}) and this process may use only {allowed} of "
                f"{os.cpu_count()} CPUs (a job's mask): run the check outside a job step, or "
                "with srun --exclusive --cpu-bind=none"
            ) from None
        return topo


def expected_for(node: Any, host: str) -> dict[str, Any]:
    """The node: section's values for ``host``: the defaults, then each matching ``hosts:``
    entry (in file order) on top."""
    out = {k: getattr(node, k) for k in COUNT_KEYS}
    out.update(node.extra or {})
    for pattern, overrides in (node.hosts or {}).items():
        if host in hostlist.expand(pattern):
            out.update(overrides)
    return out


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _thp(text: str | None) -> str | None:
    if not text or "[" not in text:
        return None
    return text[text.index("[") + 1 : text.index("]")]


def live_facts(topo: Any, sysfs: str = "/sys", procfs: str = "/proc") -> dict[str, Any]:
    """What this node is, keyed like the node: section (a key is missing when unreadable)."""
    from topobind.measure.hugepages import hugepages_status
    from topobind.validation.sites import node_counts

    facts: dict[str, Any] = dict(node_counts(topo))
    mem = [n.memory_bytes / 2**30 for n in topo.numa_nodes]
    if mem:
        facts["memory_gib_per_numa"] = min(mem)
    facts["gpus"] = len(topo.devices.gpus)
    facts["nics"] = len(topo.devices.nics)
    facts["gpu_numa"] = locality(topo.devices.gpus)
    facts["nic_numa"] = locality(topo.devices.nics)
    pools = hugepages_status(sysfs)
    for label, kib in (("2m", 2048), ("1g", 1048576)):
        pool = pools.get(kib)
        per_node = [pool.nodes[n].nr for n in pool.nodes] if pool and pool.nodes else []
        facts[f"hugepages_{label}_per_numa"] = min(per_node) if per_node else 0
    balancing = _read(f"{procfs}/sys/kernel/numa_balancing")
    if balancing is not None and balancing.isdigit():
        facts["numa_balancing"] = int(balancing)
    thp = _thp(_read(f"{sysfs}/kernel/mm/transparent_hugepage/enabled"))
    if thp:
        facts["thp"] = thp
    governor = _read(f"{sysfs}/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        facts["governor"] = governor
    return facts


def locality(devices: Any) -> list[int]:
    """The NUMA node (OS index) each device is near, sorted; -1: hwloc gives none."""
    return sorted(d.numa[0] if d.numa else -1 for d in devices)


def findings(expected: Mapping[str, Any], facts: Mapping[str, Any], where: str) -> list[Finding]:
    out: list[Finding] = []
    for key, want in expected.items():
        if key not in facts:
            if key in ("numa_balancing", "thp", "governor"):
                out.append(Finding(key, want, "unreadable on this node", where))
            continue
        got = facts[key]
        if key == "memory_gib_per_numa":
            bad = got < want * (1 - MEMORY_SLACK)
            got = f"{got:.1f} GiB"
        elif key in AT_LEAST_KEYS:
            bad = got < want
        elif isinstance(want, list):  # gpu_numa, nic_numa: the NUMA node of each device
            bad = sorted(want) != got
        else:
            bad = str(got) != str(want)
        if bad:
            out.append(Finding(key, want, got, where))
    return out


def golden_expected(path: Path, host: str) -> tuple[dict[str, Any], str]:
    """The counts of a golden hwloc XML: PATH itself, or PATH/<host>.xml for a directory."""
    from topobind.errors import TopobindError
    from topobind.topo.topology import load
    from topobind.validation.sites import node_counts

    if path.is_dir():
        host = node_name(host, None)  # never a name that leads out of the directory
    xml = path / f"{host}.xml" if path.is_dir() else path
    if not xml.is_file():
        raise TopobindError(
            f"--golden {path}: no {xml.name} (give an hwloc XML, e.g. from lstopo "
            f"--of xml, or a directory with one <host>.xml per node)"
        )
    topo = load(str(xml))
    counts: dict[str, Any] = dict(node_counts(topo))
    if topo.numa_nodes:  # an XML without NUMA nodes: numa_nodes 0 is the finding, no memory
        counts["memory_gib_per_numa"] = min(n.memory_bytes for n in topo.numa_nodes) / 2**30
    counts["gpus"], counts["nics"] = len(topo.devices.gpus), len(topo.devices.nics)
    counts["gpu_numa"], counts["nic_numa"] = (locality(topo.devices.gpus),
                                              locality(topo.devices.nics))  # fmt: skip
    return counts, str(xml)


def node_name(slurmd_nodename: str | None, hostname: str | None) -> str:
    """This node's name: ``$SLURMD_NODENAME``, else the host name (its first label when the
    full name is no node name); one literal node name, or TopobindError (a name with ``/``
    would lead ``--golden DIR`` out of DIR, a host list would drain other nodes)."""
    import socket

    from topobind.errors import TopobindError
    from topobind.validation.reframe_report import NODE_NAME

    if slurmd_nodename is not None:
        if not NODE_NAME.match(slurmd_nodename):
            raise TopobindError(f"SLURMD_NODENAME={slurmd_nodename[:60]!r}: not one node name "
                                "(letters, digits, '.', '_', '-'); unset it or fix it")  # fmt: skip
        return slurmd_nodename
    host = hostname or socket.gethostname()
    if not NODE_NAME.match(host):
        raise TopobindError(f"host name {host[:60]!r} is not a node name; set SLURMD_NODENAME")
    return host


def drain_command(host: str, reason: str) -> list[str]:
    """``scontrol update nodename=HOST state=drain reason="topobind: REASON"``
    (:func:`topobind.validation.slurm.drain_command`: one literal node name only)."""
    from topobind.validation import slurm

    return slurm.drain_command(host, reason)


def drain_text(host: str, reason: str) -> str:
    return shlex.join(drain_command(host, reason))
