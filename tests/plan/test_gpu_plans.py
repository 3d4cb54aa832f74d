"""The per-gpu layout, data-driven: tests/data/gpu_cases.json holds each topology, the
``topobind plan`` arguments and the expected ranks (or error); the XMLs are in
topologies/ and tests/data (gpu_derive.py derives the latter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from paths import DATA, TOPOLOGIES

from topobind.cli.main import main
from topobind.plan.model import validate_plan_json
from topobind.topo.topology import format_list, load

CASES = json.loads((DATA / "gpu_cases.json").read_text())["cases"]


def topology_path(spec: str) -> Path:
    where, name = spec.split(":", 1)
    path = (TOPOLOGIES if where == "shared" else DATA) / name
    if not path.exists():
        pytest.fail(f"{path} not found: the repository's topologies/ is incomplete")
    return path


def plan_json(capsys: pytest.CaptureFixture[str], src: Path, *args: str) -> tuple[int, Any, str]:
    code = main(["plan", "-t", str(src), "--layout", "per-gpu", "-f", "json", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def summary(rank: dict[str, Any]) -> dict[str, Any]:
    return {
        "pus": rank["cpus_list"],
        "gpus": [f"{g['os']}@{g['pci']}" for g in rank["gpus"]],
        "nic": rank["nic"]["os"] if rank["nic"] else None,
        "env": rank["env"],
    }


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = plan_json(capsys, topology_path(case["topology"]), *case["args"])
    if "error" in case:
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("topobind: error: "), err
        assert case["error"] in lines[0]
        return
    assert code == 0, err
    validate_plan_json(doc)
    got = [summary(r) for r in doc["ranks"]]
    if "ranks" in case:
        assert got == case["ranks"]
    else:
        assert got[: len(case["first_ranks"])] == case["first_ranks"]
    for note in case.get("notes", []):
        assert any(note in n for n in doc["notes"]), doc["notes"]
    if "srun_masks" in case:
        (bind,) = [a for a in doc["launch"]["srun"] if a.startswith("--cpu-bind=mask_cpu:")]
        masks = bind.split(":", 1)[1].split(",")
        assert [int(m, 16) for m in masks] == [int(m, 16) for m in case["srun_masks"]]
        assert "--gpu-bind=none" in doc["launch"]["srun"]


def test_every_rank_local_to_its_gpus_and_disjoint(capsys: pytest.CaptureFixture[str]) -> None:
    """On every GPU fixture: no PU used twice, every rank's PUs local to its GPUs."""
    for spec in sorted({c["topology"] for c in CASES if "error" not in c}):
        src = topology_path(spec)
        gpus = {g.os: set(g.pus) for g in load(str(src)).devices.gpus}
        code, doc, err = plan_json(capsys, src)
        assert code == 0, err
        seen: set[int] = set()
        for r in doc["ranks"]:
            cpus = set(r["cpus"])
            assert not cpus & seen, (spec, r["rank"])
            seen |= cpus
            assert all(cpus <= gpus[g["os"]] for g in r["gpus"]), (spec, r)


def test_lassen_agrees_with_mpibind_one_task_per_core(capsys: pytest.CaptureFixture[str]) -> None:
    """mpibind's test 1 on Lassen: 40 tasks, one per core; tasks 0-9 on GPU 0, 10-19 on 1..."""
    expected = (TOPOLOGIES / "gpu" / "mpibind-expected.coral-lassen").read_text()
    block = expected.split("# 1:")[1].split("# 2:")[0]
    quoted = [ln.strip().strip('"') for ln in block.splitlines() if ln.startswith('"')]
    cpus, gpus = quoted[1].split(";"), quoted[2].split(";")
    code, doc, err = plan_json(capsys, TOPOLOGIES / "gpu" / "mpibind-coral-lassen.xml", "-r", "40")
    assert code == 0, err
    assert [r["cpus_list"] for r in doc["ranks"]] == cpus
    assert [",".join(str(g["index"]) for g in r["gpus"]) for r in doc["ranks"]] == gpus


