"""``make test`` in a clone under a private folder (issue 47 item 3): a home of mode 0700
(Debian 12, ``/root``) holds the checkout, and a test that runs something as another user
(nobody) must not hand that user a path inside it. Every such test goes through
``tests/other_user.py`` (copies in a 0755 folder under /tmp, or a one-line skip), and the
ones that need no cluster and no wheel run here from a clone in a 0700 folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from other_user import (
    blocking_folder,
    shared_folder,
    skip_unless_cluster_reachable,
    skip_unless_reachable,
)
from paths import REPO

#: what makes a test run as another user: setpriv, a job of another uid, setuid, runuser, su
AS_ANOTHER_USER = re.compile(
    r"setpriv|SETPRIV_NOBODY|--uid[= ]|os\.set(e|re|res)?uid\(|\brunuser\b|[\"']su[\"'], *[\"']-"
)
#: test files that run as nobody and need neither a Slurm cluster nor a wheel
PLAIN = ["tests/packaging/test_apt_install.py"]


def _test_sources() -> dict[str, str]:
    tests = REPO / "tests"
    return {
        str(p.relative_to(REPO)): p.read_text()
        for p in sorted(tests.rglob("*.py"))
        if p.name not in ("other_user.py", "test_other_user.py")
    }


def test_every_test_that_runs_as_another_user_goes_through_the_helper() -> None:
    found = {name for name, text in _test_sources().items() if AS_ANOTHER_USER.search(text)}
    assert "tests/packaging/test_wheel_install.py" in found  # the pattern still finds them
    assert set(PLAIN) <= found
    for name in sorted(found):
        text = _test_sources()[name]
        assert "from other_user import" in text, (
            f"{name} runs something as another user: copy what that user reads into "
            "other_user.shared_folder() or skip with other_user.skip_unless_reachable()"
        )
        # a path inside the checkout handed to that user: REPO only through a copy
        for line in text.splitlines():
            if AS_ANOTHER_USER.search(line):
                assert "REPO" not in line and "SCRIPT" not in line, f"{name}: {line.strip()}"


def test_a_cluster_in_a_private_folder_is_a_one_line_skip() -> None:
    with shared_folder("tb-cluster-") as folder:
        state = folder / "clone" / "build" / "local-slurm"
        (state / "munge").mkdir(parents=True)
        conf = state / "slurm.conf"
        conf.write_text(f"ClusterName=x\nAuthInfo=socket={state}/munge/munge.socket.2\n")
        conf.chmod(0o644)
        skip_unless_cluster_reachable(conf)  # every folder 0755: no skip
        (state / "munge").chmod(0o700)
        with pytest.raises(
            pytest.skip.Exception,
            match=r"^nobody \(munged's socket\) cannot "
            rf"reach {state}/munge/munge.socket.2: {state}/munge \(mode 0700\)",
        ):
            skip_unless_cluster_reachable(conf)
        (folder / "clone").chmod(0o700)
        with pytest.raises(
            pytest.skip.Exception,
            match=r"^nobody \(the cluster's slurm.conf\) "
            rf"cannot reach {conf}: {folder}/clone \(mode 0700\); ",
        ):
            skip_unless_cluster_reachable(conf)


def test_the_blocking_folder_is_named_with_its_mode() -> None:
    with shared_folder("tb-blocking-") as folder:
        private = folder / "home"
        (private / "clone").mkdir(parents=True)
        private.chmod(0o700)
        assert blocking_folder(private / "clone") == f"{private} (mode 0700)"
        with pytest.raises(
            pytest.skip.Exception,
            match=rf"^nobody cannot reach {private}/clone: "
            rf"{private} \(mode 0700\); use a checkout others can read$",
        ):
            skip_unless_reachable(private / "clone")
        private.chmod(0o711)  # others may pass through
        assert blocking_folder(private / "clone") is None
        skip_unless_reachable(private / "clone")


@pytest.mark.slow
def test_a_clone_in_a_0700_folder_passes_the_tests_that_run_as_nobody() -> None:
    """git clone of this checkout's HEAD into a 0700 folder, then the plain as-nobody tests
    run there with this interpreter (the clone's tests, the clone's scripts)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (the tests run as the user nobody)")
    if not (REPO / ".git").exists() or not shutil.which("git"):
        pytest.skip(f"{REPO} is not a git checkout: nothing to clone")
    private = Path(tempfile.mkdtemp(prefix="tb-private-", dir="/tmp"))
    try:
        private.chmod(0o700)
        clone = private / "p"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)],
                       check=True, capture_output=True, timeout=300)  # fmt: skip
        assert blocking_folder(clone) == f"{private} (mode 0700)"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow",
             "-rs", *PLAIN],
            cwd=clone, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        out = done.stdout + done.stderr
        assert done.returncode == 0, out
        assert re.search(r"\b[1-9]\d* passed", out) and "skipped" not in out, out
        assert "Permission denied" not in out, out
    finally:
        shutil.rmtree(private, ignore_errors=True)
