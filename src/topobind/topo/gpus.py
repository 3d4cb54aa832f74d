"""The GPUs of a node from hwloc's PCI objects, whatever GPU plugins hwloc had.

A GPU is a PCI function of class 0302 (3D controller) or 0380 (other display) from NVIDIA,
AMD or Intel, or of class 0300 (VGA) when a GPU driver is bound to it (hwloc: a GPU or DRM
OS device under it; sysfs: the driver's name). BMC display adapters (ASPEED, Matrox...) are
never GPUs: their vendors are not GPU vendors. GPUs are keyed and ordered by their full bus
id, domain included. hwloc's GPU OS devices (``nvmlN``, ``cudaN``, ``rsmiN``, ``zeN``,
``openclPdN``, DRM ``cardN``/``renderDN``) add names, a model, a UUID and the runtime index;
they are not required.

Runtime index (what ``CUDA_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES`` and
``ZE_AFFINITY_MASK`` number): ``nvmlN`` for NVIDIA (NVML numbers in PCI bus order, as CUDA
does under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, which plans export), ``rsmiN`` for AMD, ``zeN``
for Intel; otherwise the GPU's position among the vendor's GPUs in bus order. ``cudaN`` and
``openclPdN`` never decide an index: their numbers shift with ``*_VISIBLE_DEVICES`` and
CUDA's default fastest-first order.

Odd devices are notes, never errors here: an OS device outside any PCI device is matched to
the one GPU of its vendor under the same bridge (hwloc's OpenCL backend puts a device whose
bus id it cannot read at the locality of its bus), else left out; a CPU OpenCL device (pocl,
Intel's CPU runtime) is no GPU; an OS device of another vendor's runtime than its PCI
device's (``cuda0`` under an Intel controller) leaves that GPU out; a malformed bus id or an
OS device numbered with more than 4 digits is left out. What makes GPUs impossible to tell
apart (two PCI GPUs with one bus id, one OS device name or one runtime index twice) is
:attr:`Inventory.refusal`: the per-gpu layout refuses with it, nothing else does.
"""

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from topobind.topo.hwloc_xml import Attrs, OsDevice

