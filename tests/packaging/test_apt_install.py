"""scripts/apt-install.sh: the one loop that installs the Debian packages of a list when
missing, for 'make setup' (scripts/setup.sh), 'make flux' (scripts/build-flux.sh),
'make numa-vm-setup' (mk/numa-vm.mk) and scripts/local-slurm start, which each had a copy of
it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from other_user import SETPRIV_NOBODY, copy_readable, shared_folder
from paths import REPO

SCRIPT = REPO / "scripts" / "apt-install.sh"


def apt_install(
    who: str, listed: Path, as_nobody: bool = False, fix: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs the script; as nobody, a copy of it beside ``listed`` (the checkout may be in a
    folder nobody cannot enter: tests/other_user.py)."""
    script = copy_readable(SCRIPT, listed.parent) if as_nobody else SCRIPT
    argv = [*(SETPRIV_NOBODY if as_nobody else []), "bash", str(script), who, str(listed)]
    argv += [fix] if fix else []
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.slow
def test_all_present_is_one_line(tmp_path: Path) -> None:
    listed = tmp_path / "packages.txt"
    listed.write_text("# the shell\nbash\n\ncoreutils   # and its tools\n")
    done = apt_install("setup", listed)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "setup: Debian packages: all 2 present\n", ""
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("who", "fix"), [("flux", None), ("local-slurm", "sudo scripts/local-slurm start")]
)
def test_missing_packages_without_root_is_one_line_naming_the_fix(
    who: str, fix: str | None
) -> None:
    with shared_folder("tb-apt-") as folder:  # nobody reads it
        listed = folder / "packages.txt"
        listed.write_text("bash\ntopobind-no-such-package\n")
        listed.chmod(0o644)
        done = apt_install(who, listed, as_nobody=True, fix=fix)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == (
        f"{who}: error: Debian packages missing: topobind-no-such-package; run "
        f"'{fix or 'sudo make ' + who}' (or apt-get install them as root)\n"
    )


def test_setup_and_make_flux_share_it() -> None:
    for script, listed in (
        ("setup.sh", "apt-packages.txt"),
        ("build-flux.sh", "flux-apt-packages.txt"),
    ):
        text = (REPO / "scripts" / script).read_text()
        assert (
            f"scripts/apt-install.sh {script.split('.')[0].removeprefix('build-')} "
            f"scripts/{listed}" in text
        ), script
        assert "dpkg-query" not in text and "apt-get" not in text, script


def listed(name: str) -> list[str]:
    lines = (REPO / "scripts" / name).read_text().splitlines()
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]


def test_local_slurm_and_numa_vm_setup_share_it() -> None:
    """Their own copies of the loop are gone; the lists hold the packages they installed."""
    slurm = (REPO / "scripts" / "local-slurm").read_text()
    assert 'apt-install.sh" local-slurm "$repo/scripts/slurm-apt-packages.txt"' in slurm
    numa = (REPO / "mk" / "numa-vm.mk").read_text()
    assert "scripts/apt-install.sh numa-vm-setup scripts/numa-vm-apt-packages.txt" in numa
    for text in (slurm, numa):
        assert "dpkg-query" not in text and "apt-get" not in text
    assert listed("slurm-apt-packages.txt") == ["slurm-wlm", "munge"]
    assert listed("numa-vm-apt-packages.txt") == [
        "qemu-system-x86", "linux-image-amd64", "busybox-static"
    ]  # fmt: skip
