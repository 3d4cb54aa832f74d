"""'make flux' installs the topobind shell plugin into this clone (build/flux-plugins/), never
into the Flux prefix build/flux links to: that prefix is a cache shared by every clone of the
machine (/var/cache/topobind/flux-*), where two clones replaced each other's plugin and every
instance of that Flux loaded whichever was last. scripts/flux-start tells this clone's Flux
where its plugin is (-Sconf.shell_pluginpath)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, TOPOBIND
from paths import REPO

pytestmark = pytest.mark.slow
FLUX = REPO / "build" / "flux" / "bin" / "flux"
START = REPO / "scripts" / "flux-start"


def test_make_flux_plugin_installs_into_the_clone_only() -> None:
    """make -n: what it would run, nothing built."""
    done = subprocess.run(["make", "-n", "--no-print-directory", "flux-plugin"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    installs = [ln for ln in done.stdout.splitlines() if ln.startswith("install ")]
    assert installs == [
        "install -D -m 0755 rankstep/bin/topobind_flux.so build/flux-plugins/topobind.so"
    ]


@pytest.mark.skipif(not FLUX.exists(), reason="Flux is not built: 'make flux'")
def test_the_clones_flux_loads_the_clones_plugin(tmp_path: Path) -> None:
    """(Another clone may still write into the shared prefix meanwhile: its folder is not
    compared here; the test above holds that this clone's make writes nothing there.)"""
    made = subprocess.run(["make", "--no-print-directory", "flux-plugin"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert "build/flux/lib" not in made.stdout
    assert (REPO / "build" / "flux-plugins" / "topobind.so").is_file()
    env = {**NO_SLURM, "PATH": f"{Path(TOPOBIND).parent}:{NO_SLURM.get('PATH', '')}"}
    script = (
        "flux getattr conf.shell_pluginpath; flux run -n2 -o topobind=spread printenv OMP_PLACES"
    )
    done = subprocess.run([str(START), "--test-size=1", "sh", "-c", script], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    path, *places = done.stdout.splitlines()
    assert path == str(REPO / "build" / "flux-plugins")
    assert len(places) == 2 and all(p.startswith("{") for p in places), done.stdout


def test_flux_start_without_make_flux_names_it(tmp_path: Path) -> None:
    """Issue 48: docs/flux.md's first command in a clone where 'make flux' has not run stops
    with one line naming the build step, not 'flux: command not found'."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy2(START, clone / "scripts" / "flux-start")
    done = subprocess.run([str(clone / "scripts" / "flux-start"), "--test-size=1"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "flux-start: error: Flux or its topobind plugin is not built here; run 'make flux'"
    ]


def test_make_flux_plugin_without_make_flux_names_it(tmp_path: Path) -> None:
    """'make flux-plugin' in a clone without Flux's headers: one line naming 'make flux', not
    the compiler's 'flux/shell.h: No such file or directory'."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "mk", clone / "mk")
    shutil.copy2(REPO / "Makefile", clone / "Makefile")
    done = subprocess.run(["make", "-s", "--no-print-directory", "flux-plugin"], cwd=clone,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "flux-plugin: error: no Flux headers in build/flux/include; run 'make flux' (it builds "
        "Flux, then this plugin)"
    ), done.stderr
    assert "shell.h" not in done.stderr
