"""Node topology from hwloc: live, from an hwloc v2 XML file, or from a synthetic string.

Everything downstream (layouts, emitters) reads only the :class:`Topology` built here;
nothing downstream runs hwloc again.

Indexes, always named:
- ``os`` / ``pus``: OS (physical) indexes, what Linux, Slurm masks and ``OMP_PLACES`` use.
- ``logical``: hwloc's logical index (depth-first order among usable objects of one type),
  what OpenMPI prints (``core:L12``).
"""

import os
import re
from typing import Any, NamedTuple

from topobind.errors import CannotRun, TopobindError, TopologyError
from topobind.inputs import InputFile
from topobind.topo import hwloc_xml
from topobind.topo.bitmap import MAX_OS_INDEX, parse_hwloc_bitmap
from topobind.topo.devices import Devices, devices_of
from topobind.topo.gpus import Inventory
from topobind.topo.hwloc_xml import Attrs, HwlocXml, Pu

SYNTHETIC_PREFIX = "synthetic:"

#: Most PUs a topology may have. Linux builds hold at most 8192 CPUs (x86 MAXSMP; arm64 4096);
#: twice that leaves room. It bounds the work on a bad input: hwloc's lstopo needs ~6 s of
#: CPU for a synthetic node of 16384 PUs, minutes for 65536, hours for a million.
MAX_PUS = 16384
#: Largest hwloc XML read: a 16384-PU node is ~14 MB of XML, a 384-PU one with PCI 0.3 MB.
MAX_XML_BYTES = 64 << 20
#: Most tags ('<') an XML may hold before it is parsed: 32 per PU at MAX_PUS (an lstopo
#: export has ~6 per PU, ~3 with PCI devices counted in), so parsing stays bounded in time
#: and memory (ElementTree needs ~400 bytes per element).
MAX_XML_TAGS = 32 * MAX_PUS
#: Deepest object nesting read from an XML (real nodes: under 20 levels).
MAX_XML_DEPTH = 200
_XML_FIX = (
    "give an hwloc XML file (lstopo-no-graphics --of xml > node.xml on the node), 'live', "
    "synthetic:DESCRIPTION or a named node"
)


def format_list(indexes: list[int] | tuple[int, ...] | frozenset[int]) -> str:
    """``[0,1,2,5,7,8]`` -> ``"0-2,5,7-8"`` (the Linux cpu-list format)."""
    vals = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(parts)


