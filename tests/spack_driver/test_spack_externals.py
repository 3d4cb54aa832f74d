"""``topobind spack externals`` on this machine: every version agrees with the Debian package
that owns the file it was read from; the output is an overlay; the local site's overlay (made
by ``make setup``) is what detection finds here; a pyenv Python is never used. Its agreement
with ``spack external find`` is in tests/spack_driver/test_spack_check.py (it needs real Spack)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_helpers import run_topobind, venv_bin

from topobind.cli.main import main
from topobind.spack_driver import externals
from topobind.spack_driver.locations import REPO, SITES


def _owner_version(path: str) -> tuple[str, str]:
    """(Debian package owning ``path``, upstream part of its version)."""
    real = os.path.realpath(path)
    out = subprocess.run(["dpkg-query", "-S", real], capture_output=True, text=True)
    if out.returncode != 0:  # /bin is a link to /usr/bin on Debian 12 (merged /usr)
        out = subprocess.run(
            ["dpkg-query", "-S", real.replace("/usr/", "/", 1)], capture_output=True, text=True
        )
    assert out.returncode == 0, f"no Debian package owns {real}"
    package = out.stdout.split(":")[0].strip()
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
    ).stdout
    m = re.match(r"(?:\d+:)?([^-+~]+)", version)
    assert m, version
    return package, m.group(1)


@pytest.fixture(scope="module")
def found() -> list[externals.External]:
    return externals.detect()


@pytest.mark.slow
def test_finds_the_stack_debian_installed(found: list[externals.External]) -> None:
    names = {e.package for e in found}
    want = {"hwloc", "openmpi", "slurm", "munge", "openblas", "numactl", "pmix", "python"}
    assert names >= want, names


@pytest.mark.slow
def test_each_version_is_the_owning_debian_packages(found: list[externals.External]) -> None:
    for ext in found:
        if ext.package == "flux-core":  # built by make flux from the mirror's archive
            continue
        package, upstream = _owner_version(ext.found_by)
        assert ext.version == upstream, (ext, package, upstream)


@pytest.mark.slow
def test_prefixes_and_buildable(found: list[externals.External]) -> None:
    by_name = {e.package: e for e in found}
    assert by_name["hwloc"].prefix == "/usr" and by_name["openmpi"].prefix == "/usr"
    assert not by_name["slurm"].buildable and not by_name["munge"].buildable
    assert by_name["hwloc"].buildable
    for ext in found:  # the prefix holds what was found (bin/, lib/ or include/ below it)
        assert Path(ext.found_by).resolve().is_relative_to(Path(ext.prefix).resolve()) or (
            Path(ext.found_by).is_relative_to(ext.prefix)
        ), ext


@pytest.mark.slow
def test_openmpi_is_debians_not_the_venvs(found: list[externals.External]) -> None:
    ompi = [e for e in found if e.package == "openmpi"]
    assert [e.found_by for e in ompi] == ["/usr/bin/ompi_info"]
    assert "schedulers=slurm" in ompi[0].variants  # Debian's is built with Slurm support
    venv = venv_bin("ompi_info")
    if venv.exists():
        env = {**os.environ, "PATH": f"{venv.parent}:{os.environ['PATH']}"}
        code = "from topobind.spack_driver.externals import detect_openmpi as d; print(d(True))"
        out = subprocess.run(
            [str(venv_bin("python")), "-c", code], env=env, capture_output=True, text=True
        ).stdout
        assert "prefix='/usr'" in out and f"prefix='{venv.parent.parent}'" in out, out


@pytest.mark.slow
def test_output_is_an_overlay() -> None:
    """A packages: section; Spack itself concretizes it in test_spack_check.py (beside this)."""
    done = run_topobind("spack", "externals")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    packages = yaml.safe_load(out)["packages"]
    for name in ("slurm", "munge", "pmix"):
        assert packages[name]["buildable"] is False, name
    for name, conf in packages.items():
        for ext in conf["externals"]:
            assert ext["spec"].startswith(f"{name}@") and Path(ext["prefix"]).is_dir(), ext


@pytest.mark.slow
def test_local_overlay_is_what_this_machine_has(found: list[externals.External]) -> None:
    """site_configs/local/spack-packages.yaml is generated (make setup, make spack-check),
    never shipped: whatever this machine has, it is the probe's output here."""
    path = SITES / "local" / "spack-packages.yaml"
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--error-unmatch", str(path)], capture_output=True
    )
    assert tracked.returncode != 0, "the local overlay differs between machines: do not ship it"
    text = path.read_text()
    assert text == externals.packages_yaml(found), "regenerate: make spack-local-overlay"
    openblas = [e for e in found if e.package == "openblas" and e.prefix == "/usr"]
    for ext in openblas:  # the build libopenblas.so points to, as the alternatives say
        real = os.path.realpath(ext.found_by)
        want = {"openblas-openmp": "openmp", "openblas-pthread": "pthreads"}.get(
            Path(real).parent.name, "none"
        )
        assert f"threads={want}" in ext.variants, (ext, real)


