"""The stand-in GPU libraries the tests write (where no real GPU exists, libraries that follow
the vendor's rules are the tests): CUDA's driver and HIP (``launch/fake_libcuda.c``,
``launch/fake_libamdhip64.c``), NVML and ROCm SMI (``topo/fake_libnvidia_ml.c``,
``topo/fake_librocm_smi64.c``), each on ``fake_gpu_faults.h`` (the faults they play: hangs,
crashes, error codes, garbage). One compile rule for all: :func:`build_stand_in`."""

from __future__ import annotations

import subprocess
from pathlib import Path

TESTS = Path(__file__).parent
#: the soname a runtime loads -> the stand-in's source
SOURCES = {
    "libcuda.so.1": TESTS / "launch" / "fake_libcuda.c",
    "libamdhip64.so.6": TESTS / "launch" / "fake_libamdhip64.c",
    "libnvidia-ml.so.1": TESTS / "topo" / "fake_libnvidia_ml.c",
    "librocm_smi64.so.7": TESTS / "topo" / "fake_librocm_smi64.c",
}


def build_stand_in(lib: Path, soname: str, *flags: str) -> Path:
    """The stand-in of ``soname`` compiled into the folder ``lib`` (made when missing), with
    extra compiler ``flags`` (``-DTB_FAKE_UNLOADABLE``); returns ``lib`` (for
    ``LD_LIBRARY_PATH``: several stand-ins may share it)."""
    lib.mkdir(parents=True, exist_ok=True)
    cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-I", str(TESTS)]
    cmd = [*cc, *flags, "-o", str(lib / soname), str(SOURCES[soname])]
    subprocess.run(cmd, check=True, timeout=120)
    return lib
