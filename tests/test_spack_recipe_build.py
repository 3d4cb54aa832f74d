"""The recipe's own build and install steps, run here without Spack.

Spack cannot be installed on this machine, so this test loads
spack/spack_repo/topobind/packages/topobind/package.py with a small stand-in for the parts
of Spack's package API it uses (``make``, ``install``, ``install_tree``, ``working_dir``,
``spec[...]``, ``prefix.bin``, ...), stages a copy of the project as Spack would (never
building in the checkout), and runs the phases in Spack's order: ``build_kernels`` (run
before install), the pip install of PythonPackage (with PythonPipBuilder's arguments), then
``install_kernels_and_data``. The installed tree must work: the kernels run, the launchers
and data are in place, and ``topobind`` runs from the prefix with the environment that
``setup_run_environment`` sets. What it cannot show: that Spack's real concretizer, compiler
wrappers and OpenBLAS/OpenMPI specs behave like these stand-ins.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from topobind.spackcheck.locations import RECIPE, REPO

pytestmark = pytest.mark.slow
#: Debian's python3-wheel: the stand-in for Spack's py-wheel build dependency.
WHEEL = Path("/usr/lib/python3/dist-packages/wheel")


class Prefix(str):
    """Spack's Prefix: ``prefix.bin`` is ``<prefix>/bin``."""

    def __getattr__(self, name: str) -> Prefix:
        return Prefix(os.path.join(self, name))


def _spack_api(calls: list[list[str]]) -> dict[str, Any]:
    def directive(*_a: Any, **_k: Any) -> None:
        return None

    def phase_hook(_phase: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return lambda f: f

    def make(*args: str) -> None:
        calls.append(list(args))
        subprocess.run(["make", "-j2", *args], check=True, capture_output=True, text=True)

    def install(src: str, dest: str) -> None:  # Spack: into dest if it is a directory
        shutil.copy2(
            src, os.path.join(dest, os.path.basename(src)) if os.path.isdir(dest) else dest
        )

    def install_tree(src: str, dest: str) -> None:
        shutil.copytree(src, dest, dirs_exist_ok=True)

    @contextlib.contextmanager
    def working_dir(path: str) -> Iterator[None]:
        old = os.getcwd()
        os.chdir(path)
        try:
            yield
        finally:
            os.chdir(old)

    api: dict[str, Any] = {
        name: directive
        for name in ("version", "variant", "depends_on", "provides", "conflicts", "requires")
    }
    api.update(
        run_before=phase_hook,
        run_after=phase_hook,
        make=make,
        install=install,
        install_tree=install_tree,
        working_dir=working_dir,
        join_path=os.path.join,
        mkdirp=lambda *p: [os.makedirs(x, exist_ok=True) for x in p],
        spack_cc=shutil.which("cc") or "cc",
    )
    return api


def _load_recipe(api: dict[str, Any]) -> type:
    package = types.ModuleType("spack.package")
    package.__dict__.update(api)
    python = types.ModuleType("spack_repo.builtin.build_systems.python")
    python.PythonPackage = type("PythonPackage", (), {})  # type: ignore[attr-defined]
    mods = {
        "spack": types.ModuleType("spack"),
        "spack.package": package,
        "spack_repo": types.ModuleType("spack_repo"),
        "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
        "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
        "spack_repo.builtin.build_systems.python": python,
    }
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        spec = importlib.util.spec_from_file_location("topobind_spack_recipe", RECIPE)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module.Topobind  # type: ignore[no-any-return]


def _pkg_config(flag: str) -> str:
    return subprocess.run(
        ["pkg-config", flag, "openblas"], capture_output=True, text=True, check=True
    ).stdout.strip()


class FakeSpec:
    """What Spack hands the recipe for topobind +mpi with this machine's OpenBLAS/OpenMPI."""

    def __init__(self, mpi: bool) -> None:
        self.mpi = mpi

    def satisfies(self, constraint: str) -> bool:
        assert constraint in ("+mpi", "~mpi"), constraint
        return self.mpi == (constraint == "+mpi")

    def __getitem__(self, name: str) -> Any:
        if name == "blas":
            return types.SimpleNamespace(
                headers=types.SimpleNamespace(cpp_flags=_pkg_config("--cflags")),
                libs=types.SimpleNamespace(ld_flags=_pkg_config("--libs")),
            )
        assert name == "mpi" and self.mpi
        return types.SimpleNamespace(mpicc="/usr/bin/mpicc")


class RunEnv:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, name: str, value: str) -> None:
        self.values[name] = str(value)