def parse_list(text: str, hi: int = MAX_OS_INDEX, what: str = "CPU list") -> list[int]:
    """Linux cpu-list format (``0-3,8,10-11``) -> sorted OS indexes, each from 0 to ``hi``
    (checked before a range is expanded: ``0-99999999`` costs nothing). Anything else (a
    sign, a non-ASCII digit, ``3-1``, a word) is a :class:`TopobindError` naming ``what``."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        bounds = (lo_text, hi_text) if dash else (lo_text,)
        if not all(0 < len(b) <= 9 and b.isdigit() and b.isascii() for b in bounds):
            raise TopobindError(
                f"{what} {_shown(text)!r}: {part[:20]!r} is not N or N-M (ASCII digits, e.g. 0-3,8)"
            )
        first, last = int(lo_text), int(hi_text or lo_text)
        if first > last or last > hi:
            raise TopobindError(
                f"{what} {_shown(text)!r}: {part!r} is not a range of indexes from 0 to {hi}"
            )
        out.update(range(first, last + 1))
    return sorted(out)


def _shown(text: str) -> str:
    return text if len(text) <= 60 else text[:60] + "..."


# --------------------------------------------------------------------------- model
class Core(NamedTuple):
    """A core. ``pus``: OS indexes of its usable PUs, in hwloc logical order (SMT siblings)."""

    logical: int
    os_index: int | None
    pus: tuple[int, ...]
    package: int  # logical package index
    numa: tuple[int, ...]  # OS indexes of the NUMA nodes local to this core
    l3: int | None  # logical index of its shared-cache domain (L3, or the fallback level)
    kind: int | None = None  # CPU kind index (0 = least efficient) when the machine has several


class CacheDomain(NamedTuple):
    """A shared cache (normally L3): the cores and PUs behind it."""

    logical: int
    level: int
    size_bytes: int
    cores: tuple[int, ...]  # logical core indexes
    pus: tuple[int, ...]  # OS PU indexes
    numa: tuple[int, ...]  # OS indexes of local NUMA nodes
    package: int


class NumaNode(NamedTuple):
    """A NUMA node with CPUs. ``os_index`` is what numactl/Linux call node N."""

    os_index: int
    logical: int
    memory_bytes: int
    cores: tuple[int, ...]  # logical core indexes local to this node
    pus: tuple[int, ...]  # OS PU indexes
    package: int | None
    subtype: str | None = None  # e.g. "MCDRAM" on KNL


class Package(NamedTuple):
    logical: int
    os_index: int | None
    cores: tuple[int, ...]
    pus: tuple[int, ...]
    numa: tuple[int, ...]
    l3: tuple[int, ...]


class CpuKind(NamedTuple):
    pus: tuple[int, ...]
    efficiency: int | None
    core_type: str | None


#: a topology without GPUs or NICs (the default of :class:`Topology`)
NO_DEVICES = Devices()


class Topology:
    """The usable part of one node: only online PUs allowed to this job/process.

    Read-only by convention: a changed copy is ``topo.replace(field=value)``. A plain class
    rather than a dataclass: ``dataclasses`` imports ``inspect`` and compiles each class's
    methods, which every ``topobind plan`` in a job script would pay (``make bench-plan``).
    Equal when every field but ``xml`` is; the repr leaves ``xml`` out."""

    __slots__ = (
        "source",  # "live", a file path, or "synthetic:..."
        "hostname",
        "packages",
        "numa_nodes",
        "l3_domains",
        "shared_cache_level",  # 3 normally; 2 when the machine has no L3; None: none shared
        "cores",
        "excluded_pus",  # OS index -> why not usable
        "cpuless_numa",  # NUMA nodes (OS) with memory but no usable PU
        "numa_distances",
        "numa_distance_index",
        "cpu_kinds",
        "devices",  # GPUs and NICs (topobind.topo.devices)
        "missing_levels",
        "xml",  # the XML it was read from
    )

    def __init__(
        self,
        source: str,
        hostname: str | None,
        packages: tuple[Package, ...],
        numa_nodes: tuple[NumaNode, ...],
        l3_domains: tuple[CacheDomain, ...],
        shared_cache_level: int | None,
        cores: tuple[Core, ...],
        excluded_pus: dict[int, str] | None = None,
        cpuless_numa: tuple[int, ...] = (),
        numa_distances: dict[str, list[list[int]]] | None = None,
        numa_distance_index: tuple[int, ...] = (),
        cpu_kinds: tuple[CpuKind, ...] = (),
        devices: Devices = NO_DEVICES,
        missing_levels: tuple[str, ...] = (),
        xml: str = "",
    ) -> None:
        self.source = source
        self.hostname = hostname
        self.packages = packages
        self.numa_nodes = numa_nodes
        self.l3_domains = l3_domains
        self.shared_cache_level = shared_cache_level
        self.cores = cores
        self.excluded_pus = {} if excluded_pus is None else excluded_pus
        self.cpuless_numa = cpuless_numa
        self.numa_distances = {} if numa_distances is None else numa_distances
        self.numa_distance_index = numa_distance_index
        self.cpu_kinds = cpu_kinds
        self.devices = devices
        #: hwloc levels the XML lacks ("Package", "Core"): PUs right under a cache or NUMA
        #: node (topobind then takes each PU as a core). MPI mappers that count these levels
        #: must not be asked to map on them (see topobind.emit.openmpi).
        self.missing_levels = missing_levels
        self.xml = xml

    def replace(self, **changes: Any) -> "Topology":
        """A copy with ``changes`` (field name -> new value)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return Topology(**fields)

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__[:-1])  # all but xml

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Topology:
            return NotImplemented
        return self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # (its dicts are not hashable either)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__[:-1])
        return f"Topology({shown})"

    # ----- derived views
    @property
    def pus(self) -> tuple[int, ...]:
        """All usable PUs, OS indexes, in hwloc logical order."""
        return tuple(pu for core in self.cores for pu in core.pus)

    @property
    def smt(self) -> int:
        """Largest number of usable PUs on one core."""
        return max((len(c.pus) for c in self.cores), default=0)

    def pu_to_core(self) -> dict[int, Core]:
        return {pu: core for core in self.cores for pu in core.pus}

    def pu_logical(self) -> dict[int, int]:
        """OS PU index -> hwloc logical PU index."""
        return {pu: i for i, pu in enumerate(self.pus)}

    def summary(self) -> dict[str, object]:
        """The compact summary stored in every plan."""
        return {
            "source": self.source,
            "hostname": self.hostname,
            "packages": len(self.packages),
            "numa_nodes": [n.os_index for n in self.numa_nodes],
            "l3_domains": len(self.l3_domains),
            "shared_cache_level": self.shared_cache_level,
            "cores": len(self.cores),
            "pus": len(self.pus),
            "smt": self.smt,
            "pus_os": format_list(self.pus),
            "excluded_pus": {str(k): v for k, v in sorted(self.excluded_pus.items())},
        }


