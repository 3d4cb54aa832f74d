"""latency's NUMA matrices on a real 4-NUMA kernel (the QEMU guest of scripts/numa-vm, shape
numa4): every row measured, and ``--bw-local`` measures the diagonal only. Before the fix
only row 0 was: the matrix loops pinned the main thread to a CPU of node 0 and then asked
which CPUs of node 1 the (now pinned) thread may use: none, so rows 1-3 were null. The
guest's speed means nothing (no KVM); the rows' being measured does."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

pytestmark = [
    pytest.mark.vm,
    pytest.mark.slow,
    pytest.mark.skipif(
        platform.machine() != "x86_64" or sys.platform != "linux",
        reason="the guest is an x86_64 QEMU system booting this machine's Linux userland",
    ),
]
BUILD = "cc -std=c11 -D_GNU_SOURCE -fopenmp -O2 -march=x86-64 -mtune=generic"  # the baseline


def test_every_row_of_the_numa_matrices_is_measured_in_the_guest(tmp_path: Path) -> None:
    if not (REPO / "build" / "vng" / "bin" / "vng").exists() or shutil.which("cc") is None:
        pytest.skip("the guest needs 'make numa-vm-setup' and a C compiler")
    tmp_path.chmod(0o755)  # the guest's root reads it
    exe = tmp_path / "latency"
    subprocess.run([*BUILD.split(), f"-I{REPO}/libtb/include", str(REPO / "kernels/latency.c"),
                    str(REPO / "libtb/build/libtb.a"), "-fopenmp", "-lm", "-o", str(exe)],
                   check=True, timeout=120)  # fmt: skip
    kernel = f"{exe} --sizes 256K --min-time 0.01 --pages 4k --bw-size 8M"
    cmd = (f"{kernel} --matrix --matrix-size 1M --bw-matrix --json {tmp_path}/all.json && "
           f"{kernel} --bw-matrix --bw-local --json {tmp_path}/local.json")  # fmt: skip
    run = subprocess.run([str(REPO / "scripts" / "numa-vm"), "run", "--shape", "numa4",
                          "--timeout", "900", "--rwdir", str(tmp_path), "--", "sh", "-c", cmd],
                         capture_output=True, text=True, timeout=1000)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    full = json.loads((tmp_path / "all.json").read_text())["matrices"]
    for name in ("latency", "read_bw"):
        assert full[name]["rows"] == [0, 1, 2, 3], name
        unmeasured = [(i, j) for i, r in enumerate(full[name]["values"])
                      for j, v in enumerate(r) if v is None]  # fmt: skip
        assert unmeasured == [], f"{name}: not measured at {unmeasured}"
    local = json.loads((tmp_path / "local.json").read_text())
    grid = local["matrices"]["read_bw"]["values"]
    assert [(i, j) for i in range(4) for j in range(4) if grid[i][j] is not None] == [
        (i, i) for i in range(4)
    ]
    assert local["params"]["bw_local"] is True
