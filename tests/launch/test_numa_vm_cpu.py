"""The QEMU guest's CPU (scripts/numa-vm) is one fixed model without AVX, on any host: the tier
of tests/launch/test_numa_vm.py died with SIGILL on an Intel AVX-512 host (binaries built
there with -march=native, TCG's 'max' CPU without AVX-512) and passed on an AVX2 host (TCG
emulates AVX2). No guest is booted here (--dry-run)."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest
from paths import REPO

NUMA_VM = REPO / "scripts" / "numa-vm"


def guest_cpu(shape: str) -> str:
    """The -cpu QEMU gets for SHAPE (the last one wins over virtme-ng's own '-cpu max')."""
    env = {**os.environ, "NUMA_VM_KERNEL": "/dev/null"}  # any readable file: nothing boots
    out = subprocess.run(
        [str(NUMA_VM), "run", "--shape", shape, "--dry-run", "--", "true"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    argv = shlex.split(out.stdout.splitlines()[0])
    qemu = shlex.split(argv[argv.index("--qemu-opts") + 1])
    cpus = [qemu[i + 1] for i, a in enumerate(qemu) if a == "-cpu"]
    assert cpus, f"{shape}: no -cpu, virtme-ng's 'max' (AVX2 under QEMU 7.2's TCG) would be used"
    return cpus[-1]


@pytest.mark.parametrize("shape", ["numa4", "sockets2"])
def test_the_guest_cpu_is_fixed_and_has_no_avx(shape: str) -> None:
    cpu = guest_cpu(shape)
    model, *features = cpu.split(",")
    assert model == "qemu64", cpu  # not 'max' or 'host': those follow QEMU and the host
    assert not [f for f in features if "avx" in f and not f.startswith("-")], cpu
    assert {"+sse4.2", "+popcnt", "+ssse3"} <= set(features), cpu  # x86-64-v2 userland
    # sockets2 needs an Intel vendor for its SMT threads (CPUID leaf 0xB); numa4 keeps the AMD
    # one, whose L3 is one per NUMA node (4 L3 domains, as the tier expects)
    assert ("vendor=GenuineIntel" in features) == (shape == "sockets2"), cpu
