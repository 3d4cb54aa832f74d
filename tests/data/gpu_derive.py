"""Derive the GPU test nodes that topologies/gpu does not have (run from the repo root:
``python tests/data/gpu_derive.py``); the XMLs it writes are committed beside it.

- gpu-tioga-half.xml: the Tioga node with GPUs on NUMA nodes 0 and 2 only (the PCI devices of
  rsmi0-rsmi3 removed with their OS devices: topobind finds GPUs by their PCI devices).
- gpu-tioga-cgroup.xml: the Tioga node seen from a job whose cgroup allows PUs 0-3,8-11.
- gpu-lassen-package0.xml: Lassen seen from a job holding package 0 only (mpibind's test 9).
- gpu-intel-slingshot.xml: the 2-GPU Xeon with Intel GPUs (ze0, ze1) and a Slingshot NIC
  (cxi0/hsn0) in place of its NVIDIA GPUs and Mellanox NIC.
- gpu-amd-drm.xml: the 8-GPU EPYC node whose GPUs hwloc saw only as DRM devices (no ROCm
  plugin): card/renderD names only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "topologies"


def _load(name: str) -> ET.ElementTree:
    return ET.parse(SHARED / name)


def _save(tree: ET.ElementTree, name: str) -> None:
    ET.indent(tree, "  ")
    body = ET.tostring(tree.getroot(), encoding="unicode")
    head = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
    (HERE / name).write_text(head + body + "\n", encoding="utf-8")


def _parents(root: ET.Element) -> dict[ET.Element, ET.Element]:
    return {c: p for p in root.iter() for c in p}


def _drop_osdevs(tree: ET.ElementTree, names: set[str]) -> None:
    root = tree.getroot()
    parent = _parents(root)
    for e in list(root.iter("object")):
        if e.get("type") == "OSDev" and e.get("name") in names:
            parent[e].remove(e)
    for d in root.findall("distances2"):
        if d.get("type") == "OSDev":
            root.remove(d)


def _bitmap(pus: list[int]) -> str:
    value = sum(1 << p for p in pus)
    words = []
    while value:
        words.append(f"0x{value & 0xFFFFFFFF:08x}")
        value >>= 32
    return ",".join(reversed(words)) or "0x0"


def _allow(tree: ET.ElementTree, pus: list[int], nodes: list[int]) -> None:
    machine = tree.getroot().find("object")
    assert machine is not None
    machine.set("allowed_cpuset", _bitmap(pus))
    machine.set("allowed_nodeset", _bitmap(nodes))
    for info in machine.findall("info"):
        if info.get("name") == "LinuxCgroup":
            info.set("value", "/slurm/uid_0/job_42/step_0")


def _drop_pcidevs(tree: ET.ElementTree, osdevs: set[str]) -> None:
    """Remove the PCI devices holding the OS devices ``osdevs`` (and OS device distances)."""
    root = tree.getroot()
    parent = _parents(root)
    for e in list(root.iter("object")):
        if e.get("type") == "OSDev" and e.get("name") in osdevs:
            pcidev = parent[e]
            parent[pcidev].remove(pcidev)
    for d in root.findall("distances2"):
        if d.get("type") == "OSDev":
            root.remove(d)


def tioga_half() -> None:
    tree = _load("gpu/mpibind-eas-tioga.xml")
    _drop_pcidevs(tree, {"rsmi0", "rsmi1", "rsmi2", "rsmi3"})
    _save(tree, "gpu-tioga-half.xml")


def tioga_cgroup() -> None:
    tree = _load("gpu/mpibind-eas-tioga.xml")
    _allow(tree, [0, 1, 2, 3, 8, 9, 10, 11], [0])
    _save(tree, "gpu-tioga-cgroup.xml")


def lassen_package0() -> None:
    tree = _load("gpu/mpibind-coral-lassen.xml")
    _allow(tree, list(range(8, 88)), [0])
    _save(tree, "gpu-lassen-package0.xml")


def intel_slingshot() -> None:
    tree = _load("gpu/mpibind-cts1-pascal.xml")
    root = tree.getroot()
    parent = _parents(root)
    for e in list(root.iter("object")):
        name = e.get("name", "")
        if e.get("type") != "OSDev":
            continue
        pci = parent[e]
        if re.match(r"^(nvml|opencl)", name):
            pci.remove(e)
        elif name.startswith("cuda"):
            e.set("name", "ze" + name[4:])
            e.set("subtype", "LevelZero")
            for info in list(e):
                e.remove(info)
            pci.set("pci_type", "0380 [8086:0bd5] [8086:0000] 2f")
        elif name == "mlx5_0":
            e.set("name", "cxi0")
            pci.set("pci_type", "0200 [17db:0501] [17db:0000] 02")
        elif name == "hsi0":
            e.set("name", "hsn0")
    _save(tree, "gpu-intel-slingshot.xml")


def amd_drm() -> None:
    tree = _load("gpu/mpibind-epyc-corona-p2.xml")
    root = tree.getroot()
    parent = _parents(root)
    for e in list(root.iter("object")):
        name = e.get("name", "")
        if e.get("type") != "OSDev":
            continue
        if name.startswith("opencl"):
            parent[e].remove(e)
        elif name.startswith("rsmi"):
            e.set("name", f"card{int(name[4:]) + 1}")
            e.attrib.pop("subtype", None)
            for info in list(e):
                e.remove(info)
    _save(tree, "gpu-amd-drm.xml")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["tioga_half"]:
        tioga_half()
        raise SystemExit(0)
    tioga_half()
    tioga_cgroup()
    lassen_package0()
    intel_slingshot()
    amd_drm()