def _stage(dest: Path) -> Path:
    """The source as Spack stages it: a copy of the project, without build products."""
    skip = shutil.ignore_patterns("bin", "build", "__pycache__", "*.egg-info")
    for sub in ("kernels", "launchers", "reframe_tests", "site_configs", "src"):
        shutil.copytree(REPO / sub, dest / sub, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tools = shutil.which("make") and shutil.which("pkg-config")
    if not (tools and Path("/usr/bin/mpicc").exists() and WHEEL.is_dir()):
        pytest.skip("needs make, pkg-config, OpenMPI's mpicc, python3-wheel (make setup)")
    root = tmp_path_factory.mktemp("spack-build")
    calls: list[list[str]] = []
    topobind_cls = _load_recipe(_spack_api(calls))
    pkg = topobind_cls.__new__(topobind_cls)
    pkg.spec = FakeSpec(mpi=True)
    pkg.prefix = Prefix(root / "prefix")
    pkg.stage = types.SimpleNamespace(source_path=str(_stage(root / "stage")))
    pkg.build_kernels()  # run_before("install")
    # PythonPipBuilder.install: pip with Spack's arguments; the build dependencies (py-wheel,
    # py-setuptools) on PYTHONPATH as Spack puts them there.
    build_deps = root / "build-deps"
    build_deps.mkdir()
    for part in [WHEEL, *WHEEL.parent.glob("wheel-*-info")]:  # code and entry points
        (build_deps / part.name).symlink_to(part)
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--ignore-installed"]
    pip += ["--no-build-isolation", "--no-index", "--no-warn-script-location", "--quiet"]
    subprocess.run(
        [*pip, f"--prefix={pkg.prefix}", "."],
        cwd=pkg.stage.source_path,
        check=True,
        env={**os.environ, "PYTHONPATH": str(build_deps)},
    )
    pkg.install_kernels_and_data()  # run_after("install")
    env = RunEnv()
    pkg.setup_run_environment(env)
    return {"prefix": Path(pkg.prefix), "calls": calls, "env": env.values}


def test_recipe_runs_the_projects_make_targets(installed: dict[str, Any]) -> None:
    calls = installed["calls"]
    assert [c[:3] for c in calls] == [["-C", "kernels", "all"], ["-C", "kernels", "install"]]
    assert "CFLAGS=-O3" in calls[0] and "MPICC=/usr/bin/mpicc" in calls[0]
    assert f"PREFIX={installed['prefix']}" in calls[1]


def test_installed_tree(installed: dict[str, Any]) -> None:
    prefix = installed["prefix"]
    for name in ("stream", "dgemm", "latency", "c2c", "whereami", "whereami-mpi"):
        assert os.access(prefix / "bin" / name, os.X_OK), name
    assert (prefix / "bin" / "libtbhugepages.so").is_file()
    for name in os.listdir(REPO / "launchers"):
        assert os.access(prefix / "bin" / name, os.X_OK), name
    share = prefix / "share" / "topobind"
    assert (share / "site_configs" / "local" / "spack-packages.yaml").is_file()
    assert sorted(p.name for p in (share / "reframe_tests").glob("*.py")) == sorted(
        p.name for p in (REPO / "reframe_tests").glob("*.py")
    )
    assert installed["env"] == {
        "TOPOBIND_KERNELS_DIR": str(prefix / "bin"),
        "TOPOBIND_SITES_DIR": str(share / "site_configs"),
    }


def test_installed_kernel_and_cli_run(installed: dict[str, Any], tmp_path: Path) -> None:
    prefix = installed["prefix"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **installed["env"]}
    out = subprocess.run(
        [str(prefix / "bin" / "whereami"), "--spin-ms", "1"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert json.loads(out)["kernel"] == "whereami"
    site = next((prefix / "lib").glob("python3*/site-packages"))
    env.update(PYTHONPATH=str(site), PATH=f"{prefix / 'bin'}:{os.environ['PATH']}")
    version = subprocess.run(
        [sys.executable, str(prefix / "bin" / "topobind"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,  # not the checkout: the installed package must be the one imported
    ).stdout
    assert version.startswith("topobind ")
    where = subprocess.run(
        [sys.executable, "-c", "import topobind, sys; print(topobind.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert where.startswith(str(prefix)), where
