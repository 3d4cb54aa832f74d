"""A live node's GPU sources when they misbehave (issue 37 items 6, 12, 14, 19, 23, 24): GPUs
bound to vfio-pci or to no driver, FIFOs and /dev/zero in the sysfs/procfs trees, bad
local_cpulist and numa_node files, hostile text, and NVML / ROCm SMI that hang, crash or
answer garbage (the stand-ins fake_libnvidia_ml.c and fake_librocm_smi64.c)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, run_topobind
from fuzzing import bounded
from gpu_stand_ins import build_stand_in
from test_gpu_live import UUID0, pci_function

from topobind.topo import gpu_live
from topobind.topo.gpus import Gpu, Inventory
from topobind.topo.topology import parse_list

NV = ("0000:41:00.0", "0000:42:00.0", "0000:43:00.0")


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    sys_root, proc_root = tmp_path / "sys", tmp_path / "proc"
    (sys_root / "bus" / "pci" / "devices").mkdir(parents=True)
    (proc_root / "driver" / "nvidia" / "gpus").mkdir(parents=True)
    monkeypatch.setenv(gpu_live.SYSFS_ENV, str(sys_root))
    monkeypatch.setenv(gpu_live.PROCFS_ENV, str(proc_root))
    monkeypatch.setenv(gpu_live.LIBS_ENV, "0")
    return sys_root, proc_root


def inventory(inv: Inventory | None = None) -> Inventory:
    inv = Inventory() if inv is None else inv
    with bounded(20):
        return gpu_live.live_inventory(inv, {0, 1}, {0}, parse_list)


def hwloc_gpu(bus: str, index: int) -> Gpu:
    return Gpu(f"nvidia{index}", (), index, bus, "10de", None, (0,), (0,), "Package")


# ------------------------------------------------------------------ item 6: unbound GPUs
@pytest.mark.parametrize("driver", ["vfio-pci", None])
def test_a_gpu_bound_to_no_gpu_driver_takes_no_index(
    trees: tuple[Path, Path], driver: str | None
) -> None:
    """The middle one of three NVIDIA GPUs is passed to a VM (vfio-pci) or unbound: the third
    is CUDA device 1, not 2, whether hwloc listed all three or sysfs alone found them."""
    sys_root, _ = trees
    for bus in NV:
        bound = driver if bus == NV[1] else "nvidia"
        extra = {"driver": bound} if bound else {}
        pci_function(sys_root, bus, "030200", "10de", local_cpulist="0-1", numa_node="0", **extra)
    for inv in (Inventory(), Inventory(tuple(hwloc_gpu(b, i) for i, b in enumerate(NV)))):
        got = inventory(inv)
        assert [(g.pci, g.index) for g in got.gpus] == [(NV[0], 0), (NV[2], 1)]
        (note,) = [n for n in got.notes if NV[1] in n]
        assert ("bound to vfio-pci" if driver else "bound to no driver") in note
        assert "take no index" in note


#: (vendor, its runtime's driver, a display driver of the same vendor no runtime uses)
DISPLAY = [
    pytest.param("10de", "nvidia", "nouveau", id="nvidia-nouveau"),
    pytest.param("1002", "amdgpu", "radeon", id="amd-radeon"),
    pytest.param("10de", "nvidia", "amdgpu", id="nvidia-on-amdgpu"),
]


@pytest.mark.parametrize(("vendor", "runtime", "display"), DISPLAY)
@pytest.mark.parametrize("cls", ["030200", "030000"])  # a 3D controller, a VGA function
def test_a_gpu_on_a_display_driver_takes_no_index(
    trees: tuple[Path, Path], vendor: str, runtime: str, display: str, cls: str
) -> None:
    """The middle one of three GPUs is bound to nouveau (radeon): CUDA (HIP) never sees it,
    so the third is device 1, not 2; the listing says why it is left out."""
    sys_root, _ = trees
    for bus in NV:
        driver = display if bus == NV[1] else runtime
        pci_function(sys_root, bus, cls, vendor, driver=driver, local_cpulist="0-1",
                     numa_node="0")  # fmt: skip
    hwloc = tuple(hwloc_gpu(b, i)._replace(vendor=vendor) for i, b in enumerate(NV))
    for inv in (Inventory(), Inventory(hwloc)):
        got = inventory(inv)
        assert [(g.pci, g.index) for g in got.gpus] == [(NV[0], 0), (NV[2], 1)]
        (note,) = [n for n in got.notes if NV[1] in n]
        assert f"{NV[1]} (bound to {display})" in note and "take no index" in note


@pytest.mark.slow
def test_show_lists_a_gpu_on_nouveau_with_its_note(trees: tuple[Path, Path]) -> None:
    sys_root, proc_root = trees
    for bus, driver in zip(NV[:2], ("nvidia", "nouveau"), strict=True):
        pci_function(sys_root, bus, "030200", "10de", driver=driver, local_cpulist="0-1",
                     numa_node="0")  # fmt: skip
    env = {**NO_SLURM, gpu_live.SYSFS_ENV: str(sys_root), gpu_live.PROCFS_ENV: str(proc_root),
           gpu_live.LIBS_ENV: "0"}  # fmt: skip
    done = run_topobind("show", env=env)
    assert done.returncode == 0, done.stderr
    assert f"index 0, PCI {NV[0]}" in done.stdout and f"PCI {NV[1]}," not in done.stdout
    (line,) = [ln for ln in (done.stdout + done.stderr).splitlines() if NV[1] in ln]
    assert "bound to nouveau" in line and "nvidia for CUDA" in line, line


def test_an_unbound_gpu_that_procfs_lists_is_kept(trees: tuple[Path, Path]) -> None:
    sys_root, proc_root = trees
    pci_function(sys_root, NV[0], "030200", "10de", local_cpulist="0-1")
    info = proc_root / "driver" / "nvidia" / "gpus" / NV[0]
    info.mkdir()
    (info / "information").write_text(f"Model: H100\nGPU UUID: {UUID0}\n")
    got = inventory()
    assert [(g.pci, g.index) for g in got.gpus] == [(NV[0], 0)]
    assert not any("driver" in n for n in got.notes)


# -------------------------------------------------------------- item 14: reads are bounded
@pytest.mark.parametrize("name", ["class", "vendor", "local_cpulist", "numa_node"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_fifo_or_dev_zero_in_sysfs_neither_hangs_nor_floods(
    trees: tuple[Path, Path], name: str, kind: str
) -> None:
    sys_root, _ = trees
    pci_function(sys_root, NV[0], "030200", "10de", driver="nvidia", local_cpulist="0-1",
                 numa_node="0")  # fmt: skip
    pci_function(sys_root, NV[1], "030200", "10de", driver="nvidia", local_cpulist="0-1",
                 numa_node="0")  # fmt: skip
    path = sys_root / "bus" / "pci" / "devices" / NV[0] / name
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    got = inventory()
    assert NV[1] in [g.pci for g in got.gpus]


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_fifo_or_dev_zero_in_procfs_neither_hangs_nor_floods(
    trees: tuple[Path, Path], kind: str
) -> None:
    sys_root, proc_root = trees
    pci_function(sys_root, NV[0], "030200", "10de", driver="nvidia", local_cpulist="0-1")
    info = proc_root / "driver" / "nvidia" / "gpus" / NV[0]
    info.mkdir()
    if kind == "fifo":
        os.mkfifo(info / "information")
    else:
        (info / "information").symlink_to("/dev/zero")
    assert [g.pci for g in inventory().gpus] == [NV[0]]


# ------------------------------------------------------- item 19: a bad local_cpulist
@pytest.mark.parametrize("text", ["zz-qq", "0-4294967295", "٠-٣", "1-0", "-1"])
def test_a_bad_local_cpulist_leaves_that_gpu_out_naming_the_file(
    trees: tuple[Path, Path], text: str
) -> None:
    sys_root, _ = trees
    pci_function(sys_root, NV[0], "030200", "10de", driver="nvidia", local_cpulist=text,
                 numa_node="0")  # fmt: skip
    pci_function(sys_root, NV[1], "030200", "10de", driver="nvidia", local_cpulist="1",
                 numa_node="0")  # fmt: skip
    got = inventory()
    assert [(g.pci, g.index, g.pus) for g in got.gpus] == [(NV[0], 0, ()), (NV[1], 1, (1,))]
    (note,) = [n for n in got.notes if "local_cpulist" in n and "not a CPU list" in n]
    assert str(sys_root / "bus" / "pci" / "devices" / NV[0] / "local_cpulist") in note
    assert all(" " <= c <= "~" for c in note)
    assert got.gpus[0].near == "unknown"


# ------------------------------------------------- items 23, 24: what is printed is true
@pytest.mark.parametrize(
    ("numa", "said"),
    [("99999999", "says numa_node '99999999', no NUMA node of this machine"),
     (None, "has no numa_node file"), ("-1", "says numa_node -1 (the firmware does not tell)"),
     ("7", "says numa_node '7', no NUMA node of this machine")],
)  # fmt: skip
def test_the_numa_note_says_what_sysfs_said(
    trees: tuple[Path, Path], numa: str | None, said: str
) -> None:
    sys_root, _ = trees
    files = {"numa_node": numa} if numa is not None else {}
    pci_function(sys_root, NV[0], "030200", "10de", driver="nvidia", local_cpulist="0", **files)
    (note,) = inventory().notes
    assert note.startswith(f"GPU {NV[0]}: sysfs {said}, so its NUMA node is unknown")


def test_a_gpu_from_procfs_only_is_not_near_sysfs_and_its_text_is_escaped(
    trees: tuple[Path, Path],
) -> None:
    _, proc_root = trees
    info = proc_root / "driver" / "nvidia" / "gpus" / NV[0]
    info.mkdir()
    evil_uuid = "GPU-\x1b[2J-1111"
    (info / "information").write_text(f"Model: H\x1b[31mX\x07\nGPU UUID: {evil_uuid}\n")
    (gpu,) = inventory().gpus
    assert gpu.near == "unknown" and gpu.uuid is None
    assert gpu.model == "H\\x1b[31mX\\x07"


def test_long_lists_of_left_out_gpus_are_bounded(trees: tuple[Path, Path]) -> None:
    sys_root, _ = trees
    for i in range(40):
        pci_function(sys_root, f"0000:{i + 16:02x}:00.0", "030200", "10de", driver="vfio-pci")
    (note,) = inventory().notes
    assert note.count("bound to vfio-pci") == 8 and "and 32 more" in note and len(note) < 600


# ------------------------------------------- item 12: libraries asked in a bounded child
def test_a_query_that_hangs_crashes_or_fails_is_left_out_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import signal

    monkeypatch.setenv(gpu_live.LIBS_TIMEOUT_ENV, "0.3")

    def hang() -> list[gpu_live.LiveGpu]:
        time.sleep(60)
        return []

    def crash() -> list[gpu_live.LiveGpu]:
        os.kill(os.getpid(), signal.SIGSEGV)
        return []

    def garbage() -> list[gpu_live.LiveGpu]:
        return [gpu_live.LiveGpu("not a bus id", "10de")]

    def fine() -> list[gpu_live.LiveGpu]:
        return [gpu_live.LiveGpu(NV[0], "10de", uuid=UUID0, mig=("MIG-1",), source="NVML")]

    for query, said in [(hang, "NVML did not answer within 0.3 s"),
                        (crash, "NVML crashed (signal 11)"),
                        (garbage, "NVML answered what topobind cannot read")]:  # fmt: skip
        notes: list[str] = []
        t0 = time.monotonic()
        with bounded(20):
            assert gpu_live.bounded_query(query, "NVML", notes) == []
        assert time.monotonic() - t0 < 10
        (note,) = notes
        assert note.startswith(said) and "TOPOBIND_GPU_LIBS=0" in note
    notes = []
    assert gpu_live.bounded_query(fine, "NVML", notes) == fine() and not notes


def test_the_library_timeout_setting_is_read_safely(monkeypatch: pytest.MonkeyPatch) -> None:
    for text, want in [("0.5", 0.5), ("abc", 10.0), ("-1", 10.0), ("nan", 10.0), ("١", 10.0),
                       ("1e9", 10.0)]:  # fmt: skip
        monkeypatch.setenv(gpu_live.LIBS_TIMEOUT_ENV, text)
        assert gpu_live._libs_timeout() == want


NVML_CALLS = ("nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
              "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetUUID", "nvmlDeviceGetMigMode")  # fmt: skip
RSMI_CALLS = ("rsmi_init", "rsmi_num_monitor_devices", "rsmi_dev_pci_id_get",
              "rsmi_dev_unique_id_get")  # fmt: skip
#: run in one Python process: each case sets the stand-ins' variables, asks both libraries
CASES = """
import json, os, sys, time
from topobind.topo import gpu_live
out = []
for case in json.loads(sys.argv[1]):
    for k in [k for k in os.environ if k.startswith(("TB_FAKE_NVML_", "TB_FAKE_RSMI_"))]:
        if not k.endswith("_GPUS"):
            del os.environ[k]
    os.environ.update(case)
    notes = []
    t0 = time.monotonic()
    got = gpu_live.bounded_query(gpu_live.nvml_gpus, "NVML", notes)
    got += gpu_live.bounded_query(gpu_live.rocm_smi_gpus, "ROCm SMI", notes)
    out.append([[list(g) for g in got], notes, time.monotonic() - t0])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_nvml_and_rocm_smi_faults_in_each_call(tmp_path: Path) -> None:
    """The stand-in NVML and ROCm SMI hang or crash in each call, fail, count 2^32-1, write
    garbage UUIDs: never a hang (0.3 s bound), never a crash of topobind, a note each."""
    build_stand_in(tmp_path / "lib", "libnvidia-ml.so.1")
    lib = build_stand_in(tmp_path / "lib", "librocm_smi64.so.7")
    cases: list[dict[str, str]] = [{}]
    for kind in ("HANG", "CRASH"):
        cases += [{f"TB_FAKE_NVML_{kind}": c} for c in NVML_CALLS]
        cases += [{f"TB_FAKE_RSMI_{kind}": c} for c in RSMI_CALLS]
    cases += [{"TB_FAKE_NVML_FAIL": "nvmlInit_v2=-5", "TB_FAKE_RSMI_FAIL": "rsmi_init=8"},
              {"TB_FAKE_NVML_COUNT": "4294967295", "TB_FAKE_RSMI_COUNT": "4294967295"},
              {"TB_FAKE_NVML_GARBAGE": "uuid"},
              {"TB_FAKE_NVML_FAIL": "nvmlDeviceGetPciInfo_v3@0=999"}]  # fmt: skip
    env = {**NO_SLURM, "LD_LIBRARY_PATH": str(lib), gpu_live.LIBS_TIMEOUT_ENV: "0.3",
           "TB_FAKE_NVML_GPUS": f"{NV[0]}={UUID0}",
           "TB_FAKE_RSMI_GPUS": "0000:c1:00.0=4a7c"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", CASES, json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    nvml = [NV[0], "10de", None, None, UUID0, None, None, [], "NVML", None]
    rsmi = ["0000:c1:00.0", "1002", None, None, "4a7c", None, 0, [], "ROCm SMI", None]
    assert results[0] == [[nvml, rsmi], [], results[0][2]]
    for case, (got, notes, took) in zip(cases[1:], results[1:], strict=True):
        assert took < 20, case
        (key, call), *_ = case.items()
        lib_name = "NVML" if "NVML" in key else "ROCm SMI"
        if key.endswith("_HANG"):
            assert f"{lib_name} did not answer within 0.3 s" in " ".join(notes), case
        elif key.endswith("_CRASH"):
            assert f"{lib_name} crashed (signal 11)" in " ".join(notes), case
        elif key.endswith("_FAIL") and "@" in call:  # an unreadable GPU: no UUID from NVML
            assert got == [rsmi] and notes == [], case
        elif key.endswith("_FAIL"):
            assert got == [] and notes == [], case  # an init that fails: no GPUs from it
        elif key.endswith("_COUNT"):
            assert got == [nvml, rsmi] and notes == [], case
        else:  # garbage UUIDs are dropped
            assert got == [nvml[:4] + [None] + nvml[5:], rsmi] and notes == [], case


@pytest.mark.slow
@pytest.mark.parametrize("command", [["show"], ["plan", "-l", "per-gpu", "-f", "json"], ["env"]])
def test_a_stuck_nvml_never_hangs_a_command(tmp_path: Path, command: list[str]) -> None:
    """topobind show/plan/env on this machine with a fake NVIDIA GPU in sysfs and an NVML
    whose init never returns: the command goes on without it, with a note."""
    from topobind.topo.topology import load

    lib = build_stand_in(tmp_path / "lib", "libnvidia-ml.so.1")
    sys_root = tmp_path / "sys"
    cpus = ",".join(map(str, load("live").pus))
    pci_function(sys_root, NV[0], "030200", "10de", driver="nvidia", local_cpulist=cpus,
                 numa_node="0")  # fmt: skip
    env = {gpu_live.SYSFS_ENV: str(sys_root), gpu_live.PROCFS_ENV: str(tmp_path / "proc"),
           "LD_LIBRARY_PATH": str(lib), "TB_FAKE_NVML_HANG": "nvmlInit_v2",
           gpu_live.LIBS_TIMEOUT_ENV: "0.5"}  # fmt: skip
    t0 = time.monotonic()
    done = run_topobind(*command, env=env)
    assert time.monotonic() - t0 < 60
    assert done.returncode == 0, done.stderr
    if command != ["env"]:  # env of a CPU layout prints no GPU note
        assert "NVML did not answer within 0.5 s" in done.stdout + done.stderr


def test_one_numa_note_for_many_gpus_that_say_the_same(trees: tuple[Path, Path]) -> None:
    """A cloud VM's 40 GPUs all with numa_node -1: one note, 8 named, not 40 lines."""
    sys_root, _ = trees
    for i in range(40):
        pci_function(sys_root, f"0000:{i + 16:02x}:00.0", "030200", "10de", driver="nvidia",
                     local_cpulist="0-1", numa_node="-1")  # fmt: skip
    got = inventory()
    assert len(got.gpus) == 40
    (note,) = got.notes
    assert note.startswith("GPUs 0000:10:00.0, 0000:11:00.0")
    assert "and 32 more: sysfs says numa_node -1 (the firmware does not tell)" in note
