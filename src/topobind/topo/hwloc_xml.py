"""One pass over an hwloc v2 XML document: what :func:`topobind.topo.topology.parse_xml` builds a
topology from, read with pyexpat's handlers.

Not ``xml.etree``: importing it and building the element tree of a 384-PU node costs about
as much as hwloc's whole ``hwloc-distrib`` on the same file (``make bench-plan``). Only what
topobind reads is kept: the attributes of each object (a dict, as pyexpat gives them), what
is above it (package, core and caches above each PU; the nearest non-I/O object and PCI
device above each OS device), the ``info`` pairs of the machine, OS devices and CPU kinds,
and the text of NUMA distance matrices.
"""

from __future__ import annotations

import pyexpat
from collections.abc import Callable
from typing import Any

from topobind.errors import TopologyError
from topobind.topo.bitmap import MAX_OS_INDEX

#: An element's attributes, as pyexpat gives them.
Attrs = dict[str, str]

_CACHE_LEVEL = {"L1Cache": 1, "L2Cache": 2, "L3Cache": 3, "L4Cache": 4, "L5Cache": 5}
#: hwloc's I/O object types: a device's locality is its nearest object of another type.
IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev", "Misc", "MemCache"})


class OsDevice:
    """An OS device (``<object type="OSDev">``): its attributes and ``info`` pairs, its nearest
    non-I/O ancestor (``anchor``: where its locality comes from) and its PCI device."""

    __slots__ = ("attrs", "infos", "anchor", "pcidev", "bridge")

    def __init__(
        self, attrs: Attrs, anchor: Attrs, pcidev: Attrs | None, bridge: Attrs | None = None
    ) -> None:
        self.attrs = attrs
        self.infos: dict[str, str] = {}
        self.anchor = anchor
        self.pcidev = pcidev
        self.bridge = bridge  # the nearest Bridge object above it (None: none)


class Pu:
    """A PU and what is above it. ``core_key``: serial number of its Core object (of the PU
    itself when it has none); ``core``: that Core's attributes; ``pkg``: serial number of its
    package; ``caches``: cache level -> serial number of the unified or data cache above."""

    __slots__ = ("os_index", "core_key", "core", "pkg", "caches")

    def __init__(
        self,
        os_index: int,
        core_key: int,
        core: Attrs | None,
        pkg: int | None,
        caches: dict[int, int],
    ) -> None:
        self.os_index = os_index
        self.core_key = core_key
        self.core = core
        self.pkg = pkg
        self.caches = caches


class Distances:
    """A ``<distances2>`` element: its attributes, the words of its first ``<indexes>`` (None
    without one) and of all its ``<u64values>``."""

    __slots__ = ("attrs", "indexes", "values")

    def __init__(self, attrs: Attrs) -> None:
        self.attrs = attrs
        self.indexes: list[str] | None = None
        self.values: list[str] = []


