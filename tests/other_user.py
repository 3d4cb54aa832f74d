"""Tests that run something as another user (``nobody`` through ``setpriv``, a Slurm job of
``sbatch --uid=nobody``): that user reaches only what every user may read, and a checkout
may live in a private folder (a home of mode 0700 on Debian 12, ``/root``: issue 47 item 3).

So such a test never hands that user a path inside the checkout: it copies what the user
needs into a folder of its own under /tmp (:func:`shared_folder`, mode 0755, removed after),
or skips with one line naming the folder that stops the user and its mode
(:func:`skip_unless_reachable`; a Slurm cluster's configuration and munged's socket cannot
be copied: :func:`skip_unless_cluster_reachable`). ``tests/packaging/test_other_user.py``
holds every test file that runs as another user to this helper, and runs them from a clone
in a 0700 folder.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NOBODY = 65534
#: run a command as nobody: ``[*SETPRIV_NOBODY, "--", *argv]``
SETPRIV_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
#: the working folder of another user's command that reads no file (``sbatch -D``): one every
#: user may enter, not the checkout's
ANY_USER_DIR = "/tmp"


def blocking_folder(path: str | os.PathLike[str]) -> str | None:
    """The first folder on the way to ``path`` that other users cannot enter, as
    ``'/root (mode 0700)'``; None when every folder lets them through."""
    here = Path(path).resolve()
    for folder in [*reversed(here.parents), *([here] if here.is_dir() else [])]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            return f"{folder} (mode {stat.S_IMODE(mode):04o})"
    return None


def skip_unless_reachable(path: str | os.PathLike[str], who: str = "nobody") -> None:
    """Skip the test, in one line naming the folder and its mode, when ``who`` cannot reach
    ``path`` (a checkout in a private folder)."""
    blocked = blocking_folder(path)
    if blocked is not None:
        pytest.skip(f"{who} cannot reach {path}: {blocked}; use a checkout others can read")


@contextmanager
def shared_folder(prefix: str = "tb-other-user-") -> Iterator[Path]:
    """A new folder under /tmp (mode 0755) for what another user reads; removed after."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def copy_readable(source: str | os.PathLike[str], folder: Path) -> Path:
    """``source`` copied into ``folder``, readable (and, if it was, executable) by all."""
    dst = folder / Path(source).name
    shutil.copyfile(source, dst)
    dst.chmod(0o755 if os.access(source, os.X_OK) else 0o644)
    return dst


def skip_unless_cluster_reachable(conf: str | os.PathLike[str]) -> None:
    """Skip, in one line, unless nobody reaches a Slurm cluster's ``slurm.conf`` and munged's
    socket: another user's sbatch reads both, and so does the job's own srun, whose SLURM_CONF
    slurmd sets to its own file (a copy would not do). A cluster's state folder is in the
    checkout by default (scripts/local-slurm), so a checkout in a 0700 folder skips."""
    skip_unless_reachable(conf, "nobody (the cluster's slurm.conf)")
    for line in Path(conf).read_text().splitlines():
        if line.startswith("AuthInfo=") and "socket=" in line:
            socket = line.split("socket=", 1)[1].split(",")[0].strip()
            skip_unless_reachable(socket, "nobody (munged's socket)")
