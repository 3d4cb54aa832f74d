"""GPUs and NICs of a node, from hwloc's OS devices (live lstopo output or an XML file).

hwloc attaches I/O objects (bridges, PCI devices, OS devices) below ordinary objects; the
cpuset of the nearest non-I/O ancestor is the device's locality. One physical GPU appears as
several OS devices (``cuda0``, ``nvml0``, ``opencl0d0``; ``rsmi0``; ``ze0``), one NIC as
several too (``mlx5_0`` and its IP interface ``ib0``/``hsi0``), so devices are grouped by PCI
bus id. Devices are recognised by name, subtype and PCI class, never by the numeric
``osdev_type`` (it differs between hwloc versions and between XMLs of one version).

Runtime index of a GPU (what ``CUDA_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES`` and
``ZE_AFFINITY_MASK`` number): the number of the vendor's own runtime device (``cudaN`` or
``nvmlN`` for NVIDIA, ``rsmiN`` for AMD, ``zeN`` for Intel); a GPU seen only through OpenCL
or DRM (``card0``) gets its position among the vendor's GPUs in PCI order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from topobind.topo.bitmap import parse_hwloc_bitmap
from topobind.topo.hwloc_xml import Attrs, OsDevice

#: PCI vendor id -> (vendor name, the variable that selects the devices a process sees)
GPU_VENDORS: dict[str, tuple[str, str]] = {
    "1002": ("AMD", "ROCR_VISIBLE_DEVICES"),
    "10de": ("NVIDIA", "CUDA_VISIBLE_DEVICES"),
    "8086": ("Intel", "ZE_AFFINITY_MASK"),
}
#: GPU OS device names: the runtime (hwloc backend) and its device number (see _gpu_name)
_GPU_RUNTIMES = ("rsmi", "nvml", "cuda", "ze")
_GPU_SUBTYPES = ("rsmi", "nvml", "cuda", "opencl", "levelzero", "ze")
_NATIVE = {"1002": ("rsmi",), "10de": ("cuda", "nvml"), "8086": ("ze",)}
#: DRM devices (cardN, renderDN) of a compute-GPU PCI class (3D controller, other display)
_DRM_PREFIXES = ("card", "renderD")
_GPU_CLASSES = ("0302", "0380")


def _numbered(name: str, prefix: str) -> int | None:
    """N when ``name`` is ``prefix`` followed by decimal digits N only, else None."""
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdecimal() else None


def _gpu_name(name: str) -> tuple[str | None, int] | None:
    """(runtime, number) of a GPU OS device: ``cudaN``, ``nvmlN``, ``rsmiN``, ``zeN`` ->
    (runtime, N); ``openclPdN`` -> (None, N); None for other names."""
    for runtime in _GPU_RUNTIMES:
        number = _numbered(name, runtime)
        if number is not None:
            return runtime, number
    platform, d, device = name.removeprefix("opencl").partition("d")
    if name.startswith("opencl") and d and platform.isdecimal() and device.isdecimal():
        return None, int(device)
    return None


def _openfabrics(name: str) -> bool:  # mlxN_M, hfi1_N
    board, underscore, port = name.removeprefix("mlx").partition("_")
    if name.startswith("mlx") and underscore:
        return board.isdecimal() and port.isdecimal()
    return _numbered(name, "hfi1_") is not None


def _slingshot(name: str) -> bool:  # cxiN, hsnN, hsiN
    return any(_numbered(name, prefix) is not None for prefix in ("cxi", "hsn", "hsi"))


def _bxi(name: str) -> bool:  # bxi, bxiN
    return name == "bxi" or _numbered(name, "bxi") is not None


#: NIC OS device names -> kind, most specific kind first
_NIC_KINDS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("openfabrics", _openfabrics),
    ("slingshot", _slingshot),
    ("bxi", _bxi),
)
_NIC_CLASSES = ("0200", "0207", "0280", "0c06")  # Ethernet, InfiniBand, other network, IB (old)


@dataclass(frozen=True)
class Gpu:
    """One physical GPU. ``pus``/``numa``: its locality (usable OS PU indexes, NUMA OS
    indexes); ``near``: the hwloc type of the object that locality comes from."""

    os: str  # the preferred OS device name (rsmi0, cuda0, ze0, ...)
    names: tuple[str, ...]  # every OS device name of this GPU
    index: int  # the runtime's device number (CUDA/ROCR/ZE)
    pci: str | None
    vendor: str | None  # PCI vendor id, e.g. "1002"
    model: str | None
    pus: tuple[int, ...]
    numa: tuple[int, ...]
    near: str
    runtime: str | None = None  # where ``index`` comes from: rsmi/cuda/nvml/ze; None: PCI order

    @property
    def variable(self) -> str | None:
        """The visible-devices variable of this GPU's vendor (None: unknown vendor)."""
        return GPU_VENDORS[self.vendor][1] if self.vendor in GPU_VENDORS else None


