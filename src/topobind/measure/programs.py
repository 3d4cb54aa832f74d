"""Python side of the C kernels: find the binaries, run them, read and check their results.

The kernels (``kernels/``: stream, dgemm, latency, c2c, whereami, whereami-mpi) write one JSON
document per run in the format ``topobind.result/1`` (``schemas/result.schema.json``,
``docs/results-format.md``). The rank step (``rankstep/``: rankexec, the LD_PRELOAD shim
libtbhugepages.so) is found the same way.

* :func:`find_kernel` / :func:`run_kernel` locate a binary (``TOPOBIND_KERNELS_DIR``, then
  ``kernels/bin`` and ``rankstep/bin`` of this repository or of the installed package (a
  wheel's), then ``PATH``) and run it with
  ``--json``.
Results are parsed and validated by :mod:`topobind.measure.results`.
The hugetlb page pools (status, reservation) are :mod:`topobind.measure.hugepages`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from topobind.errors import TopobindError
from topobind.paths import data_root, in_checkout, location
from topobind.runner import run_process

if TYPE_CHECKING:  # results (its json, stats and kernel registry) only where one is read:
    # topobind run finds the per-rank step here on every start-up and reads no result
    from topobind.measure.results import Result

HUGEPAGE_SHIM = "libtbhugepages.so"

#: exit statuses of the kernels (libtb/include/tb/util.h)
EXIT_USAGE = 2
EXIT_PAGES = 3
EXIT_INVALID = 4

_REPO = data_root()  # the checkout, or the installed package (a wheel's C parts)
_REPO_KERNELS_BIN = _REPO / "kernels" / "bin"
#: where ``make`` puts the binaries in a checkout (and a wheel, inside the package): the
#: kernels, then the rank step (rankexec, the shim); an installation (``make
#: kernels-install``, Spack) has them all in one bin/
_REPO_BINS = (_REPO_KERNELS_BIN, _REPO / "rankstep" / "bin")


# --------------------------------------------------------------------------- locating + running
def kernels_dir() -> Path | None:
    """Directory holding the built kernels, or None when only PATH can help."""
    env = location("TOPOBIND_KERNELS_DIR")  # a relative one is ignored (topobind.paths)
    if env:
        return env
    if _REPO_KERNELS_BIN.is_dir():
        return _REPO_KERNELS_BIN
    return None


def find_kernel(name: str) -> Path:
    """Path of kernel binary ``name`` (or ``rankexec``, or the shim ``libtbhugepages.so``).

    ``$TOPOBIND_KERNELS_DIR`` when set to an absolute path (and only there: an explicit choice
    is not second-guessed); otherwise ``kernels/bin`` and ``rankstep/bin`` of this repository,
    then ``PATH``.
    """
    env = location("TOPOBIND_KERNELS_DIR")
    for d in (env,) if env else _REPO_BINS:
        p = d / name
        if p.is_file() and (name.endswith(".so") or os.access(p, os.X_OK)):
            return p
    found = None if env else shutil.which(name)
    if found and not name.endswith(".so"):
        return Path(found)
    where = f"$TOPOBIND_KERNELS_DIR={env}" if env else " or ".join(map(str, _REPO_BINS))
    fix = (
        "build it with 'make kernels'"
        if in_checkout()
        else "this installation was built without it (dgemm needs OpenBLAS, whereami-mpi an MPI "
        "compiler wrapper where pip builds the wheel): reinstall where they are found"
    )
    raise TopobindError(
        f"kernel {name!r} not found in {where} or PATH; {fix} (or set TOPOBIND_KERNELS_DIR)"
    )


class KernelError(TopobindError):
    """A kernel exited with a failure status; ``returncode`` and ``stderr`` are kept."""

    def __init__(self, message: str, returncode: int, stderr: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class KernelRun:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _merge_env(env: Mapping[str, str | None] | None) -> dict[str, str]:
    merged = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = str(v)
    return merged


def run_kernel_raw(
    name: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 600.0,
    launcher: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
) -> KernelRun:
    """Run a kernel (optionally behind ``launcher``, e.g. ``["mpirun", "-np", "2"]``) as is.

    ``env`` entries override the current environment; a value of None removes the variable.
    """

    exe = find_kernel(name)
    argv = (*launcher, str(exe), *args)
    t0 = time.monotonic()
    proc = run_process(
        argv,
        env=_merge_env(env),
        capture=True,
        capture_stderr=True,
        timeout=timeout,
        cwd=cwd,
        what=name,
    )
    return KernelRun(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def run_kernel(
    name: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 600.0,
    json_path: str | os.PathLike[str] | None = None,
    launcher: Sequence[str] = (),
) -> Result:
    """Run kernel ``name`` with ``args`` plus ``--json FILE`` and return its validated result.

    A result that ran but does not validate (exit status 4) is returned with ``valid=False``;
    any other failure raises :class:`KernelError` carrying the kernel's one-line message.
    ``launcher``: what runs the kernel (``rankexec FILE``: the per-rank step).
    """
    with tempfile.TemporaryDirectory(prefix="topobind-kernel-") as tmp:
        out = Path(json_path) if json_path is not None else Path(tmp) / f"{name}.json"
        run = run_kernel_raw(
            name, [*args, "--json", str(out)], env=env, timeout=timeout, launcher=launcher
        )
        if run.returncode not in (0, EXIT_INVALID) or not out.exists():
            raise KernelError(
                f"{name} exited with status {run.returncode}: {_last_line(run.stderr)}",
                run.returncode,
                run.stderr,
            )
        from topobind.measure.results import load_result

        return load_result(out)


# --------------------------------------------------------------------------- hugepages
