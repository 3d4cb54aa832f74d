"""``topobind spack check``: the shipped files pass; every broken example in tests/data/spack
is caught with exactly the messages its ``# expect:`` lines name; edits of the shipped
spack.yaml and recipe that break them are caught."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from topobind.spackcheck.check import check_files, default_files
from topobind.spackcheck.locations import RECIPE, REPO, SPACK_YAML

DATA = Path(__file__).parent / "data" / "spack"
TOPOBIND = REPO / ".venv" / "bin" / "topobind"
CASES = sorted(
    [*DATA.glob("*.yaml"), *DATA.glob("*/topobind/package.py")],
    key=lambda p: str(p.relative_to(DATA)),
)


def _errors(*paths: Path) -> list[str]:
    return [str(p) for p in check_files(list(paths)) if not p.note]


def _expected(path: Path) -> list[str]:
    return re.findall(r"^# expect: (.+)$", path.read_text(), re.M)


def test_shipped_files_pass() -> None:
    files = default_files()
    assert SPACK_YAML in files and RECIPE in files
    assert any(p.name == "spack-packages.yaml" for p in files)  # the local overlay
    assert check_files(files) == []


def test_check_command_exit_status_and_one_line_per_problem(tmp_path: Path) -> None:
    ok = subprocess.run([str(TOPOBIND), "spack", "check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout == "" and "0 errors" in ok.stderr
    bad = [DATA / "misspelt-package.yaml", DATA / "unknown-version.yaml"]
    out = subprocess.run(
        [str(TOPOBIND), "spack", "check", *map(str, bad)], capture_output=True, text=True
    )
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("tests/data/spack/") for line in lines)


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(DATA)))
def test_broken_example_is_caught(case: Path) -> None:
    expected = _expected(case)
    assert expected, f"{case} has no '# expect:' line"
    errors = _errors(case)
    for want in expected:
        assert any(want in e for e in errors), f"missing {want!r} in {errors}"
    extra = [e for e in errors if not any(want in e for want in expected)]
    assert not extra, f"unexpected errors: {extra}"


def test_message_names_file_line_spec_and_column() -> None:
    (line,) = _errors(DATA / "unknown-variant.yaml")
    assert line == (
        "tests/data/spack/unknown-variant.yaml:5: specs[0] 'openmpi@4.1: +slurrm': column 15: "
        "package 'openmpi' has no variant 'slurrm'; did you mean 'schedulers=slurm'?"
    )


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the shipped spack.yaml (with the files it refers to) with one edit."""
    text = SPACK_YAML.read_text()
    assert old in text, old
    for sub in ("spack", "site_configs"):
        (tmp_path / sub).symlink_to(REPO / sub)
    path = tmp_path / "spack.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("view: true", "view: 3", "view: 3 is not valid under any of the given schemas"),
        ("unify: true", "unify: always", "concretizer.unify: 'always' is not valid"),
        (
            "slurm ~internal-hwloc",
            "slurm ~internal-hwlock",
            "has no variant 'internal-hwlock'; did you mean 'internal-hwloc'?",
        ),
        ("threads=openmp", "threads=openmpi", "did you mean 'openmp'?"),
        ("mpi: [openmpi]", "mpi: [openblas]", "'openblas' does not provide mpi"),
        ("hpl@2.3 +openmp", "hpl@2.4 +openmp", "hpl@2.4: no such version in the recipe"),
        ('"reframe@4.9:"', '"reframe@5.1"', "reframe@5.1: no such version in the recipe"),
        ("topobind@main +mpi", "topobind@main +mpl", "did you mean 'mpi'?"),
        ("topobind@=main", "topobind@main", "needs one exact version, e.g. topobind@=main"),
        ("spack/spack_repo/topobind", "spack/topobind", "not a Spack package repository"),
        ("    optional: true\n", "", "does not exist and is not 'optional: true'"),
        ("      path: .\n", "      path: ./nowhere\n", "source directory './nowhere' does not"),
    ],
)
def test_edits_of_the_shipped_spack_yaml(tmp_path: Path, old: str, new: str, message: str) -> None:
    if "optional" in old:  # a required include with no file behind it
        new_text = "  - path: site_configs/${TOPOBIND_SITE}/nothing.yaml\n"
        old = "  - path: site_configs/${TOPOBIND_SITE}/spack-packages.yaml\n    optional: true\n"
        path = _edited(tmp_path, old, new_text)
    else:
        path = _edited(tmp_path, old, new)
    errors = _errors(path)
    assert any(message in e for e in errors), errors