@pytest.mark.slow
def test_debian_python_is_detected_but_not_used(found: list[externals.External]) -> None:
    """Debian's python3 installs `pip install --prefix=P` under P/local/: shown, not used."""
    (python,) = [e for e in found if e.package == "python" and e.prefix == "/usr"]
    scheme = subprocess.run(
        [python.found_by, "-c", "import sysconfig; print(sysconfig.get_default_scheme())"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert bool(python.caveat) == (scheme == "posix_local")
    doc = yaml.safe_load(externals.packages_yaml([python]))
    assert ("python" in (doc["packages"] or {})) == (scheme != "posix_local")


def _pyenv_pythons(root: Path) -> list[Path]:
    return sorted(root.glob("versions/*/bin/python3"))


@pytest.mark.slow
def test_a_pyenv_python_first_on_path_is_never_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A pyenv python3 first on PATH (the real one when this machine has pyenv, and a pyenv
    layout made here either way) is written commented out, with the reason."""
    fake = tmp_path / ".pyenv"
    (fake / "versions" / "3.11.2" / "bin").mkdir(parents=True)
    (fake / "versions" / "3.11.2" / "bin" / "python3").symlink_to("/usr/bin/python3")
    real_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    for root in (fake, real_root):
        for python in _pyenv_pythons(root):
            monkeypatch.setenv("PYENV_ROOT", str(root))
            monkeypatch.setenv("PATH", f"{python.parent}:{os.environ['PATH']}")
            found = externals.detect_python()
            (pyenv,) = [e for e in found if e.found_by == str(python)]
            assert pyenv.caveat == externals.PYENV_CAVEAT
            doc = yaml.safe_load(externals.packages_yaml([pyenv]))
            assert doc["packages"] is None, doc  # only comments
            monkeypatch.undo()


@pytest.mark.slow
def test_nothing_found_says_so_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(externals, "SYSTEM_BIN_DIRS", ())
    monkeypatch.setattr(externals, "LIB_DIRS", ())
    monkeypatch.setattr(externals, "_pkgconfig_dirs", lambda: [])
    monkeypatch.setattr(externals, "CLONE_FLUX", tmp_path / "no-flux")
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    assert main(["spack", "externals"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no externals found" in captured.err


@pytest.mark.slow
def test_runs_before_topobind_is_installed(tmp_path: Path) -> None:
    """A site admin runs it from the checkout with the system's python3 (stdlib only)."""
    out = subprocess.run(
        [
            "/usr/bin/python3",
            "-I",
            "-c",
            "import sys; sys.path.insert(0, 'src'); "
            "import runpy; "
            "runpy.run_module('topobind.spack_driver.externals', run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    done = run_topobind("spack", "externals")
    assert done.returncode == 0, done.stderr
    assert out == done.stdout


@pytest.mark.slow
def test_the_flux_make_flux_built_is_found_by_its_real_prefix(
    found: list[externals.External],
) -> None:
    """topobind +flux: the flux-core of build/flux (a link into a cache shared by clones) is
    written with the prefix the link points to, at the version 'flux version' prints."""
    built = REPO / "build" / "flux" / "bin" / "flux"
    if not built.is_file():
        pytest.skip("no build/flux: make flux builds it (make test does)")
    flux = [e for e in found if e.package == "flux-core"]
    real = str(Path(os.path.realpath(built)).parent.parent)
    assert any(e.prefix == real for e in flux), flux
    (ext,) = [e for e in flux if e.prefix == real]
    out = subprocess.run([str(built), "version"], capture_output=True, text=True, timeout=60)
    assert "commands:" in out.stdout and ext.version in out.stdout, (ext, out.stdout)
