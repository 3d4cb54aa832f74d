"""docs/gpu.md shows real output and its pictures are current; the device picture puts every
GPU and NIC in the box of its locality and gives each GPU its rank's colour."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import REPO, TOPOLOGIES
from plans import plan_of

from topobind.draw.boxes import rank_colour
from topobind.draw.device_badges import _tree, draw_gpu_png
from topobind.topo.devices import Devices
from topobind.topo.topology import load

pytestmark = pytest.mark.slow

TIOGA = TOPOLOGIES / "gpu" / "mpibind-eas-tioga.xml"
LASSEN = TOPOLOGIES / "gpu" / "mpibind-coral-lassen.xml"


def _need(path: Path) -> None:
    if not path.exists():
        pytest.fail(f"{path} not found: the repository's topologies/ is incomplete")


def test_gpu_doc_is_current() -> None:
    _need(TIOGA)
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen-gpu-doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _colour_pixels(png: bytes, colour: str) -> int:
    import matplotlib.image

    img = (matplotlib.image.imread(io.BytesIO(png))[..., :3] * 255).round().astype(int)
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return int((np.abs(img - rgb).sum(axis=2) <= 6).sum())


def test_devices_drawn_in_the_box_of_their_locality() -> None:
    _need(TIOGA)
    plan = plan_of(load(str(TIOGA)), "per-gpu")
    homes = {}
    stack = list(_tree(plan))
    while stack:
        box = stack.pop()
        homes.update({d.os: box for d in box.devices})
        stack.extend(box.children)
    for dev in (*plan.topology.devices.gpus, *plan.topology.devices.nics):
        assert homes[dev.os].kind == "l3" and homes[dev.os].pus == frozenset(dev.pus)
    lassen = plan_of(load(str(LASSEN)), "per-gpu")
    (pkg0, _pkg1) = _tree(lassen)
    assert [d.os for d in pkg0.devices] == ["cuda0", "cuda1", "mlx5_0", "mlx5_1"]


def test_each_gpu_badge_has_its_ranks_colour() -> None:
    """7 cores and one GPU badge per rank in the rank's colour: removing the GPUs from the
    plan removes one badge's worth of that colour per rank."""
    _need(TIOGA)
    opts = {"reserve": "first-core-per-l3"}
    plan = plan_of(load(str(TIOGA)), "per-gpu", threads=7, options=opts)
    png = draw_gpu_png(plan)
    assert png.startswith(b"\x89PNG")
    no_devices = plan.topology.replace(devices=Devices())
    gpu_less = plan._replace(topology=no_devices)
    bare = draw_gpu_png(gpu_less)
    for r in plan.ranks:
        with_gpu = _colour_pixels(png, rank_colour(r.rank))
        without = _colour_pixels(bare, rank_colour(r.rank))
        assert with_gpu > without * 1.15, (r.rank, with_gpu, without)
