"""spack.yaml, overlays and the recipe checked against Spack's schema and recipe data;
broken copies are caught with their message; externals match the installed packages."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from topobind import spackcheck
from topobind.spack_externals import detect
from topobind.spackcheck import RecipeData, SpecError, check_env_file, check_recipe, parse_spec

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data() -> RecipeData:
    return RecipeData.load()


def test_shipped_files_pass() -> None:
    assert spackcheck.check_all() == []


@pytest.mark.parametrize(
    "text,name,versions,variants,deps",
    [
        ("hwloc@2.9: +libxml2", "hwloc", "2.9:", {"libxml2": "true"}, []),
        (
            "openmpi@4.1:5.0 schedulers=slurm,tm ~java ^hwloc@2.9.0 %gcc@12",
            "openmpi",
            "4.1:5.0",
            {"schedulers": "slurm,tm", "java": "false"},
            ["hwloc"],
        ),
        (
            "openblas threads==openmp -fortran",
            "openblas",
            None,
            {"threads": "openmp", "fortran": "false"},
            [],
        ),
        (
            "hpl@:2.3 +openmp target=x86_64_v3",
            "hpl",
            ":2.3",
            {"openmp": "true", "target": "x86_64_v3"},
            [],
        ),
    ],
)
def test_parser(
    text: str, name: str, versions: str | None, variants: dict[str, str], deps: list[str]
) -> None:
    spec = parse_spec(text)
    assert spec.root.name == name and spec.root.versions == versions
    assert {k: v for k, (v, _c) in spec.root.variants.items()} == variants
    assert [d.name for d in spec.deps] == deps


@pytest.mark.parametrize(
    "text,column",
    [("openmpi @", 10), ("+foo", 1), ("hwloc ^", 8), ("hwloc openmpi", 7), ("hwloc $x", 7)],
)
def test_parser_errors_name_the_column(text: str, column: int) -> None:
    with pytest.raises(SpecError) as exc:
        parse_spec(text)
    assert exc.value.column == column


def _broken(tmp_path: Path, edit: str, new: str) -> Path:
    text = (REPO / "spack.yaml").read_text()
    assert edit in text
    path = tmp_path / "spack.yaml"
    path.write_text(text.replace(edit, new))
    return path


@pytest.mark.parametrize(
    "edit,new,message",
    [
        (
            "~internal-hwloc",
            "~internal-hwlock",
            "has no variant 'internal-hwlock'; did you mean 'internal-hwloc'?",
        ),
        ("threads=openmp", "threads=openmpi", "'openmpi' is not one of pthreads, openmp, none"),
        (
            "  - py-pyyaml\n",
            "  - py-pyaml\n",
            "unknown package 'py-pyaml'; did you mean 'py-pyyaml'?",
        ),
        ("mpi: [openmpi]", "mpi: [openblas]", "'openblas' does not provide mpi"),
        ("view: true", "view: 3", "view: 3 is not valid"),
        ("hpl@2.3 +openmp", "hpl@2.7 +openmp", "version 2.7 is not a known version"),
        ("hpl@2.3 +openmp", "hpl@2.3 openmp=yes", "is boolean"),
        ('"hwloc@2.9: +libxml2"', '"hwloc@2.9: +libxml2 @@"', "column"),
        ('"reframe@4.9:"', "reframe@4.9: +docs", "is not valid under any of the given schemas"),
    ],
)
def test_broken_copies_are_caught(
    tmp_path: Path, data: RecipeData, edit: str, new: str, message: str
) -> None:
    errors = check_env_file(_broken(tmp_path, edit, new), data)
    assert errors and any(message in e for e in errors), errors


def test_overlay_with_unknown_variant(tmp_path: Path, data: RecipeData) -> None:
    path = tmp_path / "spack-packages.yaml"
    path.write_text(
        "packages:\n  hwloc:\n    externals:\n    - spec: hwloc@2.9.0 +libxmll\n"
        "      prefix: /usr\n"
    )
    errors = check_env_file(path, data, overlay=True)
    assert any("no variant 'libxmll'" in e for e in errors), errors


def test_recipe_checks(tmp_path: Path, data: RecipeData) -> None:
    text = spackcheck.RECIPE.read_text()
    bad = tmp_path / "package.py"
    bad.write_text(
        text.replace('depends_on("hwloc@2.9:+libxml2"', 'depends_on("hwloc@2.9:+libxml3"')
    )
    assert any("no variant 'libxml3'" in e for e in check_recipe(bad, data))
    bad.write_text(text.replace('"kernels", "install"', '"kernels", "instal"'))
    assert any("make target 'instal' does not exist" in e for e in check_recipe(bad, data))
    bad.write_text(text.replace("def build(self, spec, prefix):", "def build(self, spec, prefix)"))
    assert any("not valid Python" in e for e in check_recipe(bad, data))
    bad.write_text(text.replace('depends_on("reframe@4.9:"', 'depends_on("refrane@4.9:"'))
    assert any("did you mean 'reframe'" in e for e in check_recipe(bad, data))


def _dpkg(package: str) -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
    ).stdout
    m = re.match(r"(?:\d+:)?(\d+(?:\.\d+)+)", out)
    assert m, f"{package} not installed"
    return m.group(1)


def test_externals_match_installed_packages() -> None:
    found = {e.package: e for e in detect()}
    assert found["hwloc"].version == _dpkg("hwloc")
    assert found["openmpi"].version == _dpkg("openmpi-bin")
    assert found["munge"].version == _dpkg("munge")
    assert (
        found["slurm"].version
        == "-".join(
            f"{int(x):02d}" if i < 2 else x for i, x in enumerate(_dpkg("slurm-wlm").split("."))
        )
        + "-1"
    )
    assert found["openblas"].version == _dpkg("libopenblas0")
    assert not found["slurm"].buildable and found["slurm"].prefix == "/usr"


def test_externals_output_is_a_valid_overlay(tmp_path: Path, data: RecipeData) -> None:
    out = subprocess.run(
        [str(REPO / ".venv/bin/topobind"), "spack", "externals"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc = yaml.safe_load(out)
    assert set(doc["packages"]) >= {"hwloc", "openmpi", "slurm", "munge", "python"}
    path = tmp_path / "spack-packages.yaml"
    path.write_text(out)
    assert check_env_file(path, data, overlay=True) == []


def test_check_command_exit_status(tmp_path: Path) -> None:
    ok = subprocess.run(
        [str(REPO / ".venv/bin/topobind"), "spack", "check"], capture_output=True, text=True
    )
    assert ok.returncode == 0
    bad = _broken(tmp_path, "threads=openmp", "threads=openmpp")
    out = subprocess.run(
        [str(REPO / ".venv/bin/topobind"), "spack", "check", str(bad)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "did you mean 'openmp'" in out.stdout
