"""A live node's GPUs from what needs no hwloc plugin: sysfs, procfs, and NVML / ROCm SMI
loaded at run time (ctypes; no build-time dependency), merged by bus id into the GPUs hwloc
listed (:mod:`topobind.topo.gpus`).

- sysfs ``/sys/bus/pci/devices/<bdf>/``: ``class``, ``vendor``, the bound ``driver``,
  ``local_cpulist`` and ``numa_node`` (-1: unknown, noted), as Slurm's AutoDetect reads them;
- procfs ``/proc/driver/nvidia/gpus/<bdf>/information``: the model and ``GPU UUID``;
- NVML (``libnvidia-ml.so.1``), only on a node with NVIDIA GPUs: UUIDs and MIG slices' UUIDs
  (NVML ignores ``CUDA_VISIBLE_DEVICES``: it tells what the node has, not what a rank sees);
- ROCm SMI (``librocm_smi64.so``), only with AMD GPUs: the index and unique id.

``TOPOBIND_SYSFS_ROOT`` and ``TOPOBIND_PROCFS_ROOT`` replace ``/sys`` and ``/proc`` (the
tests' fake trees); ``TOPOBIND_GPU_LIBS=0`` keeps NVML and ROCm SMI unloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

from topobind.topo.gpus import (
    GPU_CLASSES,
    GPU_VENDORS,
    VGA_CLASS,
    Gpu,
    Inventory,
    bus_id,
    bus_key,
    vendor_name,
)

SYSFS_ENV, PROCFS_ENV, LIBS_ENV = "TOPOBIND_SYSFS_ROOT", "TOPOBIND_PROCFS_ROOT", "TOPOBIND_GPU_LIBS"
GPU_DRIVERS = frozenset({"nvidia", "amdgpu", "i915", "xe", "nouveau", "radeon"})
MAX_PCI_FUNCTIONS = 4096  # a node has a few hundred; bounded whatever the tree holds
MAX_FILE = 4096  # bytes read from one sysfs/procfs file


class LiveGpu(NamedTuple):
    """One GPU as a live source saw it; None/empty: that source does not know."""

    pci: str
    vendor: str
    pus: tuple[int, ...] | None = None
    numa: int | None = None
    uuid: str | None = None
    model: str | None = None
    index: int | None = None  # ROCm SMI's
    mig: tuple[str, ...] = ()
    source: str = "sysfs"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FILE).decode("ascii", "replace").strip()
    except OSError:
        return None


def _entries(base: str) -> list[str]:
    """The first MAX_PCI_FUNCTIONS names in folder ``base``, sorted; [] when unreadable."""
    try:
        return sorted(os.listdir(base))[:MAX_PCI_FUNCTIONS]
    except OSError:
        return []


def sysfs_gpus(root: str, parse_list: Callable[[str], list[int]]) -> list[LiveGpu]:
    """The GPUs among the PCI functions of ``root``/bus/pci/devices."""
    base = os.path.join(root, "bus", "pci", "devices")
    out = []
    for name in _entries(base):
        bus = bus_id(name)
        path = os.path.join(base, name)
        cls = (_read(os.path.join(path, "class")) or "").lower().removeprefix("0x")[:4]
        if bus is None or cls not in (*GPU_CLASSES, VGA_CLASS):
            continue  # most functions: one read each
        vendor = (_read(os.path.join(path, "vendor")) or "").lower().removeprefix("0x")
        if vendor not in GPU_VENDORS:
            continue
        driver = os.path.basename(os.path.realpath(os.path.join(path, "driver")))
        if cls == VGA_CLASS and driver not in GPU_DRIVERS:
            continue  # a VGA function with no GPU driver: a console, not a GPU
        cpus = _read(os.path.join(path, "local_cpulist"))
        try:
            pus = tuple(parse_list(cpus)) if cpus else None
        except ValueError:
            pus = None
        node = _read(os.path.join(path, "numa_node")) or "-1"
        numa = int(node) if node.isdecimal() and len(node) <= 4 else None
        out.append(LiveGpu(bus, vendor, pus, numa))
    return out


def procfs_gpus(root: str) -> list[LiveGpu]:
    """NVIDIA's ``driver/nvidia/gpus/<bdf>/information``: model and UUID, no library."""
    base = os.path.join(root, "driver", "nvidia", "gpus")
    out = []
    for name in _entries(base):
        bus = bus_id(name)
        text = _read(os.path.join(base, name, "information")) if bus else None
        if bus is None or text is None:
            continue
        fields = dict(line.partition(":")[::2] for line in text.splitlines())
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        uuid = fields.get("GPU UUID", "")
        uuid_ok = uuid.startswith("GPU-") and len(uuid) <= 64 and uuid.isascii()
        model = fields.get("Model", "")[:80] or None
        out.append(
            LiveGpu(bus, "10de", uuid=uuid if uuid_ok else None, model=model, source="procfs")
        )
    return out


