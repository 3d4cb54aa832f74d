"""Running the topobind command from the tests: the console script installed beside the
interpreter that runs them (``.venv/bin/topobind`` after ``make setup``; no path is written
down), and one runner. ``conftest.py`` offers the runner as the ``topobind_cli`` fixture."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: the ``topobind`` console script of this interpreter's environment
TOPOBIND = str(Path(sys.executable).with_name("topobind"))


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
