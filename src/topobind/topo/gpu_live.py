"""A live node's GPUs from what needs no hwloc plugin: sysfs, procfs, and NVML / ROCm SMI
loaded at run time (ctypes; no build-time dependency), merged by bus id into the GPUs hwloc
listed (:mod:`topobind.topo.gpus`).

- sysfs ``/sys/bus/pci/devices/<bdf>/``: ``class``, ``vendor``, the bound ``driver``,
  ``local_cpulist`` and ``numa_node`` (-1: unknown, noted), as Slurm's AutoDetect reads them;
- procfs ``/proc/driver/nvidia/gpus/<bdf>/information``: the model and ``GPU UUID``;
- NVML (``libnvidia-ml.so.1``), only on a node with NVIDIA GPUs: UUIDs and MIG slices' UUIDs
  (NVML ignores ``CUDA_VISIBLE_DEVICES``: it tells what the node has, not what a rank sees);
- ROCm SMI (``librocm_smi64.so``), only with AMD GPUs: the index and unique id.

A GPU function bound to a driver other than the one its vendor's runtime uses (CUDA:
``nvidia``; HIP: ``amdgpu``; Level Zero: ``i915``/``xe``) takes no index: ``vfio-pci`` (passed
to a VM), none, or a display driver (``nouveau``, ``radeon``). It is left out with a note,
unless NVML, procfs or ROCm SMI list it. Every read is of a regular file, non-blocking and
bounded (a FIFO or ``/dev/zero`` in the tree is skipped); a ``local_cpulist`` that is no CPU
list leaves that GPU's CPUs unknown (no rank is planned on it) with a note naming the file.
NVML and ROCm SMI are asked in a forked child bounded by ``TOPOBIND_GPU_LIBS_TIMEOUT``
seconds (default 10): one that hangs or crashes is left out with a note, never hangs or
kills the command. Text from a device or a library is escaped before it is shown.

``TOPOBIND_SYSFS_ROOT`` and ``TOPOBIND_PROCFS_ROOT`` replace ``/sys`` and ``/proc`` (the
tests' fake trees); ``TOPOBIND_GPU_LIBS=0`` keeps NVML and ROCm SMI unloaded.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable, Sequence
from typing import NamedTuple, NoReturn

from topobind.errors import TopobindError
from topobind.topo.gpus import (
    GPU_CLASSES,
    GPU_VENDORS,
    VGA_CLASS,
    Gpu,
    Inventory,
    bus_id,
    bus_key,
    listed,
    shown,
    vendor_name,
)

SYSFS_ENV, PROCFS_ENV, LIBS_ENV = "TOPOBIND_SYSFS_ROOT", "TOPOBIND_PROCFS_ROOT", "TOPOBIND_GPU_LIBS"
LIBS_TIMEOUT_ENV = "TOPOBIND_GPU_LIBS_TIMEOUT"
LIBS_TIMEOUT_S = 10.0  # NVML's init on a big node without its persistence daemon: seconds
MAX_ANSWER = 1 << 20  # bytes of a library child's answer
MAX_SCAN = 1 << 16  # names looked at in one sysfs/procfs folder
#: vendor -> the drivers its runtime sees devices through (CUDA: nvidia; HIP/ROCr: amdgpu;
#: Level Zero: i915, xe); a GPU on any other (nouveau, radeon, vfio-pci, none) takes no index
RUNTIME_DRIVERS = {"10de": ("nvidia",), "1002": ("amdgpu",), "8086": ("i915", "xe")}
#: every GPU driver (display ones no compute runtime uses: nouveau, radeon): a VGA function
#: bound to one is a GPU, noted when left out; one on none (or vfio-pci) a console, skipped
GPU_DRIVERS = frozenset({"nouveau", "radeon", *itertools.chain(*RUNTIME_DRIVERS.values())})
MAX_PCI_FUNCTIONS = 4096  # a node has a few hundred; bounded whatever the tree holds
MAX_FILE = 4096  # bytes read from one sysfs/procfs file
MAX_CPULIST = 1 << 16  # bytes of a local_cpulist (every other CPU of 8192: about 24 KB)


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
    numa_text: str | None = None  # sysfs's numa_node as read (None: no such file)


def _read(path: str, limit: int = MAX_FILE) -> str | None:
    """The first ``limit`` bytes of regular file ``path`` as ASCII text (others replaced);
    None when it is missing, unreadable or no regular file (a FIFO, a device: never waited
    on, never read without end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _entries(base: str) -> list[str]:
    """The first MAX_PCI_FUNCTIONS names in folder ``base``, sorted (of at most MAX_SCAN
    looked at); [] when unreadable."""
    try:
        with os.scandir(base) as it:
            names = [e.name for e in itertools.islice(it, MAX_SCAN)]
    except OSError:
        return []
    return sorted(names)[:MAX_PCI_FUNCTIONS]


def _driver(path: str) -> str | None:
    """The name of the driver bound to the PCI function at ``path`` (None: none bound)."""
    link = os.path.join(path, "driver")
    return os.path.basename(os.path.realpath(link)) if os.path.islink(link) else None


def sysfs_gpus(
    root: str, parse_list: Callable[[str], list[int]], notes: list[str] | None = None
) -> list[LiveGpu]:
    """The GPUs among the PCI functions of ``root``/bus/pci/devices. A GPU bound to no GPU
    driver is returned with ``source`` ``unbound:DRIVER`` (the caller leaves it out unless
    a library lists it); what is odd is added to ``notes``."""
    notes = [] if notes is None else notes
    base = os.path.join(root, "bus", "pci", "devices")
    out = []
    for name in _entries(base):
        bus = bus_id(name)
        path = os.path.join(base, name)
        cls = (_read(os.path.join(path, "class"), 64) or "").lower().removeprefix("0x")[:4]
        if bus is None or cls not in (*GPU_CLASSES, VGA_CLASS):
            continue  # most functions: one read each
        vendor = (_read(os.path.join(path, "vendor"), 64) or "").lower().removeprefix("0x")
        if vendor not in GPU_VENDORS:
            continue
        driver = _driver(path)
        if driver not in RUNTIME_DRIVERS[vendor]:
            if cls != VGA_CLASS or driver in GPU_DRIVERS:
                out.append(LiveGpu(bus, vendor, source=f"unbound:{driver or ''}"))
            continue
        numa, text = _numa(path)
        pus = _cpus(path, bus, parse_list, notes)
        out.append(LiveGpu(bus, vendor, pus, numa, numa_text=text))
    return out


def _cpus(
    path: str, bus: str, parse_list: Callable[[str], list[int]], notes: list[str]
) -> tuple[int, ...] | None:
    """The GPU's ``local_cpulist``; None (with a note naming the file) when it is no list."""
    file = os.path.join(path, "local_cpulist")
    text = _read(file, MAX_CPULIST)
    if not text:
        return None
    try:
        return tuple(parse_list(text))
    except (TopobindError, ValueError):
        notes.append(
            f"GPU {bus}: {file} holds {shown(text, 40)!r}, not a CPU list: its CPUs are "
            "unknown, so no rank is planned on it"
        )
        return None


def _numa(path: str) -> tuple[int | None, str | None]:
    """(NUMA node, the text read) of sysfs's ``numa_node``."""
    text = _read(os.path.join(path, "numa_node"), 64)
    ok = text is not None and text.isdecimal() and text.isascii() and len(text) <= 4
    return (int(text) if ok and text else None), text


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
        model = shown(fields.get("Model", ""), 80) or None
        out.append(
            LiveGpu(
                bus, "10de", uuid=uuid if _uuid_ok(uuid) else None, model=model, source="procfs"
            )
        )
    return out


def _uuid_ok(uuid: str) -> bool:
    """A UUID as NVIDIA and NVML write them: GPU-/MIG- and printable ASCII, short."""
    return (
        uuid.startswith(("GPU-", "MIG-"))
        and len(uuid) <= 64
        and uuid.isprintable()
        and uuid.isascii()
    )


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
    return text if _uuid_ok(text) else None


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


def _libs_timeout() -> float:
    text = os.environ.get(LIBS_TIMEOUT_ENV, "")
    try:
        value = float(text) if text.isascii() else LIBS_TIMEOUT_S
    except ValueError:
        return LIBS_TIMEOUT_S
    return value if 0.01 <= value <= 3600 else LIBS_TIMEOUT_S


def bounded_query(query: Callable[[], list[LiveGpu]], what: str, notes: list[str]) -> list[LiveGpu]:
    """``query()`` (NVML's, ROCm SMI's) run in a forked child: its answer within
    ``TOPOBIND_GPU_LIBS_TIMEOUT`` seconds, else [] with a note (a library that hangs, crashes
    or answers garbage never hangs or kills topobind)."""
    import json
    import signal

    fix = f"{LIBS_ENV}=0 skips it"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _answer(query, write_fd)  # never returns
    os.close(write_fd)
    limit = _libs_timeout()
    try:
        answer, why = _collect(read_fd, limit)
    finally:
        os.close(read_fd)
    if answer is None:
        os.kill(pid, signal.SIGKILL)
    status = os.waitpid(pid, 0)[1]
    if answer is None:
        notes.append(f"{what} {why}: left out (its UUIDs, indexes, MIG slices); {fix}")
        return []
    if os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0:
        how = f"crashed (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else "failed"
        notes.append(f"{what} {how}: left out (its UUIDs, indexes, MIG slices); {fix}")
        return []
    try:
        return [_live_gpu(item) for item in json.loads(answer)]
    except (ValueError, TypeError):
        notes.append(f"{what} answered what topobind cannot read: left out; {fix}")
        return []


def _answer(query: Callable[[], list[LiveGpu]], write_fd: int) -> NoReturn:
    """The child of :func:`bounded_query`: the query's GPUs as JSON on ``write_fd``, exit."""
    import json
    import sys

    code = 0
    try:
        if "faulthandler" in sys.modules:  # a crash is said by the parent, once
            sys.modules["faulthandler"].disable()
        data = json.dumps([list(g) for g in query()]).encode()
        for k in range(0, len(data), 65536):
            os.write(write_fd, data[k : k + 65536])
    except BaseException:  # noqa: BLE001 - the parent says it
        code = 3
    os._exit(code)


def _collect(read_fd: int, limit: float) -> tuple[bytes | None, str]:
    """(all a child writes until it closes ``read_fd``'s pipe, ""), within ``limit`` seconds
    and MAX_ANSWER bytes; (None, why) past either."""
    import select
    import time

    deadline = time.monotonic() + limit
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_ANSWER:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            return None, f"did not answer within {limit:g} s"
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return b"".join(chunks), ""
        chunks.append(chunk)
        size += len(chunk)
    return None, f"answered more than {MAX_ANSWER} bytes"


def _live_gpu(item: object) -> LiveGpu:
    """A LiveGpu back from a child's JSON (a list of its fields)."""
    if not isinstance(item, list) or len(item) != len(LiveGpu._fields):
        raise ValueError("not a LiveGpu")
    g = LiveGpu(*item)
    bus = bus_id(g.pci) if isinstance(g.pci, str) else None
    if bus is None:
        raise ValueError("no bus id")
    pus = tuple(g.pus) if isinstance(g.pus, list) else None
    return g._replace(pci=bus, pus=pus, mig=tuple(g.mig or ()))


def live_inventory(
    inv: Inventory,
    usable: set[int],
    numa: set[int],
    parse_list: Callable[[str], list[int]],
) -> Inventory:
    """``inv`` (hwloc's GPUs on this node) with what sysfs, procfs, NVML and ROCm SMI add:
    GPUs hwloc missed, UUIDs, MIG slices, a locality hwloc did not give; GPUs bound to no GPU
    driver taken out."""
    if inv.refusal:
        return inv
    notes: list[str] = []
    found = sysfs_gpus(os.environ.get(SYSFS_ENV) or "/sys", parse_list, notes)
    unbound = {g.pci: g.source.partition(":")[2] for g in found if g.source.startswith("unbound")}
    seen = [g for g in found if g.pci not in unbound]
    seen += procfs_gpus(os.environ.get(PROCFS_ENV) or "/proc")
    vendors = {g.vendor for g in inv.gpus} | {g.vendor for g in seen}
    if os.environ.get(LIBS_ENV, "1") != "0":
        seen += bounded_query(nvml_gpus, "NVML", notes) if "10de" in vendors else []
        seen += bounded_query(rocm_smi_gpus, "ROCm SMI", notes) if "1002" in vendors else []
    for pci in {g.pci for g in seen}:
        unbound.pop(pci, None)  # a library or procfs lists it: its driver serves it
    gpus = [g for g in inv.gpus if g.pci not in unbound]
    if unbound:
        left = [f"{pci} ({f'bound to {d}' if d else 'bound to no driver'})"
                for pci, d in sorted(unbound.items(), key=lambda kv: bus_key(kv[0]))]  # fmt: skip
        notes.append(
            f"GPUs {listed(left)}: not bound to their vendor's compute driver (nvidia for "
            "CUDA, amdgpu for HIP, i915/xe for Level Zero: passed to a VM, unused, or on a "
            "display driver), so no runtime sees them: left out, they take no index"
        )
    if not seen and len(gpus) == len(inv.gpus):
        return Inventory(inv.gpus, (*inv.notes, *notes), None)
    by_bus = {g.pci: g for g in gpus}
    unknown: dict[str, list[tuple[str, int]]] = {}
    for live in seen:
        by_bus[live.pci] = _merge(by_bus.get(live.pci), live, usable, numa, unknown)
    notes += _numa_notes(unknown)
    gpus, refusal = _reindex(list(by_bus.values()))
    return Inventory(() if refusal else tuple(gpus), (*inv.notes, *notes), refusal)


def _numa_said(live: LiveGpu, nodes: tuple[int, ...]) -> str | None:
    """What sysfs said of a GPU's NUMA node when it names none of this machine's."""
    if live.source != "sysfs" or nodes:
        return None
    said = live.numa_text
    if said is None:
        return "has no numa_node file"
    if said == "-1":
        return "says numa_node -1 (the firmware does not tell)"
    return f"says numa_node {shown(said, 20)!r}, no NUMA node of this machine"


def _numa_notes(unknown: dict[str, list[tuple[str, int]]]) -> list[str]:
    """One note per thing sysfs said (``unknown``: what -> [(bus id, usable CPUs)])."""
    notes = []
    for what, gpus in unknown.items():
        if len(gpus) == 1:
            (pci, count), *_ = gpus
            notes.append(
                f"GPU {pci}: sysfs {what}, so its NUMA node is unknown; its CPUs are its "
                f"local_cpulist ({count} usable)"
            )
            continue
        notes.append(
            f"GPUs {listed([pci for pci, _ in gpus])}: sysfs {what}, so their NUMA nodes are "
            "unknown; their CPUs are their local_cpulist"
        )
    return notes


def _merge(
    gpu: Gpu | None,
    live: LiveGpu,
    usable: set[int],
    numa: set[int],
    unknown: dict[str, list[tuple[str, int]]],
) -> Gpu:
    pus = tuple(sorted(set(live.pus) & usable)) if live.pus is not None else ()
    nodes = (live.numa,) if live.numa is not None and live.numa in numa else ()
    said = _numa_said(live, nodes)
    if said:
        unknown.setdefault(said, []).append((live.pci, len(pus)))
    near = "sysfs" if live.pus is not None else "unknown"
    if gpu is None:
        gpu = Gpu("", (), -1, live.pci, live.vendor, None, pus, nodes, near, sources=())
    elif not gpu.pus and pus:
        gpu = gpu._replace(pus=pus, numa=nodes or gpu.numa, near="sysfs")
    elif gpu.near == "unknown" and pus:
        gpu = gpu._replace(pus=pus, numa=nodes, near="sysfs")
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