# --------------------------------------------------------------------------- loading
def _lstopo(args: list[str], what: str) -> tuple[int, str, str]:
    """hwloc's ``lstopo-no-graphics ARGS`` (runner.capture: no subprocess module at start-up);
    (exit status, stdout, stderr). A missing hwloc or a run over 300 s (a node at MAX_PUS
    takes seconds) is a :class:`TopologyError` naming ``what``."""
    from topobind.runner import capture  # only a live or synthetic topology runs hwloc
    from topobind.topo import hwloc_tools

    tool = hwloc_tools.find("lstopo-no-graphics")
    if tool is None:
        raise TopologyError(hwloc_tools.missing("lstopo-no-graphics"))
    try:
        return capture([tool[0], *args], 300, f"hwloc building {what}", env=tool[1])
    except CannotRun as exc:
        raise TopologyError(f"{exc}; check the hwloc installation ({tool[2]})") from None
    except TopobindError:
        raise TopologyError(f"hwloc took more than 300 s to build {what}") from None


def _run_lstopo(args: list[str], what: str) -> str:
    status, out, err = _lstopo([*args, "--of", "xml", "-"], f"a topology from {what}")
    if status != 0 or "<topology" not in out:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise TopologyError(f"hwloc could not build a topology from {what}: {last}")
    return out


def synthetic_description(topo: Topology) -> str | None:
    """``synthetic:DESCRIPTION`` of ``topo`` (``lstopo --of synthetic``), for results that
    must be drawn later on another machine; None when hwloc cannot export it (asymmetric
    topologies: offline PUs, irregular groups, a cgroup holding part of the node)."""

    if topo.source.startswith(SYNTHETIC_PREFIX):
        return topo.source
    if not topo.xml:
        return None
    import tempfile  # only for an export

    with tempfile.NamedTemporaryFile("w", suffix=".xml") as f:
        f.write(topo.xml)
        f.flush()
        status, out, _err = _lstopo(["-i", f.name, "--of", "synthetic"], "a synthetic export")
    desc = out.strip()
    if status != 0 or not desc or "\n" in desc:
        return None
    return SYNTHETIC_PREFIX + desc