class Nic(NamedTuple):
    os: str  # preferred name: the OpenFabrics device (mlx5_0) over its IP interface (ib0)
    names: tuple[str, ...]
    kind: str  # openfabrics | slingshot | bxi
    pci: str | None
    vendor: str | None
    pus: tuple[int, ...]
    numa: tuple[int, ...]
    near: str


class Devices(NamedTuple):
    gpus: tuple[Gpu, ...] = ()
    nics: tuple[Nic, ...] = ()


class _OsDev(NamedTuple):
    name: str
    subtype: str
    pci: str | None
    pci_class: str | None
    vendor: str | None
    model: str | None
    anchor: Attrs  # nearest non-I/O ancestor


def _pci_ids(pcidev: Attrs | None) -> tuple[str | None, str | None, str | None]:
    """(bus id, class, vendor) of a PCIDev element (``pci_type="0380 [1002:7408] ..."``)."""
    if pcidev is None:
        return None, None, None
    cls, vendor = _pci_type(pcidev.get("pci_type", ""))
    return pcidev.get("pci_busid"), cls, vendor


def _pci_type(text: str) -> tuple[str | None, str | None]:
    """(class, vendor), lower case, from the start of ``CCCC [VVVV:DDDD] ...``."""
    text = text.lstrip()
    cls, rest = text[:4], text[4:].lstrip()
    vendor = rest[1:5]
    if _hex4(cls) and rest[:1] == "[" and _hex4(vendor) and rest[5:6] == ":":
        return cls.lower(), vendor.lower()
    return None, None