def nvml_gpus() -> list[LiveGpu]:
    """NVML's GPUs (bus id, UUID, MIG slices); [] when the library is absent or fails."""
    import ctypes

    class PciInfo(ctypes.Structure):  # nvmlPciInfo_t (v3)
        _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                    ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                    ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                    ("busId", ctypes.c_char * 32)]  # fmt: skip

    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return []
    except (OSError, AttributeError):
        return []
    out = []
    try:
        count = ctypes.c_uint(0)
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        for i in range(min(count.value, 64)):
            handle, pci = ctypes.c_void_p(), PciInfo()
            if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) or (
                lib.nvmlDeviceGetPciInfo_v3(handle, ctypes.byref(pci))
            ):
                continue
            bus = bus_id(pci.busId.decode("ascii", "replace"))
            if bus is not None:
                out.append(
                    LiveGpu(
                        bus,
                        "10de",
                        uuid=_nvml_uuid(lib, handle),
                        mig=_migs(lib, handle),
                        source="NVML",
                    )  # fmt: skip
                )
    finally:
        lib.nvmlShutdown()
    return out


def _nvml_uuid(lib: object, handle: object) -> str | None:
    import ctypes

    buf = ctypes.create_string_buffer(96)
    if lib.nvmlDeviceGetUUID(handle, buf, 96) != 0:  # type: ignore[attr-defined]
        return None
    text = buf.value.decode("ascii", "replace")
    return text if text.startswith(("GPU-", "MIG-")) else None


def _migs(lib: object, handle: object) -> tuple[str, ...]:
    import ctypes

    current, pending, count = ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0)
    f = lib.nvmlDeviceGetMigMode  # type: ignore[attr-defined]
    if f(handle, ctypes.byref(current), ctypes.byref(pending)) != 0 or current.value != 1:
        return ()
    if lib.nvmlDeviceGetMaxMigDeviceCount(handle, ctypes.byref(count)) != 0:  # type: ignore[attr-defined]
        return ()
    out = []
    for j in range(min(count.value, 16)):
        mig = ctypes.c_void_p()
        if lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, j, ctypes.byref(mig)) == 0:  # type: ignore[attr-defined]
            uuid = _nvml_uuid(lib, mig)
            if uuid:
                out.append(uuid)
    return tuple(out)


def rocm_smi_gpus() -> list[LiveGpu]:
    """ROCm SMI's GPUs (bus id, its index, unique id); [] when absent or failing."""
    import ctypes

    lib = None
    for name in (
        "librocm_smi64.so.7",
        "librocm_smi64.so.6",
        "librocm_smi64.so.5",
        "librocm_smi64.so",
    ):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None or lib.rsmi_init(ctypes.c_uint64(0)) != 0:
        return []
    out = []
    try:
        count = ctypes.c_uint32(0)
        if lib.rsmi_num_monitor_devices(ctypes.byref(count)) != 0:
            return []
        for i in range(min(count.value, 64)):
            bdf, uid = ctypes.c_uint64(0), ctypes.c_uint64(0)
            if lib.rsmi_dev_pci_id_get(i, ctypes.byref(bdf)) != 0:
                continue
            v = bdf.value
            bus = f"{v >> 32:04x}:{(v >> 8) & 0xFF:02x}:{(v >> 3) & 0x1F:02x}.{v & 0x7:x}"
            has_uid = lib.rsmi_dev_unique_id_get(i, ctypes.byref(uid)) == 0
            out.append(
                LiveGpu(
                    bus,
                    "1002",
                    uuid=f"{uid.value:x}" if has_uid else None,
                    index=i,
                    source="ROCm SMI",
                )  # fmt: skip
            )
    finally:
        lib.rsmi_shut_down()
    return out


