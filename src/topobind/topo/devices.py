"""GPUs and NICs of a node, from hwloc's PCI and OS devices (live lstopo output or an XML
file).

hwloc attaches I/O objects (bridges, PCI devices, OS devices) below ordinary objects; the
cpuset of the nearest non-I/O ancestor is the device's locality. GPUs come from the PCI
devices, whatever GPU plugins hwloc had (:mod:`topobind.topo.gpus`; on a live node also
sysfs, procfs and NVML: :mod:`topobind.topo.gpu_live`). One NIC appears as several OS
devices (``mlx5_0`` and its IP interface ``ib0``/``hsi0``), so NICs are grouped by PCI bus
id. Devices are recognised by name, subtype and PCI class, never by the numeric
``osdev_type`` (it differs between hwloc versions and between XMLs of one version).
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple

from topobind.topo.bitmap import parse_hwloc_bitmap
from topobind.topo.gpus import GPU_VENDORS, Gpu, inventory, pci_type
from topobind.topo.hwloc_xml import Attrs, OsDevice

__all__ = ["GPU_VENDORS", "Devices", "Gpu", "Nic", "devices_of"]


def _numbered(name: str, prefix: str) -> int | None:
    """N when ``name`` is ``prefix`` followed by decimal digits N only, else None."""
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdecimal() and len(rest) <= 9 else None


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
    #: what was left out or guessed (odd OS devices, malformed bus ids): one line each
    notes: tuple[str, ...] = ()
    #: why the GPUs cannot be told apart (one bus id twice, one index twice): the per-gpu
    #: layout refuses with it; every other command goes on (``gpus`` is then empty)
    refusal: str | None = None


class _OsDev(NamedTuple):
    name: str
    pci: str | None
    pci_class: str | None
    vendor: str | None
    anchor: Attrs  # nearest non-I/O ancestor


def _osdev(device: OsDevice) -> _OsDev:
    pcidev = device.pcidev
    cls, vendor = pci_type(pcidev.get("pci_type", "")) if pcidev is not None else (None, None)
    busid = pcidev.get("pci_busid") if pcidev is not None else None
    return _OsDev(device.attrs.get("name", ""), busid, cls, vendor, device.anchor)


def _nic_kind(d: _OsDev) -> str | None:
    for kind, matches in _NIC_KINDS:
        if matches(d.name) and (d.pci_class is None or d.pci_class in _NIC_CLASSES):
            return kind
    return None


class _Locality:
    """Turns an anchor element into (usable PUs, NUMA nodes)."""

    def __init__(self, usable: set[int], numa: set[int]) -> None:
        self.parse = parse_hwloc_bitmap
        self.usable = usable
        self.numa = numa

    def __call__(self, anchor: Attrs) -> tuple[tuple[int, ...], tuple[int, ...]]:
        pus = self.parse(anchor.get("cpuset", "")) & self.usable
        nodes = self.parse(anchor.get("nodeset", "")) & self.numa
        return tuple(sorted(pus)), tuple(sorted(nodes))


def _groups(devs: list[_OsDev]) -> list[list[_OsDev]]:
    """OS devices grouped by PCI bus id (devices without one stay alone), first-seen order."""
    groups: dict[str, list[_OsDev]] = {}
    for d in devs:
        groups.setdefault(d.pci or f"name:{d.name}", []).append(d)
    return list(groups.values())


def _nics(devs: list[_OsDev], loc: _Locality) -> list[Nic]:
    kinds = {d.name: _nic_kind(d) for d in devs}
    out: list[Nic] = []
    for group in _groups([d for d in devs if kinds[d.name]]):
        rank = [k for k, _ in _NIC_KINDS]
        best = min(group, key=lambda d: rank.index(kinds[d.name] or ""))
        if best.name.startswith(("hsn", "hsi")):  # Slingshot: the cxi device when present
            best = next((d for d in group if d.name.startswith("cxi")), best)
        pus, numa = loc(best.anchor)
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
    found: list[OsDevice],
    usable: set[int],
    numa: set[int],
    source: str = "hwloc XML",
    pcidevs: Sequence[OsDevice] = (),
) -> Devices:
    """The GPUs (from the PCI devices ``pcidevs`` and the OS devices ``found`` of an XML pass,
    :mod:`topobind.topo.hwloc_xml`) and NICs, their locality cut to the ``usable`` PUs and
    the ``numa`` nodes of the topology. Never an error: odd devices are notes, GPUs that
    cannot be told apart are :attr:`Devices.refusal` (for the per-gpu layout)."""
    loc = _Locality(usable, numa)
    if not pcidevs:  # an XML pass gives them; a hand-made list of OS devices: their parents
        pcidevs = _parents(found)
    gpus = inventory(found, pcidevs, loc, source)
    nics = _nics([_osdev(device) for device in found], loc) if found else []
    return Devices(tuple(gpus.gpus), tuple(nics), gpus.notes, gpus.refusal)


def _parents(found: list[OsDevice]) -> list[OsDevice]:
    seen: dict[int, OsDevice] = {}
    for d in found:
        if d.pcidev is not None and id(d.pcidev) not in seen:
            seen[id(d.pcidev)] = OsDevice(d.pcidev, d.anchor, d.pcidev, d.bridge)
    return list(seen.values())