def test_site_overlay_must_give_the_non_buildable_externals(tmp_path: Path) -> None:
    path = _edited(tmp_path, "slurm:\n      buildable: false", "slurm:\n      buildable: false")
    (tmp_path / "site_configs").unlink()
    site = tmp_path / "site_configs" / "bare"
    site.mkdir(parents=True)
    (site / "spack-packages.yaml").write_text("packages:\n  hwloc:\n    buildable: true\n")
    errors = _errors(path)
    for pkg in ("slurm", "munge", "pmix"):
        assert any(
            f"{pkg} is 'buildable: false' but neither spack.yaml nor" in e for e in errors
        ), errors


def test_pinned_version_older_than_the_data_is_a_note_not_an_error(tmp_path: Path) -> None:
    path = _edited(tmp_path, '"openmpi@4.1: ', '"openmpi@4.1.6 ')
    problems = check_files([path])
    assert problems and all(p.note for p in problems), problems
    assert "not among the 12 newest versions" in str(problems[0])
    assert str(problems[0]).startswith("note: ")


def _recipe_copy(tmp_path: Path, old: str, new: str) -> Path:
    text = RECIPE.read_text()
    assert old in text, old
    path = tmp_path / "topobind" / "package.py"
    path.parent.mkdir()
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    "old,new,message",
    [
        ('"kernels", "all"', '"kernels", "everything"', "no target 'everything'"),
        ('"kernels", "install"', '"kernel", "install"', "kernel/Makefile does not exist"),
        ('"CFLAGS=-O3"', '"OPTFLAGS=-O3"', "never uses $(OPTFLAGS)"),
        ('"hwloc@2.9:+libxml2"', '"hwloc@2.9:+xml"', "package 'hwloc' has no variant 'xml'"),
        ('when="+hpl"', 'when="+hpcc"', "package 'topobind' has no variant 'hpcc'"),
        ('type="run")  # numactl', 'type="runtime")  # numactl', "type 'runtime' does not"),
        ('install_tree("site_configs"', 'install_tree("site_config"', "no 'site_config'"),
        ("class Topobind(", "class TopoBind(", "no class Topobind"),
        (
            "from spack_repo.builtin.build_systems.python import PythonPackage",
            "from spack.build_systems.python import PythonPackage",
            "must be imported from spack_repo.builtin.build_systems",
        ),
    ],
)
def test_edits_of_the_shipped_recipe(tmp_path: Path, old: str, new: str, message: str) -> None:
    errors = _errors(_recipe_copy(tmp_path, old, new))
    assert any(message in e for e in errors), errors


def test_recipe_is_checked_against_the_makefile_as_it_is(tmp_path: Path) -> None:
    """A Makefile that loses its install target fails the recipe check."""
    from topobind.spackcheck.recipe import check_recipe
    from topobind.spackcheck.recipedata import RecipeData

    root = tmp_path / "project"
    skip = shutil.ignore_patterns("bin", "build")
    shutil.copytree(REPO / "kernels", root / "kernels", ignore=skip)
    for sub in ("launchers", "reframe_tests", "site_configs"):
        (root / sub).mkdir()
    assert check_recipe(RECIPE, RecipeData.load(), root) == []
    mk = root / "kernels" / "Makefile"
    mk.write_text(mk.read_text().replace("install: all", "deploy: all"))
    errors = [str(p) for p in check_recipe(RECIPE, RecipeData.load(), root)]
    assert any("no target 'install' in" in e for e in errors), errors
