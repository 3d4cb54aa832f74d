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

import re

from topobind.record import record

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    from topobind.hwloc_xml import Attrs, OsDevice

#: PCI vendor id -> (vendor name, the variable that selects the devices a process sees)
GPU_VENDORS: dict[str, tuple[str, str]] = {
    "1002": ("AMD", "ROCR_VISIBLE_DEVICES"),
    "10de": ("NVIDIA", "CUDA_VISIBLE_DEVICES"),
    "8086": ("Intel", "ZE_AFFINITY_MASK"),
}
#: GPU OS device names: the runtime (hwloc backend) and its device number
_GPU_NAME = r"^(rsmi|nvml|cuda|ze)(\d+)$|^opencl\d+d(\d+)$"  # patterns: compiled on first use
_GPU_SUBTYPES = ("rsmi", "nvml", "cuda", "opencl", "levelzero", "ze")
_NATIVE = {"1002": ("rsmi",), "10de": ("cuda", "nvml"), "8086": ("ze",)}
#: DRM devices of a compute-GPU PCI class (3D controller, other display controller)
_DRM_NAME = r"^(card|renderD)\d+$"
_GPU_CLASSES = ("0302", "0380")
#: NIC OS device names -> kind, most specific kind first
_NIC_KINDS: tuple[tuple[str, str], ...] = (
    ("openfabrics", r"^(mlx\d+_\d+|hfi1_\d+)$"),
    ("slingshot", r"^(cxi\d+|hsn\d+|hsi\d+)$"),
    ("bxi", r"^bxi\d*$"),
)
_NIC_CLASSES = ("0200", "0207", "0280", "0c06")  # Ethernet, InfiniBand, other network, IB (old)


@record
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


@record
class Nic:
    os: str  # preferred name: the OpenFabrics device (mlx5_0) over its IP interface (ib0)
    names: tuple[str, ...]
    kind: str  # openfabrics | slingshot | bxi
    pci: str | None
    vendor: str | None
    pus: tuple[int, ...]
    numa: tuple[int, ...]
    near: str


@record
class Devices:
    gpus: tuple[Gpu, ...] = ()
    nics: tuple[Nic, ...] = ()


@record(frozen=False)
class _OsDev:
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
    m = re.match(r"\s*([0-9a-fA-F]{4})\s*\[([0-9a-fA-F]{4}):", pcidev.get("pci_type", ""))
    cls, vendor = (m.group(1).lower(), m.group(2).lower()) if m else (None, None)
    return pcidev.get("pci_busid"), cls, vendor


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
    if re.match(_GPU_NAME, d.name) or d.subtype.startswith(_GPU_SUBTYPES):
        return True
    drm = re.match(_DRM_NAME, d.name)
    return bool(drm and d.pci_class in _GPU_CLASSES and d.vendor in GPU_VENDORS)


def _nic_kind(d: _OsDev) -> str | None:
    for kind, pattern in _NIC_KINDS:
        if re.match(pattern, d.name) and (d.pci_class is None or d.pci_class in _NIC_CLASSES):
            return kind
    return None


def _native_index(vendor: str | None, names: list[str]) -> tuple[str, int] | None:
    """(name, number) of the vendor's own runtime device among ``names``."""
    for prefix in _NATIVE.get(vendor or "", ()):
        for name in names:
            m = re.match(_GPU_NAME, name)
            if m and m.group(1) == prefix:
                return name, int(m.group(2))
    return None


class _Locality:
    """Turns an anchor element into (usable PUs, NUMA nodes)."""

    def __init__(self, usable: set[int], numa: set[int]) -> None:
        from topobind.bitmap import parse_hwloc_bitmap

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
        runtime = re.match(_GPU_NAME, name).group(1) if native is not None else None  # type: ignore[union-attr]
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


def devices_of(found: list[OsDevice], usable: set[int], numa: set[int]) -> Devices:
    """The GPUs and NICs among the OS devices an XML pass ``found``
    (:mod:`topobind.hwloc_xml`), their locality cut to the ``usable`` PUs and the ``numa``
    nodes of the topology."""
    devs = [_osdev(device) for device in found]
    if not devs:
        return Devices()
    loc = _Locality(usable, numa)
    return Devices(gpus=tuple(_gpus(devs, loc)), nics=tuple(_nics(devs, loc)))