#: Named nodes of the project's sites and seeds (hwloc synthetic descriptions, OS indexes as
#: the real machines number their PUs): ``--topology betzy-epyc7742``.
NAMED_TOPOLOGIES: dict[str, str] = {
    "betzy-epyc7742": "pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)",
    "epyc9755-nps4": "pack:1 numa:4 l3:4 core:8 pu:2(indexes=2*128:1*2)",
    "epyc9755-nps1": "pack:1 [numa] l3:16 core:8 pu:2(indexes=2*128:1*2)",
    "skx-8160": "pack:2 [numa] l3:1 core:24 pu:2(indexes=2*48:1*2)",
}


def load(source: str = "live") -> Topology:
    """Load a topology from ``live``, ``synthetic:DESCRIPTION``, a name of
    :data:`NAMED_TOPOLOGIES` or an XML file path."""
    if source == "live":
        return load_live()
    if source.startswith(SYNTHETIC_PREFIX):
        return load_synthetic(source[len(SYNTHETIC_PREFIX) :])
    if source in NAMED_TOPOLOGIES and not os.path.exists(source):
        return load_synthetic(NAMED_TOPOLOGIES[source])
    return load_xml(source)


def load_live() -> Topology:
    """This machine, restricted to this process's allowed cpuset (cgroup) and affinity mask.

    lstopo already drops PUs outside the cgroup cpuset; a Slurm step bound with
    task/affinity is restricted by its affinity mask instead, so that is applied too.
    """
    xml = _run_lstopo([], "this machine")
    try:
        affinity: frozenset[int] | None = frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    topo = parse_xml(xml, source="live", affinity=affinity, hostname=os.uname().nodename)
    return _with_live_gpus(topo)


def _with_live_gpus(topo: Topology) -> Topology:
    """The live node's GPUs as sysfs, procfs and NVML see them too (topobind.topo.gpu_live)."""
    from topobind.topo.gpu_live import live_inventory  # only live topologies read /sys

    d = topo.devices
    numa = {n.os_index for n in topo.numa_nodes} | set(topo.cpuless_numa)
    inv = live_inventory(Inventory(d.gpus, d.notes, d.refusal), set(topo.pus), numa, parse_list)
    return topo.replace(devices=d._replace(gpus=inv.gpus, notes=inv.notes, refusal=inv.refusal))


def load_synthetic(description: str) -> Topology:
    """An hwloc synthetic description, e.g. ``pack:2 numa:4 l3:4 core:4 pu:2``."""
    if not description.strip():
        raise TopologyError("empty synthetic description; example: synthetic:'pack:2 core:4 pu:2'")
    _check_synthetic_size(description)
    xml = _run_lstopo(["-i", description], f"synthetic description {description!r}")
    return parse_xml(xml, source=SYNTHETIC_PREFIX + description)


_SYNTHETIC_LEVEL = r"(?:[A-Za-z][A-Za-z0-9]*:)?([0-9]+)"


def _check_synthetic_size(description: str) -> None:
    """Refuse a synthetic description of more than :data:`MAX_PUS` PUs before hwloc expands
    it (a million PUs would keep lstopo busy for hours): the product of its level arities."""

    shown = description if len(description) <= 60 else description[:60] + "..."
    levels = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", description).split()
    pus = 1
    for level in levels:
        m = re.fullmatch(_SYNTHETIC_LEVEL, level)
        if m is None:
            raise TopologyError(
                f"synthetic description {shown!r}: level {level[:30]!r} is not TYPE:COUNT; "
                "example: synthetic:'pack:2 numa:4 l3:4 core:4 pu:2'"
            )
        if int(m.group(1)[:9]) < 1:
            raise TopologyError(
                f"synthetic description {shown!r}: level {level[:30]!r} has no objects; "
                "every count must be at least 1"
            )
        pus = MAX_PUS + 1 if len(m.group(1)) > 6 else pus * int(m.group(1))
        if pus > MAX_PUS:
            raise TopologyError(
                f"synthetic description {shown!r} has more than {MAX_PUS} PUs (the limit; no "
                "Linux node has more); give smaller counts"
            )


