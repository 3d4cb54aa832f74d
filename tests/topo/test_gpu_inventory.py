"""The GPU inventory from hwloc's PCI devices (topobind.topo.gpus): odd GPU devices are notes,
never refusals, except for the per-gpu layout when GPUs cannot be told apart (issue 27 item
2, issue 31 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paths import TOPOLOGIES

from topobind.cli.main import main
from topobind.topo.topology import parse_xml

H100 = ("h100-cloud-pci-only.xml", "h100-cloud-opencl.xml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", H100)
def test_h100_exports_show_and_plan(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Both exports of the real H100 node: show, compact and per-gpu (one rank, GPU
    0000:00:06.0, the order pinned). Before: 'GPU OS device opencl1d0 has no PCIDev' for
    every command on the OpenCL export, 'has no GPU' for per-gpu on the other."""
    src = str(TOPOLOGIES / "gpu" / name)
    code, out, err = run(capsys, "show", "-t", src)
    assert code == 0, err
    assert "GPU " in out and "PCI 0000:00:06.0, vendor 10de" in out
    assert run(capsys, "plan", "-t", src, "-l", "compact")[0] == 0
    code, out, err = run(capsys, "plan", "-t", src, "-l", "per-gpu", "-f", "json")
    assert code == 0, err
    (rank,) = json.loads(out)["ranks"]
    assert [g["pci"] for g in rank["gpus"]] == ["0000:00:06.0"]
    assert rank["env"] == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_show_says_where_each_gpu_was_found(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "-t", str(TOPOLOGIES / "gpu" / H100[0]), "-f", "json")
    assert code == 0
    (gpu,) = json.loads(out)["gpus"]
    assert gpu["sources"] == ["hwloc PCI"] and gpu["os"] == "nvidia0"
    code, out, _ = run(capsys, "show", "-t", str(TOPOLOGIES / "gpu" / H100[0]))
    assert "found by hwloc PCI" in out and "libhwloc-contrib-plugins" in out
    code, out, _ = run(capsys, "show", "-t", str(TOPOLOGIES / "gpu" / "mpibind-cts1-pascal.xml"))
    assert "found by hwloc PCI, hwloc cuda, hwloc nvml, hwloc opencl" in out
    assert "GPU-affad486-897e-9778-18e8-26a7127927a8" in out
    assert "libhwloc-contrib-plugins" not in out  # hwloc had its NVML plugin there


# ----------------------------------------------------------------- small hand-made nodes
def node(*io: str) -> str:
    """A 4-PU machine with the I/O objects ``io`` (XML text) under its host bridge."""
    pus = "".join(f'<object type="PU" os_index="{i}" cpuset="0x{1 << i:x}"/>' for i in range(4))
    return (
        '<topology><object type="Machine" cpuset="0xf" complete_cpuset="0xf" '
        'nodeset="0x1"><object type="NUMANode" os_index="0" cpuset="0xf" nodeset="0x1"/>'
        f'<object type="Package" cpuset="0xf">{pus}</object>'
        f'<object type="Bridge" bridge_type="0-1">{"".join(io)}</object>'
        "</object></topology>"
    )


def pci(bus: str, cls_vendor: str, *children: str) -> str:
    return (
        f'<object type="PCIDev" pci_busid="{bus}" pci_type="{cls_vendor}:1234] [0:0] 00">'
        + "".join(children)
        + "</object>"
    )


def osdev(name: str, **infos: str) -> str:
    body = "".join(f'<info name="{k}" value="{v}"/>' for k, v in infos.items())
    return f'<object type="OSDev" name="{name}">{body}</object>'


NV = "0302 [10de"
INTEL = "0380 [8086"


def test_cuda_device_under_an_intel_controller_gets_no_variable() -> None:
    """Issue 31 item 5: the vendor comes from the PCI device; an NVIDIA runtime's device under
    an Intel GPU is a contradiction: that GPU is left out (no ZE_AFFINITY_MASK), noted."""
    topo = parse_xml(node(pci("0000:01:00.0", INTEL, osdev("cuda0"))), source="x.xml")
    assert topo.devices.gpus == ()
    assert any("belongs to NVIDIA's runtime: left out" in n for n in topo.devices.notes)
    usb = parse_xml(node(pci("0000:01:00.0", "0c03 [8086", osdev("cuda0"))), source="x.xml")
    assert usb.devices.gpus == ()
    assert any("not a GPU: left out" in n for n in usb.devices.notes)


def test_malformed_bus_ids_and_huge_indexes_are_left_out_with_a_note() -> None:
    """Issue 31 item 5: never printed as given."""
    bad = "0000:01:00.0; rm -rf /"
    text = node(
        pci(bad, NV, osdev("nvml0")),
        pci("0000:02:00.0", NV, osdev("nvml12345678901234567890")),
    )
    topo = parse_xml(text, source="x.xml")
    (gpu,) = topo.devices.gpus
    assert (gpu.pci, gpu.index, gpu.names) == ("0000:02:00.0", 0, ())
    notes = " ".join(topo.devices.notes)
    assert "malformed pci_busid" in notes and "rm -rf" not in notes
    assert "more than 4 digits" in notes and "12345678901234567890" not in notes