def _hex4(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def _osdev(device: OsDevice) -> _OsDev:
    busid, cls, vendor = _pci_ids(device.pcidev)
    attrs, infos = device.attrs, device.infos
    return _OsDev(
        name=attrs.get("name", ""),
        subtype=(attrs.get("subtype") or infos.get("Backend") or "").lower(),
        pci=busid,
        pci_class=cls,
        vendor=vendor,
        model=infos.get("GPUModel") or infos.get("CoProcType"),
        anchor=device.anchor,
    )


def _is_gpu(d: _OsDev) -> bool:
    if _gpu_name(d.name) is not None or d.subtype.startswith(_GPU_SUBTYPES):
        return True
    drm = any(_numbered(d.name, prefix) is not None for prefix in _DRM_PREFIXES)
    return drm and d.pci_class in _GPU_CLASSES and d.vendor in GPU_VENDORS


def _nic_kind(d: _OsDev) -> str | None:
    for kind, matches in _NIC_KINDS:
        if matches(d.name) and (d.pci_class is None or d.pci_class in _NIC_CLASSES):
            return kind
    return None


def _native_index(vendor: str | None, names: list[str]) -> tuple[str, int] | None:
    """(name, number) of the vendor's own runtime device among ``names``."""
    for prefix in _NATIVE.get(vendor or "", ()):
        for name in names:
            gpu = _gpu_name(name)
            if gpu is not None and gpu[0] == prefix:
                return name, gpu[1]
    return None


class _Locality:
    """Turns an anchor element into (usable PUs, NUMA nodes)."""

    def __init__(self, usable: set[int], numa: set[int]) -> None:
        self.parse = parse_hwloc_bitmap
        self.usable = usable
        self.numa = numa

    def of(self, anchor: Attrs) -> tuple[tuple[int, ...], tuple[int, ...]]:
        pus = self.parse(anchor.get("cpuset", "")) & self.usable
        nodes = self.parse(anchor.get("nodeset", "")) & self.numa
        return tuple(sorted(pus)), tuple(sorted(nodes))


def _groups(devs: list[_OsDev]) -> list[list[_OsDev]]:
    """OS devices grouped by PCI bus id (devices without one stay alone), first-seen order."""
    groups: dict[str, list[_OsDev]] = {}
    for d in devs:
        groups.setdefault(d.pci or f"name:{d.name}", []).append(d)
    return list(groups.values())


def _gpus(devs: list[_OsDev], loc: _Locality) -> list[Gpu]:
    groups = sorted(_groups([d for d in devs if _is_gpu(d)]), key=lambda g: g[0].pci or "")
    out: list[Gpu] = []
    ordinal: dict[str | None, int] = {}
    for group in groups:
        first = group[0]
        names = [d.name for d in group]
        native = _native_index(first.vendor, names)
        position = ordinal.get(first.vendor, 0)
        ordinal[first.vendor] = position + 1
        name, index = native if native is not None else (names[0], position)
        runtime = _gpu_name(name)[0] if native is not None else None  # type: ignore[index]
        pus, numa = loc.of(first.anchor)
        out.append(
            Gpu(
                os=name,
                names=tuple(names),
                index=index,
                pci=first.pci,
                vendor=first.vendor,
                model=next((d.model for d in group if d.model), None),
                pus=pus,
                numa=numa,
                near=first.anchor.get("type", "?"),
                runtime=runtime,
            )
        )
    out.sort(key=lambda g: (g.vendor or "", g.index, g.pci or ""))
    return out


def _nics(devs: list[_OsDev], loc: _Locality) -> list[Nic]:
    kinds = {d.name: _nic_kind(d) for d in devs}
    out: list[Nic] = []
    for group in _groups([d for d in devs if kinds[d.name]]):
        rank = [k for k, _ in _NIC_KINDS]
        best = min(group, key=lambda d: rank.index(kinds[d.name] or ""))
        if best.name.startswith(("hsn", "hsi")):  # Slingshot: the cxi device when present
            best = next((d for d in group if d.name.startswith("cxi")), best)
        pus, numa = loc.of(best.anchor)
        out.append(
            Nic(
                os=best.name,
                names=tuple(d.name for d in group),
                kind=kinds[best.name] or "",
                pci=best.pci,
                vendor=best.vendor,
                pus=pus,
                numa=numa,
                near=best.anchor.get("type", "?"),
            )
        )
    out.sort(key=lambda n: (n.pci or "", n.os))
    return out


def devices_of(
    found: list[OsDevice], usable: set[int], numa: set[int], source: str = "hwloc XML"
) -> Devices:
    """The GPUs and NICs among the OS devices an XML pass ``found``
    (:mod:`topobind.topo.hwloc_xml`), their locality cut to the ``usable`` PUs and the ``numa``
    nodes of the topology. A GPU that cannot be told apart from another (no PCI device above
    it, an OS device name or runtime index twice) is a :class:`TopologyError` naming
    ``source``."""
    devs = [_osdev(device) for device in found]
    if not devs:
        return Devices()
    loc = _Locality(usable, numa)
    gpus = _gpus(devs, loc)
    _check_gpus(
        [(d, id(f.pcidev)) for d, f in zip(devs, found, strict=True) if _is_gpu(d)], gpus, source
    )
    return Devices(gpus=tuple(gpus), nics=tuple(_nics(devs, loc)))


def _check_gpus(devs: list[tuple[_OsDev, int]], gpus: list[Gpu], source: str) -> None:
    """Each GPU OS device under a PCI device (``devs``: with the identity of that PCIDev
    element) whose bus id no other GPU's PCI device has, each name once, each runtime index
    once per vendor: otherwise GPUs vanish, multiply or two ranks get one device."""
    from topobind.errors import TopologyError

    fix = "give the node's own XML (lstopo-no-graphics --of xml > node.xml on the node)"
    names: set[str] = set()
    owners: dict[str, int] = {}  # bus id -> its PCIDev element
    for d, pcidev in devs:
        if d.pci is not None and owners.setdefault(d.pci, pcidev) != pcidev:
            raise TopologyError(
                f"{source}: two PCIDev objects holding GPUs have pci_busid={d.pci[:40]!r}; {fix}"
            )
        if d.pci is None:
            raise TopologyError(
                f"{source}: GPU OS device {d.name[:40]!r} has no PCIDev object with a "
                f"pci_busid above it (its OS devices cannot be told apart from other GPUs'); {fix}"
            )
        if d.name in names:
            raise TopologyError(f"{source}: two OS devices are named {d.name[:40]!r}; {fix}")
        names.add(d.name)
    indexes: dict[tuple[str | None, int], Gpu] = {}
    for g in gpus:
        other = indexes.setdefault((g.vendor, g.index), g)
        if other is not g:
            raise TopologyError(
                f"{source}: GPUs {other.os!r} (PCI {other.pci}) and {g.os!r} (PCI {g.pci}) "
                f"have one device index {g.index}; {fix}"
            )