def load_xml(path: str | os.PathLike[str]) -> Topology:
    """An hwloc v2 XML file (e.g. ``lstopo-no-graphics --of xml`` run on a compute node):
    a regular file of at most :data:`MAX_XML_BYTES`, never a FIFO or a device."""

    fix = _XML_FIX
    if not os.path.lexists(path) and not str(path).endswith(".xml"):
        fix += ": " + ", ".join(NAMED_TOPOLOGIES)
    text = InputFile("topology file", MAX_XML_BYTES, fix, TopologyError).read_text(path)
    return parse_xml(text, source=str(path))


# --------------------------------------------------------------------------- XML parsing
def _read_xml(text: str, source: str) -> HwlocXml:
    """The document read in one pass, the size of the text bounded first."""
    # Every tag takes 3 characters or more ('<a>'): a shorter text needs no count.
    if len(text) > 3 * MAX_XML_TAGS and text.count("<") > MAX_XML_TAGS:
        raise TopologyError(
            f"{source}: more than {MAX_XML_TAGS} XML tags, more than a node of {MAX_PUS} PUs "
            f"has; {_XML_FIX}"
        )
    return hwloc_xml.read(text, source, MAX_PUS, MAX_XML_DEPTH, _XML_FIX)


def node_cores(text: str, source: str) -> list[tuple[int, ...]]:
    """Every core of the node an hwloc XML describes, allowed or not, as the OS indexes of its
    PUs; cores and PUs in hwloc's logical order (how Slurm numbers a node's CPUs). A PU
    without a Core object above counts as a core."""
    cores: dict[int, list[int]] = {}
    for pu in _read_xml(text, source).pus:
        cores.setdefault(pu.core_key, []).append(pu.os_index)
    return [tuple(pus) for pus in cores.values()]


def live_whole_xml() -> str:
    """This machine's XML with the PUs outside its allowed cpuset kept (``lstopo
    --disallowed``): the whole node, as Slurm and OpenMPI see it."""
    return _run_lstopo(["--disallowed"], "this machine (--disallowed)")


def _usable(
    doc: HwlocXml,
    complete: frozenset[int],
    allowed: frozenset[int] | None,
    affinity: frozenset[int] | None,
) -> tuple[list[Pu], dict[int, str]]:
    """The PUs this job may use, and why each other PU of the node may not."""
    present = {pu.os_index for pu in doc.pus}
    excluded: dict[int, str] = {pu: "offline" for pu in sorted(complete - present)}
    usable = []
    for pu in doc.pus:
        if allowed is not None and pu.os_index not in allowed:
            excluded[pu.os_index] = "not in the allowed cpuset (cgroup)"
        elif affinity is not None and pu.os_index not in affinity:
            excluded[pu.os_index] = "not in this process's affinity mask"
        else:
            usable.append(pu)
    if not usable:
        raise TopologyError(
            f"{doc.source}: the allowed cpuset is empty (no usable PU); check the job's allocation"
        )
    return usable, excluded


def _numa_cpusets(
    doc: HwlocXml, machine: Attrs, usable: set[int], allowed: frozenset[int] | None
) -> tuple[list[tuple[int, frozenset[int], int, str | None]], list[int]]:
    """(OS index, usable PUs, memory, subtype) of each NUMA node with usable PUs, and the OS
    indexes of the allowed ones without."""
    source = doc.source
    nodes_allowed: frozenset[int] | None = None
    if allowed is not None and machine.get("allowed_nodeset"):
        nodes_allowed = _bitmap(source, machine.get("allowed_nodeset", ""))
    with_cpus: list[tuple[int, frozenset[int], int, str | None]] = []
    cpuless: list[int] = []
    seen: set[int] = set()  # a duplicate index would give one rank two NUMA nodes
    for attrs in doc.numa:
        os_idx = _int_attr(attrs, "os_index", source, hi=MAX_OS_INDEX)
        if os_idx in seen:
            raise TopologyError(
                f"{source}: two NUMANode objects have os_index={os_idx}; {_XML_FIX}"
            )
        seen.add(os_idx)
        cs = _bitmap(source, attrs.get("cpuset", "")) & usable
        if nodes_allowed is not None and os_idx not in nodes_allowed:
            continue
        if not cs:
            cpuless.append(os_idx)
            continue
        memory = _int_attr(attrs, "local_memory", source, 0, hi=1 << 62)
        with_cpus.append((os_idx, cs, memory, attrs.get("subtype")))
    return with_cpus, cpuless


