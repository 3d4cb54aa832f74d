"""The tests' stand-in CUDA driver (fake_libcuda.c) against a real one: every row that
scripts/gpu-node-check.sh recorded on an H200 node (data/cuda-visible-h200.tsv) is replayed
through the same probe (kernels/bin/whereami) with the stand-in in its place."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest
from test_gpu_launch import fake_libcuda

from topobind.measure.programs import find_kernel

TABLE = Path(__file__).with_name("data") / "cuda-visible-h200.tsv"
BUS, UUID = "0000:00:06.0", "GPU-1c92f46c-f917-aa2d-3259-ec0af58fda3b"  # the node's one GPU


def recorded() -> list[tuple[str | None, str | None, str, int]]:
    """(CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, devices seen, cuInit's result) per row."""
    rows = []
    for line in TABLE.read_text().splitlines()[1:]:
        if line.startswith("#") or line.startswith("CUDA_VISIBLE_DEVICES\t"):
            continue
        visible, order, devices, code = line.split("\t")
        values = [ast.literal_eval(x) for x in (visible, order)]
        v, o = (None if x == "<unset>" else x for x in values)
        rows.append((v, o, devices, int(code)))
    return rows


def seen(lib: Path, tmp_path: Path, visible: str | None, order: str | None) -> tuple[str, int]:
    """What the probe reports with the stand-in driver: devices as in the table, cuInit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
    env |= {"LD_LIBRARY_PATH": str(lib), "TB_FAKE_CUDA_GPUS": f"{BUS}={UUID}=1"}
    env |= {"OMP_NUM_THREADS": "1"}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    if order is not None:
        env["CUDA_DEVICE_ORDER"] = order
    out = tmp_path / "w.json"
    probe = [str(find_kernel("whereami")), "--spin-ms", "0", "--json", str(out)]
    subprocess.run(probe, env=env, check=True, capture_output=True, timeout=60)
    (runtime,) = json.loads(out.read_text())["params"]["gpu_runtimes"]
    devices = ",".join(f"{d['pci'].lower()}/{d['uuid']}" for d in runtime["devices"])
    return devices or "-", runtime.get("code") or 0


def test_the_table_covers_each_rule() -> None:
    rows = recorded()
    assert len(rows) == 120
    assert {code for *_, code in rows} == {0, 100, 101}


def test_fake_libcuda_follows_a_real_driver(tmp_path: Path) -> None:
    lib = fake_libcuda(tmp_path)
    wrong = []
    for visible, order, devices, code in recorded():
        got = seen(lib, tmp_path, visible, order)
        if got != (devices, code):
            wrong.append(
                f"CUDA_VISIBLE_DEVICES={visible!r} CUDA_DEVICE_ORDER={order!r}: "
                f"real {devices} {code}, stand-in {got[0]} {got[1]}"
            )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("code", [100, 101])
def test_the_probe_names_the_drivers_error(tmp_path: Path, code: int) -> None:
    lib = fake_libcuda(tmp_path)
    visible, order = ("1", None) if code == 100 else ("0,0", None)
    _, got = seen(lib, tmp_path, visible, order)
    assert got == code
    (doc,) = json.loads((tmp_path / "w.json").read_text())["params"]["gpu_runtimes"]
    name = "CUDA_ERROR_NO_DEVICE" if code == 100 else "CUDA_ERROR_INVALID_DEVICE"
    assert name in doc["error"]
