"""What pyproject.toml cannot say: the C parts and the shipped data of a wheel.

A wheel (``pip wheel .``, ``pip install .``; not an editable install, which keeps the plain
``src/`` path and the checkout's own ``make kernels``) carries, inside the package:

- ``topobind/kernels/bin/``: the kernels (stream, latency, c2c, dgemm when OpenBLAS is found)
  and the placement probes (whereami; whereami-mpi when an MPI compiler wrapper is found),
  built by ``kernels/Makefile``;
- ``topobind/rankstep/bin/``: rankexec, the hugepage shim libtbhugepages.so, tb-bigalloc and
  tb-evidence (the evidence around a program), built by ``rankstep/Makefile``;
- both link ``libtb/`` (the C library, ``libtb/Makefile``), built once into the scratch folder
  (``LIBTB_BUILD``) by the first part's make and found up to date by the second's;
- ``topobind/site_configs/``, ``topobind/reframe_tests/``, ``topobind/topologies/``: copies of
  the repository's folders (``topobind.paths.shipped`` finds them).

Everything is built for the architecture's baseline (``libtb/baseline.mk``: x86-64,
``-mtune=generic``), never ``-march=native``: a wheel runs on machines it was not built on.
The project's own Makefiles build it (docs/contributing/packaging.md says why).
``TOPOBIND_BUILD_C=0`` leaves the C parts out (Spack's recipe builds them with its own
compilers and libraries into the prefix's bin/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA = ("site_configs", "reframe_tests", "topologies")
#: a machine's own files in a checkout, never shipped
LEFT_OUT = ("__pycache__", "*.pyc", "spack-packages.yaml", "references.yaml")
#: (Makefile folder, programs the wheel must have, programs it has when their library is found)
C_PARTS = (
    ("kernels", ("stream", "latency", "c2c", "whereami"), ("dgemm", "whereami-mpi")),
    ("rankstep", ("rankexec", "libtbhugepages.so", "tb-bigalloc", "tb-evidence"), ()),
)


def build_c(package: Path, scratch: Path) -> None:
    """Build each C part with its Makefile into ``scratch``, for the baseline; copy what was
    built into ``package/<part>/bin``. A missing required program stops the build."""
    jobs = str(min(os.cpu_count() or 1, 8))
    for part, required, optional in C_PARTS:
        bin_dir, build_dir = scratch / part / "bin", scratch / part / "build"
        argv = ["make", "-k", "-j", jobs, "-C", str(HERE / part), f"BIN={bin_dir}",
                f"BUILD={build_dir}", f"LIBTB_BUILD={scratch / 'libtb'}",
                "CFLAGS=-O3 $(STEP_ARCH)"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        missing = [p for p in required if not (bin_dir / p).is_file()]
        if missing:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"topobind: building {part}/ gave no {', '.join(missing)}")
        for name in optional:
            if not (bin_dir / name).is_file():
                print(f"topobind: {part}/{name} not built (its library was not found)")
        dest = package / part / "bin"
        dest.mkdir(parents=True, exist_ok=True)
        for program in (*required, *optional):
            if (bin_dir / program).is_file():
                shutil.copy2(bin_dir / program, dest / program)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # a checkout: its own folders and make kernels
            return
        package = Path(self.build_lib) / "topobind"
        for name in DATA:
            shutil.copytree(HERE / name, package / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(*LEFT_OUT))  # fmt: skip
        if os.environ.get("TOPOBIND_BUILD_C") == "0":  # Spack's recipe builds and installs them
            return
        with tempfile.TemporaryDirectory(prefix="topobind-c-") as scratch:
            build_c(package, Path(scratch))


class WithPrograms(Distribution):
    """Platform files: the package goes to platlib, the wheel is not pure."""

    def has_ext_modules(self) -> bool:
        return True


def commands() -> dict[str, type]:
    """build_py, and bdist_wheel tagged py3-none-PLATFORM (one wheel per platform for any
    Python 3: the C parts are programs, not extensions) where a bdist_wheel exists
    (setuptools >= 70.1, else the wheel package; an sdist needs neither)."""
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        try:
            from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]
        except ImportError:
            return {"build_py": BuildPy}

    class BdistWheel(bdist_wheel):  # type: ignore[misc,valid-type]
        def get_tag(self) -> tuple[str, str, str]:
            return ("py3", "none", super().get_tag()[2])

    return {"build_py": BuildPy, "bdist_wheel": BdistWheel}


setup(distclass=WithPrograms, cmdclass=commands())