def _shared_level(core_caches: list[dict[int, int]]) -> int | None:
    """L3 when there is one, else the highest cache level that several cores share."""
    level_cores: dict[int, dict[int, int]] = {}  # level -> cache key -> cores under it
    for caches in core_caches:
        for level, ckey in caches.items():
            per_cache = level_cores.setdefault(level, {})
            per_cache[ckey] = per_cache.get(ckey, 0) + 1
    if 3 in level_cores:
        return 3
    for level in sorted(level_cores, reverse=True):
        if any(n > 1 for n in level_cores[level].values()):
            return level
    return None


def _logical(keys: list[int | None]) -> dict[int | None, int]:
    """Logical index of each key, in order of first appearance."""
    out: dict[int | None, int] = {}
    for key in keys:
        if key not in out:
            out[key] = len(out)
    return out


def parse_xml(
    text: str,
    source: str,
    affinity: frozenset[int] | None = None,
    hostname: str | None = None,
    job_cpus: frozenset[int] | None = None,
) -> Topology:
    """The topology an hwloc XML describes, restricted to its allowed cpuset and to
    ``affinity``. ``job_cpus``: the CPUs a job holds on another node of the same hardware;
    they replace the document's allowed cpuset and nodeset (those of the node it was made on)."""
    doc = _read_xml(text, source)
    machine: Attrs = doc.machine or {}
    allowed_attr = machine.get("allowed_cpuset")
    allowed = _bitmap(source, allowed_attr) if allowed_attr else None
    if job_cpus is not None:
        allowed = job_cpus
        machine = {k: v for k, v in machine.items() if k != "allowed_nodeset"}
    complete = _bitmap(source, machine.get("complete_cpuset") or machine.get("cpuset") or "")
    if hostname is None:
        hostname = doc.machine_infos.get("HostName")
    if not doc.pus:
        raise TopologyError(f"{source}: hwloc XML contains no PU objects")
    usable, excluded = _usable(doc, complete, allowed, affinity)
    usable_set = {pu.os_index for pu in usable}
    numa_cpusets, cpuless = _numa_cpusets(doc, machine, usable_set, allowed)
    kinds = _parse_cpukinds(doc, usable_set)
    cores, pkg_keys, level, cache_attrs = _cores(doc, usable, numa_cpusets, kinds)
    distances, dist_index = _parse_numa_distances(doc)
    numa_os = {n[0] for n in numa_cpusets} | set(cpuless)
    return Topology(
        source=source,
        hostname=hostname,
        packages=_packages(cores, [doc.packages.get(k) if k else None for k in pkg_keys], source),
        numa_nodes=_numa_nodes(cores, numa_cpusets),
        l3_domains=_l3_domains(cores, level, cache_attrs, source),
        shared_cache_level=level,
        cores=tuple(cores),
        excluded_pus=excluded,
        cpuless_numa=tuple(sorted(cpuless)),
        numa_distances=distances,
        numa_distance_index=dist_index,
        cpu_kinds=tuple(kinds),
        devices=devices_of(doc.osdevs, usable_set, numa_os, source, doc.pcidevs),
        xml=text,
        missing_levels=(() if doc.packages else ("Package",)) + (() if doc.has_core else ("Core",)),
    )