#: PCI vendor id -> (vendor name, the variable that selects the devices a process sees)
GPU_VENDORS: dict[str, tuple[str, str]] = {
    "1002": ("AMD", "ROCR_VISIBLE_DEVICES"),
    "10de": ("NVIDIA", "CUDA_VISIBLE_DEVICES"),
    "8086": ("Intel", "ZE_AFFINITY_MASK"),
}
#: PCI classes of compute GPUs (3D controller, other display); VGA (0300) needs a driver
GPU_CLASSES = ("0302", "0380")
VGA_CLASS = "0300"
#: OS device name prefixes: the runtime they belong to -> the vendor it serves
_RUNTIME_VENDOR = {"nvml": "10de", "cuda": "10de", "rsmi": "1002", "ze": "8086"}
#: the runtime whose device number is the index, per vendor (cuda never: see the docstring)
_INDEX_RUNTIME = {"10de": "nvml", "1002": "rsmi", "8086": "ze"}
#: the OS device preferred as the GPU's name, best first
_NAME_ORDER = ("rsmi", "cuda", "nvml", "ze", "opencl", "card", "renderD")
_DRM_PREFIXES = ("card", "renderD")
MAX_NAME_DIGITS = 4  # cuda12345678901234567890 is no device number
_BUSID = re.compile(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
#: words of an OpenCL platform or vendor name -> PCI vendor
_VENDOR_WORDS = (("nvidia", "10de"), ("amd", "1002"), ("advanced micro", "1002"),
                 ("intel", "8086"))  # fmt: skip
#: where an OS device's data come from, for ``Gpu.sources``
_PLUGIN = {"nvml": "hwloc nvml", "cuda": "hwloc cuda", "rsmi": "hwloc rsmi", "ze": "hwloc ze",
           "opencl": "hwloc opencl", "card": "hwloc DRM", "renderD": "hwloc DRM"}  # fmt: skip
#: the plugins whose devices carry a UUID and a runtime index
RUNTIME_PLUGINS = frozenset({"hwloc nvml", "hwloc rsmi", "hwloc ze", "hwloc cuda"})


#: an anchor (the nearest non-I/O object) -> (usable PUs, NUMA nodes)
Locality = Callable[[Attrs], tuple[tuple[int, ...], tuple[int, ...]]]


def bus_id(text: str | None) -> str | None:
    """A PCI bus id as ``DDDD:BB:DD.F`` in lower case, the domain with at least 4 digits (NVML
    writes 8: ``00000000:06:00.0``), else None."""
    if text is None or len(text) > 20:
        return None
    m = _BUSID.fullmatch(text.strip())
    if m is None:
        return None
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{bus}:{dev}.{fn}".lower()


def bus_key(pci: str | None) -> tuple[int, ...]:
    """Sort key of a bus id: domain, bus, device, function as numbers (no bus id: last)."""
    if pci is None:
        return (1 << 40,)
    m = _BUSID.fullmatch(pci)
    return tuple(int(x, 16) for x in m.groups()) if m else (1 << 40,)


def shown(text: str, limit: int = 80) -> str:
    """``text`` from a device, a driver or a file as printable ASCII for a terminal: other
    characters as escapes (``\\x1b``), cut to ``limit`` characters with ``...``."""
    escaped = (c if " " <= c <= "~" else c.encode("unicode_escape").decode() for c in text)
    out = "".join(itertools.islice(escaped, limit + 1))
    return out if len(out) <= limit else out[: limit - 3] + "..."


def listed(items: Sequence[str], limit: int = 8) -> str:
    """``a, b, c`` of at most ``limit`` items, then ``and N more``."""
    head = ", ".join(items[:limit])
    return head if len(items) <= limit else f"{head} and {len(items) - limit} more"


def vendor_name(vendor: str | None) -> str:
    return GPU_VENDORS[vendor][0] if vendor in GPU_VENDORS else f"vendor {vendor or '?'}"


class Gpu(NamedTuple):
    """One physical GPU. ``pus``/``numa``: its locality (usable OS PU indexes, NUMA OS
    indexes; empty: unknown); ``near``: the hwloc type of the object that locality comes
    from (``sysfs`` for a GPU hwloc did not list). A changed copy: ``gpu._replace(...)``."""

    os: str  # the preferred name: an OS device (rsmi0, cuda0, ze0...) or vendor+index (nvidia0)
    names: tuple[str, ...]  # every OS device name of this GPU
    # the runtime's device number (CUDA in PCI bus order, ROCR, ZE); the field hides tuple.index
    index: int  # type: ignore[assignment]
    pci: str | None  # full bus id, lower case, domain included: 0000:c1:00.0
    vendor: str | None  # PCI vendor id, e.g. "1002"
    model: str | None
    pus: tuple[int, ...]
    numa: tuple[int, ...]
    near: str
    runtime: str | None = None  # where ``index`` comes from: rsmi/nvml/ze; None: bus order
    uuid: str | None = None  # GPU-..., from hwloc's nvml/rsmi/ze devices, procfs or NVML
    sources: tuple[str, ...] = ("hwloc PCI",)  # where it was found: hwloc PCI, hwloc nvml...
    mig: tuple[str, ...] = ()  # UUIDs of its MIG slices (MIG-...), when NVML lists them

    @property
    def variable(self) -> str | None:
        """The visible-devices variable of this GPU's vendor (None: unknown vendor)."""
        return GPU_VENDORS[self.vendor][1] if self.vendor in GPU_VENDORS else None

    @property
    def source(self) -> str:
        return ", ".join(self.sources)


class Inventory(NamedTuple):
    gpus: tuple[Gpu, ...] = ()
    notes: tuple[str, ...] = ()
    refusal: str | None = None


class _Dev(NamedTuple):
    """A GPU OS device: its name, family (nvml, cuda, rsmi, ze, opencl, card, renderD), the
    number in its name, the vendor its runtime serves (None: not known), UUID, model."""

    name: str
    family: str
    number: int
    vendor: str | None
    uuid: str | None
    model: str | None
    device: OsDevice


class _Pci:
    """A PCI function that may be a GPU, with the GPU OS devices found under (or for) it."""

    __slots__ = ("device", "bus", "cls", "vendor", "devs")

    def __init__(self, device: OsDevice, bus: str | None, cls: str | None, vendor: str | None):
        self.device, self.bus, self.cls, self.vendor = device, bus, cls, vendor
        self.devs: list[_Dev] = []

    @property
    def candidate(self) -> bool:
        return self.vendor in GPU_VENDORS and self.cls in (*GPU_CLASSES, VGA_CLASS)

    @property
    def is_gpu(self) -> bool:
        return self.candidate and (self.cls != VGA_CLASS or bool(self.devs))


def pci_type(text: str) -> tuple[str | None, str | None]:
    """(class, vendor), lower case, from the start of ``CCCC [VVVV:DDDD] ...``."""
    text = text.lstrip()
    cls, rest = text[:4], text[4:].lstrip()
    vendor = rest[1:5]
    if _hex4(cls) and rest[:1] == "[" and _hex4(vendor) and rest[5:6] == ":":
        return cls.lower(), vendor.lower()
    return None, None


def _hex4(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def family(name: str) -> tuple[str, str] | None:
    """(family, the digits of its device number) of a GPU OS device name: ``nvml3`` ->
    (nvml, 3), ``opencl1d0`` -> (opencl, 0), ``renderD128`` -> (renderD, 128); else None."""
    for prefix in ("rsmi", "nvml", "cuda", "ze", "card", "renderD"):
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest.isdecimal() and rest.isascii():
            return prefix, rest
    platform, d, device = name.removeprefix("opencl").partition("d")
    if name.startswith("opencl") and d and platform.isdecimal() and device.isdecimal():
        return ("opencl", device) if (platform + device).isascii() else None
    return None


def _vendor_of(fam: str, infos: dict[str, str]) -> str | None:
    if fam in _RUNTIME_VENDOR:
        return _RUNTIME_VENDOR[fam]
    words = " ".join(infos.get(k, "") for k in ("GPUVendor", "OpenCLPlatformName")).lower()
    return next((v for w, v in _VENDOR_WORDS if w in words), None)


def _cpu_opencl(infos: dict[str, str]) -> bool:
    """An OpenCL device that runs on the CPUs (pocl, Intel's CPU runtime): no GPU."""
    kind = infos.get("OpenCLDeviceType", "").strip().upper()
    platform = infos.get("OpenCLPlatformName", "").lower()
    return kind == "CPU" or (not kind and "portable computing language" in platform)


def _gpu_dev(device: OsDevice, notes: list[str]) -> _Dev | None:
    """The GPU OS device ``device`` is, None when it is none (or is left out, with a note)."""
    name = device.attrs.get("name", "")
    found = family(name)
    if found is None:
        return None
    fam, digits = found
    if len(digits) > MAX_NAME_DIGITS:
        notes.append(
            f"OS device {fam}{digits[:MAX_NAME_DIGITS]}...: a device number of more than "
            f"{MAX_NAME_DIGITS} digits is no GPU's; left out"
        )
        return None
    infos = device.infos
    if fam == "opencl" and _cpu_opencl(infos):
        return None
    uuid = next((v for k, v in infos.items() if k.endswith("UUID") and v), None)
    if uuid is not None and not (len(uuid) <= 64 and uuid.isascii() and uuid.isprintable()):
        notes.append(f"OS device {name}: UUID {shown(uuid, 40)!r} is not one: left out")
        uuid = None
    model = infos.get("GPUModel") or infos.get("CoProcType")
    model = shown(model, 80) if model else None
    return _Dev(name, fam, int(digits), _vendor_of(fam, infos), uuid, model, device)


def _pcis(pcidevs: Iterable[OsDevice], notes: list[str]) -> dict[int, _Pci]:
    """Every PCI function by the identity of its element; a GPU's malformed bus id: a note."""
    out: dict[int, _Pci] = {}
    for device in pcidevs:
        cls, vendor = pci_type(device.attrs.get("pci_type", ""))
        pci = _Pci(device, bus_id(device.attrs.get("pci_busid")), cls, vendor)
        if pci.bus is None and pci.candidate:
            notes.append(
                f"a PCI device of {vendor_name(vendor)} (class {cls}) has a malformed pci_busid "
                "(not DDDD:BB:DD.F): left out"
            )
        out[id(device.attrs)] = pci
    return out


def _attach(devs: list[_Dev], pcis: dict[int, _Pci], notes: list[str]) -> list[_Dev]:
    """Put each device on its PCI function; those outside any PCI device are returned."""
    outside = []
    for d in devs:
        pcidev = d.device.pcidev
        if pcidev is None:
            outside.append(d)
            continue
        pci = pcis.get(id(pcidev))
        if pci is None or pci.bus is None:
            continue  # its PCI device was noted (or is no GPU's)
        if pci.candidate:
            pci.devs.append(d)
        elif d.family not in _DRM_PREFIXES:
            notes.append(
                f"OS device {d.name} is under PCI {pci.bus}, a {vendor_name(pci.vendor)} device "
                f"of class {pci.cls or '?'}, not a GPU: left out"
            )
    return outside


def _match_outside(outside: list[_Dev], gpus: list[_Pci], notes: list[str]) -> None:
    """hwloc's OpenCL backend puts a device whose bus id it cannot read at its bus (beside its
    PCI device, under the bridge): the one GPU of its vendor under that bridge is its."""
    for d in outside:
        bridge = d.device.bridge
        near = [
            p
            for p in gpus
            if bridge is not None
            and p.device.bridge is bridge
            and (d.vendor is None or p.vendor == d.vendor)
        ]
        if len(near) == 1:
            near[0].devs.append(d)
            notes.append(
                f"OS device {d.name} is outside its PCI device: taken as GPU {near[0].bus}"
            )
            continue
        what = vendor_name(d.vendor) + " GPU" if d.vendor else "GPU"
        why = f"{len(near)} {what}s share its bridge" if near else f"no {what} under its bridge"
        notes.append(f"OS device {d.name} is outside any PCI device and {why}: left out")


def _foreign(pci: _Pci, notes: list[str]) -> bool:
    """A GPU with an OS device of another vendor's runtime (cuda0 under an Intel device):
    which of the two it is cannot be known; noted."""
    other = [d for d in pci.devs if d.vendor is not None and d.vendor != pci.vendor]
    if other:
        notes.append(
            f"GPU {pci.bus} is a {vendor_name(pci.vendor)} device but its OS device "
            f"{other[0].name} belongs to {vendor_name(other[0].vendor)}'s runtime: left out "
            "(which is it?)"
        )
    return bool(other)


def _refusal(gpus: list[_Pci], source: str) -> str | None:
    fix = "give the node's own XML (lstopo-no-graphics --of xml > node.xml on the node)"
    buses: set[str] = set()
    names: set[str] = set()
    for p in gpus:
        if p.bus in buses:
            return f"{source}: two PCIDev objects holding GPUs have pci_busid={p.bus!r}; {fix}"
        buses.add(p.bus or "")
        for d in p.devs:
            if d.name in names:
                return f"{source}: two OS devices are named {d.name!r}; {fix}"
            names.add(d.name)
    return None


def _gpu(pci: _Pci, index: int, runtime: str | None, loc: Locality) -> Gpu:
    devs = sorted(pci.devs, key=lambda d: (_NAME_ORDER.index(d.family), d.name))
    pus, numa = loc(pci.device.anchor)
    name = devs[0].name if devs else f"{vendor_name(pci.vendor).lower()}{index}"
    plugins = dict.fromkeys(_PLUGIN[d.family] for d in devs)
    return Gpu(
        os=name,
        names=tuple(d.name for d in devs),
        index=index,
        pci=pci.bus,
        vendor=pci.vendor,
        model=next((d.model for d in devs if d.model), None) or _pci_model(pci),
        pus=pus,
        numa=numa,
        near=pci.device.anchor.get("type", "?"),
        runtime=runtime,
        uuid=next((d.uuid for d in devs if d.uuid), None),
        sources=("hwloc PCI", *plugins),
    )


def _pci_model(pci: _Pci) -> str | None:
    model = pci.device.infos.get("PCIDevice")
    return shown(model, 80) if model else None


def _indexed(gpus: list[_Pci], loc: Locality, source: str) -> tuple[list[Gpu], str | None]:
    """The GPUs with their runtime indexes (see the module's docstring), in bus order; an
    index given twice: the refusal."""
    out: list[Gpu] = []
    position: dict[str | None, int] = {}
    taken: dict[tuple[str | None, int], Gpu] = {}
    for p in sorted(gpus, key=lambda p: bus_key(p.bus)):
        runtime = _INDEX_RUNTIME.get(p.vendor or "")
        native = [d.number for d in p.devs if d.family == runtime]
        pos = position.get(p.vendor, 0)
        position[p.vendor] = pos + 1
        gpu = _gpu(p, native[0] if native else pos, runtime if native else None, loc)
        other = taken.setdefault((gpu.vendor, gpu.index), gpu)
        if other is not gpu:
            return out, (
                f"{source}: GPUs {other.os!r} (PCI {other.pci}) and {gpu.os!r} (PCI {gpu.pci}) "
                f"have one device index {gpu.index}; give the node's own XML "
                "(lstopo-no-graphics --of xml > node.xml on the node)"
            )
        out.append(gpu)
    return out, None


def inventory(
    osdevs: Sequence[OsDevice], pcidevs: Sequence[OsDevice], loc: Locality, source: str
) -> Inventory:
    """The GPUs among an XML pass's PCI devices (``pcidevs``) with what their OS devices
    (``osdevs``) add; ``loc`` turns a device's anchor into (usable PUs, NUMA nodes)."""
    notes: list[str] = []
    pcis = _pcis(pcidevs, notes)
    devs = [d for d in (_gpu_dev(o, notes) for o in osdevs) if d is not None]
    outside = _attach(devs, pcis, notes)
    gpus = [p for p in pcis.values() if p.bus is not None and p.is_gpu]
    _match_outside(outside, gpus, notes)
    gpus = [p for p in gpus if not _foreign(p, notes)]
    refusal = _refusal(gpus, source)
    found, refusal = ([], refusal) if refusal else _indexed(gpus, loc, source)
    if refusal:
        return Inventory((), tuple(notes), refusal)
    found.sort(key=lambda g: (g.vendor or "", g.index, bus_key(g.pci)))
    return Inventory(tuple(found), tuple(notes), None)
