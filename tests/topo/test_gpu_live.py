"""A live node's GPUs without hwloc's GPU plugins (issue 27 item 1): fake sysfs and procfs
trees (``TOPOBIND_SYSFS_ROOT``, ``TOPOBIND_PROCFS_ROOT``) with several PCI domains, a BMC
display adapter, ``numa_node`` -1, a VGA function without a driver, a NIC."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, run_topobind
from gpu_stand_ins import build_stand_in

from topobind.plan.gpu_layout import rank_env
from topobind.topo import gpu_live
from topobind.topo.gpus import Inventory
from topobind.topo.topology import load, parse_list

UUID0 = "GPU-11111111-2222-3333-4444-555555555555"


def pci_function(root: Path, bus: str, cls: str, vendor: str, **files: str) -> None:
    d = root / "bus" / "pci" / "devices" / bus
    d.mkdir(parents=True)
    (d / "class").write_text(f"0x{cls}\n")
    (d / "vendor").write_text(f"0x{vendor}\n")
    driver = files.pop("driver", None)
    if driver:
        (root / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        os.symlink(root / "bus" / "pci" / "drivers" / driver, d / "driver")
    for name, text in files.items():
        (d / name).write_text(text + "\n")


def fake_node(tmp_path: Path, cpus: str = "0-1") -> tuple[Path, Path]:
    """sysfs: two NVIDIA GPUs in two PCI domains (one with numa_node -1), an ASPEED BMC
    adapter and an idle NVIDIA VGA function, a NIC; procfs: the first GPU's UUID."""
    sys_root, proc_root = tmp_path / "sys", tmp_path / "proc"
    first = cpus.split("-")[0].split(",")[0]
    pci_function(sys_root, "0001:00:06.0", "030200", "10de", driver="nvidia",
                 local_cpulist=cpus, numa_node="0")  # fmt: skip
    pci_function(sys_root, "0000:41:00.0", "030200", "10de", driver="nvidia",
                 local_cpulist=first, numa_node="-1")  # fmt: skip
    pci_function(sys_root, "0000:02:00.0", "030000", "1a03", driver="ast", local_cpulist=cpus)
    pci_function(sys_root, "0000:03:00.0", "030000", "10de", local_cpulist=cpus)
    pci_function(sys_root, "0000:04:00.0", "020000", "15b3", driver="mlx5_core")
    info = proc_root / "driver" / "nvidia" / "gpus" / "0000:41:00.0"
    info.mkdir(parents=True)
    (info / "information").write_text(
        f"Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t {UUID0}\nBus Location: \t 0000:41:00.0\n"
    )
    return sys_root, proc_root


def test_sysfs_and_procfs_give_the_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys_root, proc_root = fake_node(tmp_path, "0-7")
    monkeypatch.setenv(gpu_live.SYSFS_ENV, str(sys_root))
    monkeypatch.setenv(gpu_live.PROCFS_ENV, str(proc_root))
    monkeypatch.setenv(gpu_live.LIBS_ENV, "0")
    inv = gpu_live.live_inventory(Inventory(), set(range(8)), {0}, parse_list)
    got = [(g.os, g.index, g.pci, g.pus, g.numa, g.uuid, g.sources) for g in inv.gpus]
    assert got == [
        ("nvidia0", 0, "0000:41:00.0", (0,), (), UUID0, ("sysfs", "procfs")),
        ("nvidia1", 1, "0001:00:06.0", tuple(range(8)), (0,), None, ("sysfs",)),
    ]
    assert inv.gpus[0].model == "NVIDIA H100 80GB HBM3"
    (note,) = inv.notes
    assert note.startswith("GPU 0000:41:00.0: sysfs says numa_node -1")