def _cores(
    doc: HwlocXml,
    usable: list[Pu],
    numa_cpusets: list[tuple[int, frozenset[int], int, str | None]],
    kinds: list[CpuKind],
) -> tuple[list[Core], list[int | None], int | None, list[Attrs]]:
    """The usable cores in logical order; the package keys in logical order, the shared cache
    level and its caches in logical order (their logical indexes are what the cores name)."""
    core_pus: dict[int, list[int]] = {}
    first: dict[int, Pu] = {}
    for pu in usable:
        if pu.core_key not in core_pus:
            core_pus[pu.core_key], first[pu.core_key] = [], pu
        core_pus[pu.core_key].append(pu.os_index)
    recs = [first[key] for key in core_pus]
    pkg_logical = _logical([rec.pkg for rec in recs])
    level = _shared_level([rec.caches for rec in recs])
    cache_keys = [rec.caches.get(level) if level is not None else None for rec in recs]
    cache_logical = _logical([ck for ck in cache_keys if ck is not None])
    pu_numa: dict[int, list[int]] = {}
    for os_idx, cs, _mem, _sub in numa_cpusets:
        for os_pu in cs:
            pu_numa.setdefault(os_pu, []).append(os_idx)
    pu_kind = {p: i for i, kind in enumerate(kinds) for p in kind.pus} if len(kinds) > 1 else {}
    cores: list[Core] = []
    for logical, (rec, ck) in enumerate(zip(recs, cache_keys, strict=True)):
        cpus = tuple(core_pus[rec.core_key])
        cores.append(
            Core(
                logical=logical,
                os_index=_opt_int_attr(rec.core, "os_index", doc.source),
                pus=cpus,
                package=pkg_logical[rec.pkg],
                numa=tuple(sorted({n for pu in cpus for n in pu_numa.get(pu, ())})),
                l3=cache_logical.get(ck) if ck is not None else None,
                kind=pu_kind.get(cpus[0]),
            )
        )
    return (
        cores,
        list(pkg_logical),
        level,
        [doc.caches[ck] for ck in cache_logical if ck is not None],
    )


def _group(cores: list[Core], key: str) -> dict[int, list[Core]]:
    """Cores by one of their indexes (``package``, ``l3``; ``numa``: each node they touch)."""
    out: dict[int, list[Core]] = {}
    for c in cores:
        value = getattr(c, key)
        for k in value if isinstance(value, tuple) else (value,):
            out.setdefault(k, []).append(c)
    return out


def _l3_domains(
    cores: list[Core], level: int | None, elems: list[Attrs], source: str
) -> tuple[CacheDomain, ...]:
    members = _group(cores, "l3")
    return tuple(
        CacheDomain(
            logical=i,
            level=level or 0,
            size_bytes=_int_attr(elem, "cache_size", source, 0, hi=1 << 62),
            cores=tuple(c.logical for c in members[i]),
            pus=tuple(pu for c in members[i] for pu in c.pus),
            numa=tuple(sorted({n for c in members[i] for n in c.numa})),
            package=members[i][0].package,
        )
        for i, elem in enumerate(elems)
    )


def _numa_nodes(
    cores: list[Core], numa_cpusets: list[tuple[int, frozenset[int], int, str | None]]
) -> tuple[NumaNode, ...]:
    by_node = _group(cores, "numa")
    nodes: list[NumaNode] = []
    for logical, (os_idx, cs, mem, subtype) in enumerate(numa_cpusets):
        members = by_node.get(os_idx, [])
        pkgs = {c.package for c in members}
        nodes.append(
            NumaNode(
                os_index=os_idx,
                logical=logical,
                memory_bytes=mem,
                cores=tuple(c.logical for c in members),
                pus=tuple(pu for c in members for pu in c.pus if pu in cs),
                package=pkgs.pop() if len(pkgs) == 1 else None,
                subtype=subtype,
            )
        )
    return tuple(nodes)


def _packages(cores: list[Core], elems: list[Attrs | None], source: str) -> tuple[Package, ...]:
    """One package per logical index (``elems``: its element, None for PUs outside any)."""
    members = _group(cores, "package")
    return tuple(
        Package(
            logical=i,
            os_index=_opt_int_attr(elem, "os_index", source),
            cores=tuple(c.logical for c in members[i]),
            pus=tuple(pu for c in members[i] for pu in c.pus),
            numa=tuple(sorted({n for c in members[i] for n in c.numa})),
            l3=tuple(sorted({c.l3 for c in members[i] if c.l3 is not None})),
        )
        for i, elem in enumerate(elems)
    )