class HwlocXml:
    """What one pass over the document collects, objects in document order (hwloc's logical
    order). Packages and caches are keyed by the serial number of their object."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.machine: Attrs | None = None  # the root object
        self.machine_infos: dict[str, str] = {}
        self.pus: list[Pu] = []
        self.numa: list[Attrs] = []
        self.caches: dict[int, Attrs] = {}
        self.packages: dict[int, Attrs] = {}
        self.has_core = False
        self.osdevs: list[OsDevice] = []
        self.pcidevs: list[OsDevice] = []  # PCI devices (``pcidev``: the object itself)
        self.cpukinds: list[tuple[Attrs, dict[str, str]]] = []
        self.distances: list[Distances] = []
        self.last_top = ""  # the name of the last child of <topology> started


# An open object is a list, copied from its parent's (what its children inherit):
# [serial of the package above, serial of the core above, that core's attributes,
#  {cache level: serial of the cache above}, nearest non-I/O object (for the children),
#  nearest PCI device, where the object's <info> pairs go (None: dropped), nearest bridge]
_ROOT_FRAME: list[Any] = [None, 0, None, {}, None, None, None, None]


def _handlers(
    doc: HwlocXml, parser: pyexpat.XMLParserType, max_pus: int, max_depth: int, fix: str
) -> tuple[Callable[[str, Attrs], None], Callable[[str], None]]:
    """pyexpat's start and end handlers filling ``doc`` (closures over local lists: this
    runs for every element of the file)."""
    frames: list[list[Any]] = []  # the open objects
    is_object: list[bool] = []  # every open element: is it an object of the tree?
    serial = 0
    source = doc.source
    pu_indexes: set[int] = set()  # a duplicate index would give two ranks one CPU

    def start(name: str, attrs: Attrs) -> None:
        nonlocal serial
        depth = len(is_object)
        in_object = depth > 0 and is_object[-1]
        if name != "object" or not (depth == 1 or in_object):
            is_object.append(False)
            _other(doc, parser, name, attrs, depth, frames[-1] if in_object else None)
            return
        if len(frames) >= max_depth:
            raise TopologyError(
                f"{source}: hwloc XML objects nest deeper than {max_depth} levels; {fix}"
            )
        is_object.append(True)
        serial += 1
        typ = attrs.get("type", "")
        frame = frames[-1].copy() if frames else _ROOT_FRAME.copy()
        frame[6] = None
        if typ == "PU":
            if len(doc.pus) >= max_pus:
                raise TopologyError(
                    f"{source}: more than {max_pus} PUs, more than any Linux node has; {fix}"
                )
            os_index = int_attr(attrs, "os_index", source, fix, hi=MAX_OS_INDEX)
            if os_index in pu_indexes:
                raise TopologyError(f"{source}: two PU objects have os_index={os_index}; {fix}")
            pu_indexes.add(os_index)
            core_key = frame[1] if frame[2] is not None else serial
            doc.pus.append(Pu(os_index, core_key, frame[2], frame[0], frame[3]))
        elif typ == "Package":
            frame[0] = serial
            doc.packages[serial] = attrs
        elif typ == "Core":
            frame[1], frame[2], doc.has_core = serial, attrs, True
        elif typ in _CACHE_LEVEL and attrs.get("cache_type", "0") in ("0", "1"):
            frame[3] = {**frame[3], _CACHE_LEVEL[typ]: serial}
            doc.caches[serial] = attrs
        elif typ == "NUMANode":
            doc.numa.append(attrs)
        elif typ == "OSDev" and frame[4] is not None:
            device = OsDevice(attrs, frame[4], frame[5], frame[7])
            doc.osdevs.append(device)
            frame[6] = device.infos
        elif typ == "PCIDev" and frame[4] is not None:
            device = OsDevice(attrs, frame[4], attrs, frame[7])
            doc.pcidevs.append(device)
            frame[6] = device.infos
        if doc.machine is None:
            doc.machine, frame[6] = attrs, doc.machine_infos
        if typ not in IO_TYPES:
            frame[4] = attrs
        elif typ == "PCIDev":
            frame[5] = attrs
        elif typ == "Bridge":
            frame[7] = attrs
        frames.append(frame)

    def end(_name: str) -> None:
        if is_object.pop():
            frames.pop()
        elif parser.CharacterDataHandler is not None:  # the end of <indexes>, <u64values>
            parser.CharacterDataHandler = None

    return start, end


def _other(
    doc: HwlocXml,
    parser: pyexpat.XMLParserType,
    name: str,
    attrs: Attrs,
    depth: int,
    frame: list[Any] | None,
) -> None:
    """An element that is not an object of the tree, at ``depth`` (0: the root), in the
    object ``frame`` (None: elsewhere)."""
    if depth == 0:
        if name != "topology":
            raise TopologyError(f"{doc.source}: not an hwloc XML topology (root element <{name}>)")
    elif name == "info":
        infos = frame[6] if frame is not None else None
        if infos is None and depth == 2 and doc.last_top == "cpukind":
            infos = doc.cpukinds[-1][1]
        if infos is not None:
            infos[attrs.get("name", "")] = attrs.get("value", "")
    elif depth == 1:
        doc.last_top = name
        if name == "cpukind":
            doc.cpukinds.append((attrs, {}))
        elif name == "distances2":
            doc.distances.append(Distances(attrs))
    elif depth == 2 and doc.last_top == "distances2":
        _distance_text(doc, parser, name)


def _distance_text(doc: HwlocXml, parser: pyexpat.XMLParserType, name: str) -> None:
    """Keep the text of a ``<distances2>``'s first ``<indexes>`` and of its ``<u64values>``
    (the handler is set for these elements only: no call for the blanks between tags)."""
    matrix = doc.distances[-1]
    text: list[str] | None = None
    if name == "indexes" and matrix.indexes is None:
        matrix.indexes = text = []
    elif name == "u64values":
        matrix.values.append(" ")  # each element's words apart from the next one's
        text = matrix.values
    if text is not None:
        parser.CharacterDataHandler = text.append


def read(text: str, source: str, max_pus: int, max_depth: int, fix: str) -> HwlocXml:
    """Read an hwloc XML document; :class:`TopologyError` when it is not one."""
    doc = HwlocXml(source)
    parser = pyexpat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler, parser.EndElementHandler = _handlers(
        doc, parser, max_pus, max_depth, fix
    )
    try:
        parser.Parse(text, True)
    except pyexpat.ExpatError as exc:
        raise TopologyError(f"{source}: malformed hwloc XML ({exc})") from exc
    if doc.machine is None:
        raise TopologyError(f"{source}: hwloc XML has no root object")
    return doc


def int_attr(
    attrs: Attrs, name: str, source: str, fix: str, default: int = -1, hi: int = 1 << 62
) -> int:
    """An integer attribute of an hwloc XML object (``default`` when absent). A value that
    is not a whole number (``os_index="abc"``, ``"²"``, 30 digits) is a broken file."""
    value = attrs.get(name)
    if value is None:
        return default
    number = int(value) if value.isdigit() and value.isascii() and len(value) <= 20 else -1
    if not 0 <= number <= hi:
        raise TopologyError(
            f"{source}: {attrs.get('type', 'object')} object has {name}={value[:40]!r}, not a "
            f"whole number from 0 to {hi}; {fix}"
        )
    return number