def test_nvml_adds_mig_slices_and_the_plan_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """MIG slices share their parent's bus id: the rank's variable is the slice's UUID."""
    mig = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    live = gpu_live.LiveGpu("0000:41:00.0", "10de", uuid=UUID0, mig=(mig,), source="NVML")
    sysfs = gpu_live.LiveGpu("0000:41:00.0", "10de", (0,), 0)
    monkeypatch.setattr(gpu_live, "sysfs_gpus", lambda root, parse, notes: [sysfs])
    monkeypatch.setattr(gpu_live, "procfs_gpus", lambda root: [])
    monkeypatch.setattr(gpu_live, "nvml_gpus", lambda: [live])
    monkeypatch.delenv(gpu_live.LIBS_ENV, raising=False)
    inv = gpu_live.live_inventory(Inventory(), {0}, {0}, parse_list)
    (gpu,) = inv.gpus
    assert gpu.mig == (mig,) and gpu.sources == ("sysfs", "NVML") and gpu.uuid == UUID0
    assert rank_env([gpu], None) == {"CUDA_VISIBLE_DEVICES": mig, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_show_and_per_gpu_on_a_live_node_without_plugins(tmp_path: Path) -> None:
    """This machine (no GPU) with the fake trees: `show` lists the GPUs with their source,
    per-gpu plans them in bus order, domain first."""
    cpus = ",".join(map(str, load("live").pus))
    sys_root, proc_root = fake_node(tmp_path, cpus)
    env = {**NO_SLURM, gpu_live.SYSFS_ENV: str(sys_root), gpu_live.PROCFS_ENV: str(proc_root),
           gpu_live.LIBS_ENV: "0"}  # fmt: skip
    done = run_topobind("show", env=env)
    assert done.returncode == 0, done.stderr
    assert (
        f"GPU nvidia0 (index 0, PCI 0000:41:00.0, vendor 10de, NVIDIA H100 80GB HBM3, {UUID0})"
        in (done.stdout)
    )
    assert "found by sysfs, procfs" in done.stdout and "found by sysfs\n" in done.stdout + "\n"
    assert "0000:02:00.0" not in done.stdout and "0000:03:00.0" not in done.stdout
    done = run_topobind("plan", "-l", "per-gpu", "-f", "json", env=env)
    if len(load("live").cores) < 2:
        pytest.skip("needs 2 usable cores")
    assert done.returncode == 0, done.stderr
    ranks = json.loads(done.stdout)["ranks"]
    assert [[g["pci"] for g in r["gpus"]] for r in ranks] == [["0000:41:00.0"], ["0001:00:06.0"]]
    assert [r["env"]["CUDA_VISIBLE_DEVICES"] for r in ranks] == ["0", "1"]


def test_nvml_through_ctypes_gives_uuids_and_mig_slices(tmp_path: Path) -> None:
    """gpu_live.nvml_gpus against a stand-in libnvidia-ml.so.1 (tests/topo/
    fake_libnvidia_ml.c): NVML's 8-digit domains normalised, UUIDs, MIG slices' UUIDs; and
    topobind show on this machine with the fake sysfs tree lists them, found by NVML."""
    import subprocess
    import sys

    lib = build_stand_in(tmp_path / "lib", "libnvidia-ml.so.1")
    mig = ("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "MIG-ffffffff-bbbb-cccc-dddd-eeeeeeeeeeee")
    uuid1 = "GPU-99999999-8888-7777-6666-555555555555"
    nvml = f"0000:41:00.0={UUID0}={','.join(mig)};0001:00:06.0={uuid1}"
    env = {**NO_SLURM, "LD_LIBRARY_PATH": str(lib), "TB_FAKE_NVML_GPUS": nvml}
    code = "from topobind.topo.gpu_live import nvml_gpus; print([tuple(g) for g in nvml_gpus()])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(
        [
            ("0000:41:00.0", "10de", None, None, UUID0, None, None, mig, "NVML", None),
            ("0001:00:06.0", "10de", None, None, uuid1, None, None, (), "NVML", None),
        ]
    )
    cpus = ",".join(map(str, load("live").pus))
    sys_root, proc_root = fake_node(tmp_path, cpus)
    env |= {gpu_live.SYSFS_ENV: str(sys_root), gpu_live.PROCFS_ENV: str(proc_root)}
    shown = run_topobind("show", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"MIG {','.join(mig)}): near sysfs" in shown.stdout
    assert "found by sysfs, procfs, NVML" in shown.stdout
    assert f"{uuid1}): near sysfs" in shown.stdout
