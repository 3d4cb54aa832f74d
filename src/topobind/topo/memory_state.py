"""The kernel settings that silently undo memory placement, and the hugetlb pools per NUMA node.

Read from /proc and /sys with bounded reads (a few hundred bytes each; at most
:data:`MAX_NODES` NUMA nodes), no subprocess: ``topobind show`` and every verification print
them (:func:`state_lines`), and :mod:`topobind.plan.memory` plans page sizes from
:func:`read_pools`.

- ``kernel.numa_balancing`` (/proc/sys/kernel/numa_balancing): 1 lets the kernel migrate
  pages (and tasks) towards where they are used, behind a ``bind`` policy's back for the pages
  of other policies and with page-fault overhead for every program.
- THP mode and defrag (/sys/kernel/mm/transparent_hugepage/{enabled,defrag}): which
  anonymous mappings get 2 MiB pages without asking, and how hard the kernel works for them.
- ``vm.zone_reclaim_mode`` (/proc/sys/vm/zone_reclaim_mode): non-zero reclaims page cache on
  the local node before allocating on another one.
- The hugetlb pools: free and total pages of each size on each NUMA node
  (/sys/devices/system/node/nodeN/hugepages/hugepages-SIZEkB/{free,nr}_hugepages).

Every function takes ``root`` (default "/") so tests can give a prepared tree.
"""

import os
from typing import NamedTuple

from topobind.topo.topology import parse_list

#: NUMA nodes read at most (the kernel's MAX_NUMNODES on x86-64 is 1024).
MAX_NODES = 1024


def read_small(path: str, limit: int = 4096) -> str | None:
    """The first ``limit`` bytes of a small /proc or /sys file; None when it cannot be read.
    A non-regular file other than those of /proc and /sys is never opened (no FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, limit).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _int(path: str) -> int | None:
    text = read_small(path, 64)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _choice(text: str | None) -> str | None:
    """The bracketed word of ``always [madvise] never``."""
    if text is None:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else text.strip() or None


def page_label(kib: int) -> str:
    """``4k``, ``2M``, ``1G`` (the ``--pages`` spelling) for a page size in KiB."""
    if kib >= 1 << 20 and kib % (1 << 20) == 0:
        return f"{kib >> 20}G"
    if kib >= 1 << 10 and kib % (1 << 10) == 0:
        return f"{kib >> 10}M"
    return f"{kib}k"


class Pool(NamedTuple):
    """One NUMA node's hugetlb pool of one page size."""

    node: int
    size_kib: int
    free: int
    total: int


def node_dirs(root: str = "/") -> list[int]:
    """The NUMA nodes (OS indexes) the kernel lists under /sys/devices/system/node."""
    base = os.path.join(root, "sys/devices/system/node")
    try:
        names = os.listdir(base)
    except OSError:
        return []
    nodes = sorted(int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit())
    return nodes[:MAX_NODES]


def pool_sizes(root: str = "/") -> list[int]:
    """The hugetlb page sizes (KiB) this kernel has a pool for (``hugepages-SIZEkB``)."""
    try:
        names = os.listdir(os.path.join(root, "sys/kernel/mm/hugepages"))
    except OSError:
        return []
    sizes = (n[len("hugepages-") : -2] for n in names if n.startswith("hugepages-"))
    return sorted(int(s) for s in sizes if s.isdigit())


def read_pools(root: str = "/") -> list[Pool]:
    """Free and total hugetlb pages per size per NUMA node."""
    pools = []
    for size in pool_sizes(root):
        for node in node_dirs(root):
            base = os.path.join(
                root, f"sys/devices/system/node/node{node}/hugepages/hugepages-{size}kB"
            )
            free, total = _int(f"{base}/free_hugepages"), _int(f"{base}/nr_hugepages")
            if free is not None and total is not None:
                pools.append(Pool(node, size, free, total))
    return pools


def pool_file(node: int, size_kib: int) -> str:
    """The file that sets a node's pool (``echo N > ...`` as root)."""
    return f"/sys/devices/system/node/node{node}/hugepages/hugepages-{size_kib}kB/nr_hugepages"


class MemState(NamedTuple):
    """The settings that decide what a memory policy and a page size really give."""

    numa_balancing: int | None
    thp_enabled: str | None
    thp_defrag: str | None
    zone_reclaim_mode: int | None
    pools: tuple[Pool, ...]
    nodes: tuple[int, ...]


def read_state(root: str = "/") -> MemState:
    thp = os.path.join(root, "sys/kernel/mm/transparent_hugepage")
    return MemState(
        numa_balancing=_int(os.path.join(root, "proc/sys/kernel/numa_balancing")),
        thp_enabled=_choice(read_small(f"{thp}/enabled", 256)),
        thp_defrag=_choice(read_small(f"{thp}/defrag", 256)),
        zone_reclaim_mode=_int(os.path.join(root, "proc/sys/vm/zone_reclaim_mode")),
        pools=tuple(read_pools(root)),
        nodes=tuple(node_dirs(root)),
    )


def _shown(value: object) -> str:
    return "unknown" if value is None else str(value)


def state_lines(state: MemState) -> list[str]:
    """``memory: numa_balancing 0, THP madvise (defrag madvise), zone_reclaim_mode 0`` and one
    ``hugepages`` line per NUMA node (free/total of each size)."""
    lines = [
        f"memory: kernel.numa_balancing {_shown(state.numa_balancing)}, THP "
        f"{_shown(state.thp_enabled)} (defrag {_shown(state.thp_defrag)}), "
        f"vm.zone_reclaim_mode {_shown(state.zone_reclaim_mode)}"
    ]
    for node in state.nodes:
        mine = [p for p in state.pools if p.node == node]
        pools = ", ".join(f"{page_label(p.size_kib)} {p.free}/{p.total}" for p in mine)
        lines.append(f"  NUMA node {node} hugepages free/total: {pools or 'none'}")
    return lines


def state_json(state: MemState) -> dict[str, object]:
    return {
        "numa_balancing": state.numa_balancing,
        "thp_enabled": state.thp_enabled,
        "thp_defrag": state.thp_defrag,
        "zone_reclaim_mode": state.zone_reclaim_mode,
        "hugepages": [
            {"node": p.node, "size_kib": p.size_kib, "free": p.free, "total": p.total}
            for p in state.pools
        ],
    }


def allowed_nodes(root: str = "/") -> tuple[int, ...] | None:
    """The NUMA nodes this process may allocate on (``Mems_allowed_list`` of
    /proc/self/status, its cpuset), None when unknown."""
    text = read_small(os.path.join(root, "proc/self/status"), 1 << 16)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("Mems_allowed_list:"):
            try:
                return tuple(parse_list(line.split(":", 1)[1].strip()))
            except ValueError:
                return None
    return None


def memory_nodes(root: str = "/") -> tuple[int, ...]:
    """The NUMA nodes that have memory (/sys/devices/system/node/has_memory)."""
    text = read_small(os.path.join(root, "sys/devices/system/node/has_memory"), 4096)
    try:
        return tuple(parse_list(text.strip())) if text and text.strip() else tuple(node_dirs(root))
    except ValueError:
        return tuple(node_dirs(root))