def test_show_lists_devices_with_locality(capsys: pytest.CaptureFixture[str]) -> None:
    src = TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml"
    assert main(["show", "-t", str(src)]) == 0
    out = capsys.readouterr().out
    assert "GPU rsmi0 (index 0, PCI 0000:c1:00.0, vendor 1002" in out
    assert "near L3Cache, PUs 48-55,112-119, NUMA 3" in out
    assert "NIC hsi2 (slingshot, PCI 0000:d5:00.0): near L3Cache, PUs 8-15,72-79, NUMA 0" in out
    assert main(["show", "-t", str(src), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["os"] for g in doc["gpus"]] == [f"rsmi{i}" for i in range(8)]
    assert {n["os"]: n["numa"] for n in doc["nics"]} == {
        "hsi0": [3],
        "hsi1": [1],
        "hsi2": [0],
        "hsi3": [2],
    }


def test_one_physical_gpu_is_one_gpu() -> None:
    """cuda/nvml/opencl OS devices of one PCI device are one GPU, named after its runtime."""
    topo = load(str(TOPOLOGIES / "gpu" / "mpibind-g4dnmetal.xml"))
    assert [g.os for g in topo.devices.gpus] == [f"cuda{i}" for i in range(8)]
    assert set(topo.devices.gpus[0].names) == {"cuda0", "nvml0", "opencl0d0"}
    assert topo.devices.nics == ()  # the EFA device (rdmap*) is not one of the NIC kinds
    lassen = load(str(TOPOLOGIES / "gpu" / "mpibind-coral-lassen.xml"))
    assert [(n.os, n.kind) for n in lassen.devices.nics][:1] == [("mlx5_0", "openfabrics")]
    assert set(lassen.devices.nics[0].names) == {"mlx5_0", "hsi0"}


def test_cgroup_cuts_device_locality() -> None:
    topo = load(str(DATA / "gpu-tioga-cgroup.xml"))
    local = {g.os: format_list(g.pus) for g in topo.devices.gpus}
    assert local["rsmi4"] == "0-3" and local["rsmi5"] == "8-11" and local["rsmi0"] == ""


def test_live_node_without_gpus() -> None:
    """This machine has no GPU: the live topology loads, with no GPU, and per-gpu says so."""
    topo = load("live")
    if topo.devices.gpus:
        pytest.skip("this machine has GPUs")
    assert main(["plan", "--layout", "per-gpu"]) == 2


def test_a_job_that_narrowed_the_gpus_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live plans inside a job whose ROCR_VISIBLE_DEVICES is already set (Slurm --gpus)."""
    from plans import plan_of

    topo = load(str(TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml")).replace(source="live")
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2,3")
    assert any(
        "ROCR_VISIBLE_DEVICES=2,3 is already set" in n for n in plan_of(topo, "per-gpu").notes
    )
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES")
    assert not any("already set" in n for n in plan_of(topo, "per-gpu").notes)


def test_deep_io_nesting_is_read_without_recursion() -> None:
    from topobind.topo import hwloc_xml
    from topobind.topo.devices import devices_of

    xml = (
        '<topology><object type="Machine" cpuset="0x1">'
        + '<object type="Bridge">' * 5000
        + '<object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0302 [10de:1db1]">'
        + '<object type="OSDev" name="cuda0"/></object>'
        + "</object>" * 5000
        + "</object></topology>"
    )
    doc = hwloc_xml.read(xml, "deep.xml", max_pus=1, max_depth=6000, fix="")
    gpus = devices_of(doc.osdevs, {0}, set()).gpus
    assert [(g.os, g.index, g.pus) for g in gpus] == [("cuda0", 0, (0,))]


def test_gpu_options_belong_to_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["plan", "-t", "synthetic:pack:1 core:2 pu:1", "-l", "compact", "--order", "cpu"]) == 2
    )
    assert "--order: not an option of layout 'compact'" in capsys.readouterr().err


def test_run_writes_each_ranks_variables_into_the_rank_step_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The per-rank step (rankstep/rankexec.c) reads each rank's ranks[].env from the file
    topobind run writes: one line per local rank."""
    import re

    for var in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    src = str(TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml")
    args = ["run", "--dry-run", "-t", src, "-l", "per-gpu", "--launcher", "mpirun", "--", "true"]
    assert main(args) == 0
    out = capsys.readouterr().out
    workdir = re.search(r"files this command reads \(kept; remove when done\): (\S+)", out)
    assert workdir, out
    lines = (Path(workdir.group(1)) / "rankexec.txt").read_text().splitlines()
    ranks = [line.split("\t") for line in lines if line[:1].isdigit()]
    assert [r[0] for r in ranks] == [str(i) for i in range(8)]
    assert [[v for v in r if v.startswith("ROCR_")] for r in ranks] == [
        [f"ROCR_VISIBLE_DEVICES={i}"] for i in range(8)
    ]


def test_nested_localities_give_each_core_once() -> None:
    """GPU cuda1 near both L3 domains, cuda0 and cuda2 near one each: the cores go to the
    nearest GPUs, cuda1 is left out with a note (never a core planned twice)."""

    from plans import plan_of

    from topobind.topo.devices import Devices, Gpu

    topo = load("synthetic:pack:1 l3:2 core:2 pu:1")

    def gpu(i: int, pus: tuple[int, ...]) -> Gpu:
        return Gpu(
            f"cuda{i}", (f"cuda{i}",), i, f"0000:0{i}:00.0", "10de", None, pus, (0,), "L3", "cuda"
        )

    devices = Devices(gpus=(gpu(0, (0, 1)), gpu(1, (0, 1, 2, 3)), gpu(2, (2, 3))))
    plan = plan_of(topo.replace(devices=devices), "per-gpu")
    assert [(r.cpus, [g.os for g in r.gpus]) for r in plan.ranks] == [
        ((0, 1), ["cuda0"]),
        ((2, 3), ["cuda2"]),
    ]
    assert plan.notes == ("GPUs cuda1: every core near them went to GPUs nearer still; not used",)


# ------------------------------------------- the same plan whatever hwloc's GPU plugins saw
GPU_FAMILIES = ("nvml", "cuda", "rsmi", "ze", "opencl", "card", "renderD")


def _gpu_osdev(e: Any) -> bool:
    name = e.get("name", "")
    return e.get("type") == "OSDev" and name.startswith(GPU_FAMILIES) and name[-1:].isdigit()


def _without_gpu_osdevs(root: Any) -> None:
    parent = {c: p for p in root.iter() for c in p}
    for e in [e for e in root.iter("object") if _gpu_osdev(e)]:
        parent[e].remove(e)
    for d in root.findall("distances2"):  # distances between GPU OS devices go with them
        if d.get("type") == "OSDev":
            root.remove(d)


def _osdev(name: str, **infos: str) -> Any:
    import xml.etree.ElementTree as ET

    e = ET.Element("object", {"type": "OSDev", "name": name, "subtype": "OpenCL"})
    for k, v in infos.items():
        ET.SubElement(e, "info", {"name": k, "value": v})
    return e


def variant(src: Path, kind: str, out: Path) -> Path:
    """``src`` with its GPU OS devices removed (``bare``), with a pocl CPU OpenCL device added
    (``pocl``), or with its GPUs seen only as OpenCL devices beside (not under) their PCI
    devices, as hwloc 2.10's OpenCL backend places a device it cannot match (``opencl``)."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(src)
    root = tree.getroot()
    machine = root.find("object")
    assert machine is not None
    if kind == "pocl":
        cpu = {"OpenCLDeviceType": "CPU", "OpenCLPlatformName": "Portable Computing Language"}
        machine.append(_osdev("opencl7d0", **cpu))
    else:
        _without_gpu_osdevs(root)
    if kind == "opencl":
        parent = {c: p for p in root.iter() for c in p}
        vendors = {"10de": "NVIDIA Corporation", "1002": "Advanced Micro Devices, Inc.",
                   "8086": "Intel(R) Corporation"}  # fmt: skip
        gpus = [
            e
            for e in root.iter("object")
            if e.get("type") == "PCIDev"
            and e.get("pci_type", "")[:4] in ("0302", "0380")
            and e.get("pci_type", "")[6:10] in vendors
        ]
        for i, pci in enumerate(gpus):
            info = {"OpenCLDeviceType": "GPU", "GPUVendor": vendors[pci.get("pci_type", "")[6:10]]}
            parent[pci].append(_osdev(f"opencl1d{i}", **info))
    tree.write(out)
    return out


def without_names(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            **summary(r),
            "gpus": [g["pci"] for g in r["gpus"]],
            "index": [g["index"] for g in r["gpus"]],
        }
        for r in doc["ranks"]
    ]


VARIANT_CASES = [c for c in CASES if "error" not in c]
#: cases whose plan without GPU OS devices must differ, and why (asserted: they do differ)
WITHOUT_OSDEVS_DIFFERS = {
    # a VGA-class (0300) GPU is a GPU only with a driver's device under it
    "xeon-nvidia-and-amd-gpu-mlx5": "the AMD VGA function 84:00.1 has no driver's device left",
    # derived by cutting 4 of 8 GPUs out: rsmi4-7 keep ROCm's numbers, the bus order gives 0-3
    "tioga-gpus-on-numa-0-and-2-only": "rsmi4-7 numbered 0-3 by bus order without rsmi",
    # ROCm numbers these GPUs in its own order (rsmi0 at 63:00.0): without rsmi, the bus order
    "corona-rsmi-order-is-not-the-bus-order": "ROCR indexes guessed from the bus order",
}


@pytest.mark.slow  # 60 plans of re-written XMLs: ~10 s
@pytest.mark.parametrize("kind", ["bare", "pocl", "opencl"])
@pytest.mark.parametrize("case", VARIANT_CASES, ids=[c["id"] for c in VARIANT_CASES])
def test_gpu_plugins_do_not_change_the_plan(
    case: dict[str, Any], kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27 item 5: every GPU case plans exactly as its original (ranks, CPUs, GPUs by
    bus id, indexes, NICs, variables) with its GPU OS devices removed, with a CPU OpenCL
    device added, and with its GPUs seen only as OpenCL devices outside their PCI devices."""
    src = topology_path(case["topology"])
    code, doc, err = plan_json(capsys, src, *case["args"])
    assert code == 0, err
    changed = variant(src, kind, tmp_path / f"{kind}.xml")
    code, other, err = plan_json(capsys, changed, *case["args"])
    assert code == 0, err
    if kind != "pocl" and case["id"] in WITHOUT_OSDEVS_DIFFERS:
        assert without_names(other) != without_names(doc), WITHOUT_OSDEVS_DIFFERS[case["id"]]
        return
    assert without_names(other) == without_names(doc)


def test_lists_of_thousands_of_gpus_are_bounded_in_notes_and_errors() -> None:
    """Issue 37 item 23: 4,096 GPUs near one core (a 44 KB error line): 8 named, "and N more"."""
    from plans import plan_of

    from topobind.errors import TopobindError
    from topobind.topo.devices import Devices, Gpu

    topo = load("synthetic:pack:1 core:2 pu:1")

    def gpu(i: int, pus: tuple[int, ...]) -> Gpu:
        bus = f"{i >> 8:04x}:{i & 0xFF:02x}:00.0"
        return Gpu(f"rsmi{i}", (), i, bus, "1002", None, pus, (0,), "Core", None)

    far = tuple(gpu(i, (7,)) for i in range(4096))  # near no usable core
    plan = plan_of(topo.replace(devices=Devices(gpus=(gpu(5000, (0,)), *far))), "per-gpu")
    assert max(len(n) for n in plan.notes) < 400
    assert any("and 4088 more" in n for n in plan.notes)
    crowd = tuple(gpu(i, (0,)) for i in range(4096))
    with pytest.raises(TopobindError) as err:
        plan_of(topo.replace(devices=Devices(gpus=crowd)), "per-gpu", ranks=4096)
    assert len(str(err.value)) < 400