def live_inventory(
    inv: Inventory,
    usable: set[int],
    numa: set[int],
    parse_list: Callable[[str], list[int]],
) -> Inventory:
    """``inv`` (hwloc's GPUs on this node) with what sysfs, procfs, NVML and ROCm SMI add:
    GPUs hwloc missed, UUIDs, MIG slices, a locality hwloc did not give."""
    if inv.refusal:
        return inv
    seen = sysfs_gpus(os.environ.get(SYSFS_ENV) or "/sys", parse_list)
    seen += procfs_gpus(os.environ.get(PROCFS_ENV) or "/proc")
    vendors = {g.vendor for g in inv.gpus} | {g.vendor for g in seen}
    if os.environ.get(LIBS_ENV, "1") != "0":
        seen += nvml_gpus() if "10de" in vendors else []
        seen += rocm_smi_gpus() if "1002" in vendors else []
    if not seen:
        return inv
    notes: list[str] = []
    by_bus = {g.pci: g for g in inv.gpus}
    for live in seen:
        by_bus[live.pci] = _merge(by_bus.get(live.pci), live, usable, numa, notes)
    gpus, refusal = _reindex(list(by_bus.values()))
    return Inventory(() if refusal else tuple(gpus), (*inv.notes, *notes), refusal)


def _merge(
    gpu: Gpu | None, live: LiveGpu, usable: set[int], numa: set[int], notes: list[str]
) -> Gpu:
    pus = tuple(sorted(set(live.pus) & usable)) if live.pus is not None else ()
    nodes = (live.numa,) if live.numa is not None and live.numa in numa else ()
    if live.source == "sysfs" and live.numa is None:
        notes.append(
            f"GPU {live.pci}: sysfs says numa_node -1 (the firmware does not tell), so its NUMA "
            f"node is unknown; its CPUs are its local_cpulist ({len(pus)} usable)"
        )
    if gpu is None:
        gpu = Gpu("", (), -1, live.pci, live.vendor, None, pus, nodes, "sysfs", sources=())
    elif not gpu.pus and pus:
        gpu = gpu._replace(pus=pus, numa=nodes or gpu.numa, near="sysfs")
    index, runtime = gpu.index, gpu.runtime
    if live.index is not None and runtime is None:
        index, runtime = live.index, "rsmi"
    return gpu._replace(
        uuid=gpu.uuid or live.uuid,
        model=gpu.model or live.model,
        mig=gpu.mig or live.mig,
        index=index,
        runtime=runtime,
        sources=tuple(dict.fromkeys((*gpu.sources, live.source))),
    )


def _reindex(gpus: Sequence[Gpu]) -> tuple[list[Gpu], str | None]:
    """Bus-order positions for the GPUs without a runtime index; an index twice: refusal."""
    out: list[Gpu] = []
    position: dict[str | None, int] = {}
    taken: dict[tuple[str | None, int], Gpu] = {}
    for g in sorted(gpus, key=lambda g: bus_key(g.pci)):
        pos = position.get(g.vendor, 0)
        position[g.vendor] = pos + 1
        if g.runtime is None:
            g = g._replace(index=pos)
        if not g.names:
            g = g._replace(os=f"{vendor_name(g.vendor).lower()}{g.index}")
        other = taken.setdefault((g.vendor, g.index), g)
        if other is not g:
            return out, (
                f"live: GPUs {other.os!r} (PCI {other.pci}) and {g.os!r} (PCI {g.pci}) have one "
                f"device index {g.index} (hwloc and the runtime's library disagree)"
            )
        out.append(g)
    out.sort(key=lambda g: (g.vendor or "", g.index, bus_key(g.pci)))
    return out, None