def test_bus_ids_are_ordered_by_domain_then_bus() -> None:
    text = node(
        pci("0001:01:00.0", NV),
        pci("0000:ff:00.0", NV),
        pci("000a:00:01.0", NV),
        pci("00000002:00:00.0", NV),
    )
    gpus = parse_xml(text, source="x.xml").devices.gpus
    assert [(g.pci, g.index) for g in gpus] == [
        ("0000:ff:00.0", 0),
        ("0001:01:00.0", 1),
        ("0002:00:00.0", 2),
        ("000a:00:01.0", 3),
    ]


def test_cpu_opencl_devices_bmc_adapters_and_idle_vga_are_no_gpus() -> None:
    pocl = osdev(
        "opencl0d0", OpenCLDeviceType="CPU", OpenCLPlatformName="Portable Computing Language"
    )
    text = node(
        pocl,
        pci("0000:02:00.0", "0300 [1a03", osdev("card0")),  # ASPEED BMC with its DRM device
        pci("0000:03:00.0", "0300 [10de"),  # a VGA NVIDIA without a driver
        pci("0000:04:00.0", "0300 [10de", osdev("card1")),  # ... and with one
    )
    topo = parse_xml(text, source="x.xml")
    assert [g.pci for g in topo.devices.gpus] == ["0000:04:00.0"]
    assert topo.devices.notes == ()


def test_cuda_and_opencl_numbers_never_decide_an_index() -> None:
    """cuda0 on the second GPU on the bus (CUDA's fastest-first order) is index 1."""
    text = node(pci("0000:01:00.0", NV, osdev("cuda1")), pci("0000:02:00.0", NV, osdev("cuda0")))
    gpus = parse_xml(text, source="x.xml").devices.gpus
    assert [(g.os, g.index, g.runtime) for g in gpus] == [("cuda1", 0, None), ("cuda0", 1, None)]


ONE_BUS = node(pci("0000:01:00.0", NV, osdev("nvml0")), pci("0000:01:00.0", NV, osdev("nvml1")))
ONE_INDEX = node(pci("0000:01:00.0", NV, osdev("nvml0")), pci("0000:02:00.0", NV, osdev("nvml0")))


@pytest.mark.parametrize("text", [ONE_BUS, ONE_INDEX], ids=["one-bus-id", "one-index"])
def test_gpus_that_cannot_be_told_apart_refuse_per_gpu_only(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What issue 22 refused stays refused, for per-gpu only."""
    path = tmp_path / "node.xml"
    path.write_text(text)
    code, out, err = run(capsys, "plan", "-t", str(path), "-l", "per-gpu")
    assert code == 2 and err.startswith(f"topobind: error: {path}: ") and out == ""
    assert run(capsys, "show", "-t", str(path))[0] == 0
    code, out, err = run(capsys, "plan", "-t", str(path), "-l", "compact", "-f", "json")
    assert code == 0, err
    assert any("GPUs not used by this layout" in n for n in json.loads(out)["notes"])


def test_an_outside_device_is_matched_only_when_unambiguous() -> None:
    one = node(pci("0000:01:00.0", NV), osdev("opencl0d0", GPUVendor="NVIDIA Corporation"))
    (gpu,) = parse_xml(one, source="x.xml").devices.gpus
    assert gpu.names == ("opencl0d0",)
    two = node(
        pci("0000:01:00.0", NV),
        pci("0000:02:00.0", NV),
        osdev("opencl0d0", GPUVendor="NVIDIA Corporation"),
    )
    topo = parse_xml(two, source="x.xml")
    assert [g.names for g in topo.devices.gpus] == [(), ()]
    assert any("2 NVIDIA GPUs share its bridge: left out" in n for n in topo.devices.notes)


def test_hostile_models_and_uuids_from_an_xml_are_escaped_or_left_out() -> None:
    """Issue 37 item 23: a model with a newline and a tab (XML allows them as &#10; &#9;), a
    UUID with one: the model escaped for the terminal, the UUID left out with a note."""
    text = node(
        pci("0000:01:00.0", NV, osdev("nvml0", GPUModel="H100&#10;fake: line&#9;x",
                                      NVIDIAUUID="GPU-1&#10;2")),
    )  # fmt: skip
    topo = parse_xml(text, source="x.xml")
    (gpu,) = topo.devices.gpus
    assert gpu.model == "H100\\nfake: line\\tx" and gpu.uuid is None
    assert any("UUID 'GPU-1\\\\n2' is not one: left out" in n for n in topo.devices.notes)
