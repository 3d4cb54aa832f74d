"""The recipe's plugin variants (issue 48 item 5): ``+slurm`` (the SPANK plugin against the
site's Slurm) and ``+flux`` (the Flux shell plugin against its flux-core). spack.yaml asks for
both; the real install of ``make spack-check`` turns each on where the site overlay has the
scheduler as an external with its headers (real Spack: tests/spack_driver/test_spack_check.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from topobind.spack_driver import check
from topobind.spack_driver.check import install_env_yaml, install_spec
from topobind.spack_driver.locations import RECIPE, SPACK_YAML


def overlay(tmp_path: Path, **headers: str) -> Path:
    """An overlay with slurm and flux-core externals whose prefixes hold ``headers``."""
    packages = {}
    for package, header in headers.items():
        prefix = tmp_path / package
        if header:
            (prefix / header).parent.mkdir(parents=True)
            (prefix / header).write_text("")
        name = package.replace("_", "-")
        packages[name] = {"externals": [{"spec": f"{name}@1", "prefix": str(prefix)}]}
    path = tmp_path / "spack-packages.yaml"
    path.write_text(yaml.safe_dump({"packages": packages}))
    return path


def test_each_plugin_is_on_where_the_overlay_has_its_headers(tmp_path: Path) -> None:
    both = overlay(tmp_path, slurm="include/slurm/spank.h", flux_core="include/flux/shell.h")
    assert install_spec(both).endswith("+mpi +slurm +flux")
    (tmp_path / "slurm/include/slurm/spank.h").unlink()  # a Slurm without libslurm-dev
    assert install_spec(both).endswith("~slurm +flux")
    assert install_spec(tmp_path / "missing.yaml").endswith("~slurm ~flux")


def test_the_real_install_asks_for_the_plugins_and_writes_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    both = overlay(tmp_path, slurm="include/slurm/spank.h", flux_core="include/flux/shell.h")
    versions = {pypi.lower(): "1.0" for pypi, _name in check.PYTHON_EXTERNALS}
    monkeypatch.setattr(check, "_pip_versions", lambda _pyext: versions)
    pyext = Path(sys.prefix)
    text = install_env_yaml(tmp_path, both, pyext, tmp_path / "modules")
    doc = yaml.safe_load(text)["spack"]
    assert doc["specs"] == ["topobind@main ~hpl +mpi +slurm +flux"]
    assert doc["modules"]["default"]["enable"] == ["tcl"]


def test_spack_yaml_and_the_recipe_name_both_variants() -> None:
    specs = yaml.safe_load(SPACK_YAML.read_text())["spack"]["specs"]
    assert "topobind@main +mpi +hpl +slurm +flux" in specs
    recipe = RECIPE.read_text()
    for variant in ("slurm", "flux"):
        assert re.search(rf'variant\(\s*"{variant}"', recipe), variant
    assert 'depends_on("slurm", when="+slurm")' in recipe
    assert 'depends_on("flux-core@0.30:", when="+flux")' in recipe
    # the plugins run topobind without PYTHONPATH: the recipe's own command sets it
    assert 'join_path(prefix.libexec, "topobind", "topobind")' in recipe
    assert "topobind={command}" in recipe