def _bitmap(source: str, text: str) -> frozenset[int]:
    """:func:`parse_hwloc_bitmap` of an XML attribute; a bad one names the file."""
    try:
        return parse_hwloc_bitmap(text)
    except TopologyError as exc:
        raise TopologyError(f"{source}: {exc}; {_XML_FIX}") from None


def _int_attr(attrs: Attrs, name: str, source: str, default: int = -1, hi: int = 1 << 62) -> int:
    return hwloc_xml.int_attr(attrs, name, source, _XML_FIX, default, hi)


def _opt_int_attr(attrs: Attrs | None, name: str, source: str) -> int | None:
    """:func:`_int_attr`, None when the object or the attribute is absent."""
    if attrs is None or attrs.get(name) is None:
        return None
    return hwloc_xml.int_attr(attrs, name, source, _XML_FIX)


def _is_int(word: str) -> bool:
    """``-?[0-9]{1,20}`` (ASCII digits only), without a regular expression (a distance matrix
    has thousands of words)."""
    digits = word[1:] if word[:1] == "-" else word
    return 0 < len(digits) <= 20 and digits.isdigit() and digits.isascii()


def _all_ints(words: list[str]) -> bool:
    """Every word :func:`_is_int`; at once for the usual words (ASCII digits, 20 at most: a
    matrix of 1024 NUMA nodes has a million), word by word otherwise."""
    joined = "".join(words)
    if joined.isdigit() and joined.isascii() and max(map(len, words), default=0) <= 20:
        return True
    return all(map(_is_int, words))


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and _is_int(value) else None


def _parse_cpukinds(doc: HwlocXml, usable: set[int]) -> list[CpuKind]:
    kinds: list[CpuKind] = []
    taken: set[int] = set()  # the PUs of the kinds before: a PU has one kind
    for attrs, infos in doc.cpukinds:
        cpuset = _bitmap(doc.source, attrs.get("cpuset", ""))
        if not taken.isdisjoint(cpuset):
            raise TopologyError(
                f"{doc.source}: cpukind objects overlap (PUs {format_list(cpuset & taken)} in two "
                f"kinds); {_XML_FIX}"
            )
        taken |= cpuset
        pus = tuple(sorted(cpuset & usable))
        if not pus:
            continue
        eff = attrs.get("forced_efficiency") or attrs.get("efficiency")
        kinds.append(
            CpuKind(pus=pus, efficiency=_int_or_none(eff), core_type=infos.get("CoreType"))
        )
    kinds.sort(key=lambda k: k.efficiency if k.efficiency is not None else -1)
    return kinds


def _parse_numa_distances(doc: HwlocXml) -> tuple[dict[str, list[list[int]]], tuple[int, ...]]:
    out: dict[str, list[list[int]]] = {}
    index: tuple[int, ...] = ()
    for matrix in doc.distances:
        attrs = matrix.attrs
        if attrs.get("type") != "NUMANode" or attrs.get("indexing", "os") != "os":
            continue
        n = _int_attr(attrs, "nbobjs", doc.source, 0, hi=MAX_OS_INDEX)
        if matrix.indexes is None or not n:
            continue
        idx_words = "".join(matrix.indexes).split()
        value_words = "".join(matrix.values).split()
        if not (_all_ints(idx_words) and _all_ints(value_words)):
            continue  # not numbers: the distances are left out, like a malformed matrix
        idx = tuple(int(x) for x in idx_words)
        values = [int(x) for x in value_words]
        if len(idx) != n or len(values) != n * n:
            continue
        index = idx
        out[attrs.get("name") or f"kind{attrs.get('kind')}"] = [
            values[i * n : (i + 1) * n] for i in range(n)
        ]
    return out, index
