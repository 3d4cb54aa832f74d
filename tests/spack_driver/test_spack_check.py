"""``topobind spack check`` with real Spack (build/spack, made by ``make spack-check``, which
runs before the tests): the project concretizes, audits and installs; a second run is
cached; the installed topobind runs; reframe is a release; every broken file in
tests/data/spack fails with Spack's own message and topobind's hint; topobind's externals
carry every variant ``spack external find`` detects, with the same values."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_helpers import run_topobind
from paths import DATA as TEST_DATA

from topobind.spack_driver import externals
from topobind.spack_driver.check import machine_overlays, sync_copy
from topobind.spack_driver.locations import ARCHIVES_UPSTREAM, REPO, SPACK_YAML
from topobind.spack_driver.realspack import Spack

pytestmark = pytest.mark.slow

if Spack().missing_archives() and not os.environ.get("TOPOBIND_REQUIRE_MIRROR"):
    pytest.skip(
        f"no offline mirror of the Spack archives: its {ARCHIVES_UPSTREAM}; "
        "set TOPOBIND_OFFLINE_MIRROR to it (CI sets TOPOBIND_REQUIRE_MIRROR=1: a failure there)",
        allow_module_level=True,
    )

DATA = TEST_DATA / "spack"
CASES = sorted(
    [*DATA.glob("*.yaml"), *DATA.glob("*/topobind/package.py")],
    key=lambda p: str(p.relative_to(DATA)),
)


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return run_topobind("spack", "check", *args, cwd=REPO, timeout=3000)


@pytest.fixture(scope="module")
def project() -> subprocess.CompletedProcess[str]:
    """The whole check (cached steps when make spack-check ran before)."""
    return _check()


def test_project_passes_and_leaves_spack_yaml_alone(
    project: subprocess.CompletedProcess[str],
) -> None:
    assert project.returncode == 0, project.stdout + project.stderr
    assert project.stdout == ""
    assert re.search(r"\d+ steps ran, \d+ unchanged \(cached\), 0 failed", project.stderr)
    copy = Spack().root / "src" / "spack.yaml"  # what Spack concretized, byte for byte
    assert copy.read_bytes() == SPACK_YAML.read_bytes()


def test_second_run_is_all_cached(project: subprocess.CompletedProcess[str]) -> None:
    again = _check()
    assert again.returncode == 0, again.stderr
    m = re.search(r"(\d+) steps ran, (\d+) unchanged \(cached\), 0 failed", again.stderr)
    assert m and m.group(1) == "0" and int(m.group(2)) >= 6, again.stderr


def test_every_overlay_of_this_machine_was_concretized(
    project: subprocess.CompletedProcess[str],
) -> None:
    overlays, _notes = machine_overlays()
    assert any(p.parent.name == "local" for p in overlays)
    for overlay in overlays:
        lock = json.loads((Spack().root / "locks" / f"{overlay.parent.name}.lock").read_text())
        nodes = {n["name"]: n for n in lock["concrete_specs"].values()}
        reframe = str(nodes["reframe"]["version"])
        assert re.fullmatch(r"4\.(9|[1-9]\d)(\.\d+)*", reframe), reframe  # never develop
        assert nodes["topobind"]["version"] == "main"
        text = overlay.read_text()
        for name in ("openmpi", "hwloc"):  # the overlay's externals, not built
            if re.search(rf"^  {name}:", text, re.M):
                assert nodes[name].get("external"), nodes[name]


def test_installed_topobind_runs_through_the_view(
    project: subprocess.CompletedProcess[str],
) -> None:
    """What `spack env activate` sets up: the view's bin/ on PATH, TOPOBIND_KERNELS_DIR and
    TOPOBIND_SITES_DIR from the recipe; the CLI, the launchers and the kernels run."""
    spack = Spack()
    act = spack.run(["env", "activate", "--sh", str(spack.root / "envs" / "install")])
    assert act.ok, act.output
    env = {k: os.environ[k] for k in ("HOME", "LANG") if k in os.environ}
    env.update(re.findall(r"^export ([A-Z_0-9]+)=(.*);$", act.output, re.M))
    view = spack.root / "envs" / "install" / ".spack-env" / "view"
    # +flux: libexec/topobind first, the topobind the Flux shell plugin runs (no PYTHONPATH)
    plugins = f"{view}/libexec/topobind:" if env["PATH"].startswith(f"{view}/libexec/") else ""
    assert env["PATH"].startswith(f"{plugins}{view}/bin:")
    assert env["TOPOBIND_KERNELS_DIR"] == f"{view}/bin"
    assert (Path(env["TOPOBIND_SITES_DIR"]) / "reframe_config.py").is_file()
    topobind = shutil.which("topobind", path=env["PATH"])
    assert topobind == (f"{view}/libexec/topobind/topobind" if plugins else f"{view}/bin/topobind")
    version = subprocess.run([topobind, "--version"], capture_output=True, text=True, env=env)
    assert version.returncode == 0, version.stderr
    for name in ("whereami", "whereami-mpi", "stream", "dgemm", "rankexec", "topobind-run",
                 "topobind-env"):  # fmt: skip
        assert shutil.which(name, path=env["PATH"]) == f"{view}/bin/{name}", name
    assert (view / "bin" / "libtbhugepages.so").is_file()  # the shim, from rankstep/ as rankexec
    where = subprocess.run(
        ["topobind-run", "--launcher", "none", "--", "whereami"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert where.returncode == 0, where.stdout + where.stderr
    assert any((view / "share" / "topobind" / "reframe_tests").glob("*.py"))


def _expected(path: Path, what: str) -> list[str]:
    return re.findall(rf"^# {what}: (.+)$", path.read_text(), re.M)


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(DATA)))
def test_broken_file_fails_with_spacks_message_and_a_hint(case: Path) -> None:
    spack_says, hints = _expected(case, "spack"), _expected(case, "hint")
    assert spack_says and len(hints) == 1, f"{case} needs '# spack:' and one '# hint:' line"
    out = _check(str(case))
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{case}: spack ") and lines[0].endswith(" failed:"), lines
    assert lines[1].startswith("==> Error"), lines  # Spack's own message, as Spack prints it
    for want in spack_says:
        assert any(want in line for line in lines[1:-1]), (want, out.stdout)
    hint_lines = [ln for ln in out.stdout.splitlines() if ln.startswith("topobind: hint: ")]
    assert len(hint_lines) == 1 and hints[0] in hint_lines[0], out.stdout


def _spack_external_find(tmp_path: Path, packages: list[str]) -> dict[str, list[dict[str, str]]]:
    env = tmp_path / "extenv"
    env.mkdir()
    (env / "spack.yaml").write_text("spack:\n  specs: []\n")
    found = Spack().run(["-e", str(env), "external", "find", "--not-buildable", *packages])
    assert found.ok, found.output
    packages_conf = yaml.safe_load((env / "spack.yaml").read_text())["spack"]["packages"]
    return {k: v.get("externals", []) for k, v in packages_conf.items()}


def _variants(spec: str) -> dict[str, str]:
    """Variants of a spec string: +x / ~x -> 'True'/'False', k=v -> sorted values."""
    body = spec.split("@", 1)[1]
    body = re.sub(r"^\S*?(?=[+~ ]|$)", "", body, count=1)  # drop the version
    out = {}
    for k, v in re.findall(r"(\w[\w-]*)=(\S+)", body):
        out[k] = ",".join(sorted(v.split(",")))
    for sign, name in re.findall(r"([+~])(\w[\w-]*)", re.sub(r"\w[\w-]*=\S+", "", body)):
        out[name] = str(sign == "+")
    return out


def test_externals_carry_every_variant_spack_detects(tmp_path: Path) -> None:
    ours = externals.detect()
    names = sorted({e.package for e in ours})
    theirs = _spack_external_find(tmp_path, names)
    both = 0
    for ext in ours:
        for entry in theirs.get(ext.package, []):
            same = entry["prefix"] == ext.prefix and entry["spec"].startswith(
                f"{ext.package}@{ext.version}"
            )
            if not same:
                continue
            both += 1
            detected, written = _variants(entry["spec"]), _variants(ext.spec)
            missing = {k: v for k, v in detected.items() if written.get(k) != v}
            assert not missing, (ext.spec, entry["spec"], missing)
    # here Spack finds hwloc, openmpi and python (Debian's): at least those three agree
    assert both >= 3, (theirs, ours)


def test_only_overlays_of_this_machine_are_concretized(tmp_path: Path) -> None:
    """An overlay whose externals live elsewhere (another cluster's) is skipped, with a note."""
    here = tmp_path / "here" / "spack-packages.yaml"
    there = tmp_path / "there" / "spack-packages.yaml"
    for path, prefix in ((here, "/usr"), (there, "/cluster/apps/slurm-23.02")):
        path.parent.mkdir()
        path.write_text(f"packages:\n  slurm:\n    externals:\n    - spec: slurm@23.02.7\n"
                        f"      prefix: {prefix}\n")  # fmt: skip
    use, notes = machine_overlays(tmp_path)
    assert use == [here]
    assert notes == ["there: not this machine (/cluster/apps/slurm-23.02 does not exist)"]


def test_the_copy_keeps_unchanged_files_and_drops_removed_ones(tmp_path: Path) -> None:
    """Spack rebuilds a develop package whose files changed: the copy must not touch the
    others, and must not keep files the project no longer has."""
    dest = tmp_path / "copy"
    sync_copy(dest)
    recipe = dest / "spack" / "spack_repo" / "topobind" / "packages" / "topobind" / "package.py"
    assert recipe.read_bytes() == (REPO / recipe.relative_to(dest)).read_bytes()
    stamp = recipe.stat().st_mtime_ns
    stale = dest / "src" / "topobind" / "gone.py"
    stale.write_text("")
    built = dest / "rankstep" / "bin" / "rankexec"  # what the recipe's make built there stays
    built.parent.mkdir()
    built.write_text("")
    sync_copy(dest)
    assert recipe.stat().st_mtime_ns == stamp and not stale.exists()
    assert not (dest / "tests").exists() and not (dest / "docs").exists()
    assert (dest / "rankstep" / "Makefile").is_file() and built.exists()  # make -C rankstep


def test_bad_file_arguments_fail_at_once(tmp_path: Path) -> None:
    """Not a file, a special file, a huge file: one line, exit 2, before Spack runs."""
    fifo = tmp_path / "spack.yaml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"#" * (2 << 20))
    for path, said in (
        (tmp_path / "missing.yaml", "no such file"),
        (tmp_path, "not a regular file"),
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (huge, "larger than 1024 KiB"),
    ):
        out = run_topobind("spack", "check", str(path), timeout=60)
        assert out.returncode == 2 and out.stdout == "", out
        assert out.stderr == f"topobind: error: {path}: {said}" + out.stderr.split(said, 1)[1]
        assert len(out.stderr.splitlines()) == 1, out.stderr
