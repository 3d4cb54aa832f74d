"""Real Spack, offline and private: extracted once from the offline mirror's ``spack/real``
(``$TOPOBIND_OFFLINE_MIRROR``, ``$TOPOBIND_SHARED`` or ``../shared``) into
``build/spack/``, run by a venv that holds ``clingo``, with every configuration scope inside
that directory (bootstrapping off, the builtin repository from the archive, a local mirror
with Spack's compiler-wrapper source, the system gcc found before the first concretize).

Nothing here knows what is checked: :mod:`~.check` says which commands run."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text
from topobind.spack_driver.locations import ARCHIVES_UPSTREAM, REPO, mirror_dir

SPACK_ARCHIVE = "spack-v1.1.0.tar.gz"
PACKAGES_ARCHIVE = "spack-packages-v2026.06.0.tar.gz"
WRAPPER_ARCHIVE = "compiler-wrapper-1.1.0.tar.gz"
# The sha256 the builtin compiler-wrapper@1.1.0 recipe expects: Spack looks the source up
# in a mirror under it (the archive's own checksum differs: installed with --no-checksum).
WRAPPER_SHA256 = "a07b35081d14b0729090bc1e5790a5dda2d5b997e064c62da39a1224ee249b2a"
# The most one Spack command may take here (a concretize on 2 busy cores: about 2 minutes).
TIMEOUT = 1200


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    output: str  # stdout and stderr, interleaved as Spack printed them

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def errors(self) -> list[str]:
        """Spack's own ``==> Error:`` lines (with their continuation lines)."""
        out: list[str] = []
        for line in self.output.splitlines():
            if line.startswith("==> Error") or (out and line.startswith((" ", "\t"))):
                out.append(line.rstrip())
            elif out and not line.strip():
                continue
            elif out and not line.startswith("==> "):
                out.append(line.rstrip())
        return out or self.output.strip().splitlines()[-12:]


class Spack:
    """One private Spack installation under ``root`` (default ``build/spack``)."""

    def __init__(self, root: Path | None = None, real: Path | None = None) -> None:
        self.root = (root or REPO / "build" / "spack").resolve()
        self.real = real or mirror_dir() / "spack" / "real"
        self.prefix = self.root / "spack"
        self.builtin = self.root / "spack-packages" / "repos" / "spack_repo" / "builtin"
        self.venv = self.root / "venv"
        self.site = self.prefix / "etc" / "spack"

    # ------------------------------------------------------------------ setup
    def missing_archives(self) -> list[str]:
        """The archives the offline mirror lacks (none: Spack can be prepared)."""
        paths = [self.real / n for n in (SPACK_ARCHIVE, PACKAGES_ARCHIVE, WRAPPER_ARCHIVE)]
        return [str(p) for p in paths if not p.is_file()]

    def archives(self) -> list[Path]:
        paths = [self.real / n for n in (SPACK_ARCHIVE, PACKAGES_ARCHIVE, WRAPPER_ARCHIVE)]
        missing = self.missing_archives()
        if missing:
            raise TopobindError(
                f"Spack archives not found in {self.real}: "
                f"{', '.join(Path(m).name for m in missing)}; set TOPOBIND_OFFLINE_MIRROR to a "
                f"folder whose {ARCHIVES_UPSTREAM} (see docs/install.md)"
            )
        return paths

    def key(self) -> str:
        """What this Spack is: the archives' names and sizes (they are read-only)."""
        return ";".join(f"{p.name}:{p.stat().st_size}" for p in self.archives())

    def prepare(self, say: Callable[[str], None]) -> None:
        """Extract, make the venv, write the configuration, find the compiler: once."""
        stamp = self.root / "prepared"
        if stamp.is_file() and stamp.read_text() == self.key():
            return
        spack_tgz, packages_tgz, wrapper_tgz = self.archives()
        stamp.unlink(missing_ok=True)
        for part in ("spack", "spack-packages", "venv", "mirror"):  # another Spack's, if any
            shutil.rmtree(self.root / part, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        say(f"extracting Spack into {self.root}")
        for archive in (spack_tgz, packages_tgz):
            with tarfile.open(archive) as tar:
                tar.extractall(self.root, filter="data")
        mirror = self.root / "mirror" / "_source-cache" / "archive" / WRAPPER_SHA256[:2]
        mirror.mkdir(parents=True)
        shutil.copyfile(wrapper_tgz, mirror / f"{WRAPPER_SHA256}.tar.gz")
        self._make_venv(say)
        self._write_config()
        say("spack compiler find (first use: Spack indexes the builtin repository)")
        found = self.run(["compiler", "find", "--scope", "site"])
        if not found.ok:
            raise TopobindError("spack compiler find failed: " + " ".join(found.errors()))
        atomic_write_text(stamp, self.key())

    def _make_venv(self, say: Callable[[str], None]) -> None:
        say("creating the venv with clingo (Spack's concretizer) from PyPI")
        base = Path(getattr(sys, "_base_executable", "") or sys.executable)
        python = shutil.which("python3", path="/usr/bin:/bin") or str(base)
        subprocess.run([python, "-m", "venv", str(self.venv)], check=True, timeout=300)
        pip = subprocess.run(
            [str(self.venv / "bin" / "pip"), "install", "-q", "clingo"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=600,
        )
        if pip.returncode != 0:
            raise TopobindError(
                f"pip install clingo failed ({pip.stderr.strip().splitlines()[-1:]}): Spack's "
                "concretizer needs it; check that PyPI is reachable"
            )

    def _write_config(self) -> None:
        files = {
            "bootstrap.yaml": "bootstrap:\n  enable: false\n",
            "repos.yaml": f"repos::\n  builtin: {self.builtin}\n",
            "config.yaml": (
                "config:\n"
                f"  install_tree:\n    root: {self.root / 'opt'}\n"
                f"  build_stage: [{self.root / 'stage'}]\n"
                f"  source_cache: {self.root / 'source-cache'}\n"
                f"  misc_cache: {self.root / 'cache' / 'misc'}\n"
                "  build_jobs: 2\n"
            ),
            "site/mirrors.yaml": f"mirrors::\n  local: file://{self.root / 'mirror'}\n",
        }
        for name, text in files.items():
            atomic_write_text(self.site / name, text)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One check at a time on this directory (make test and a manual run, say)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root.parent / "spack.lock-file", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    # ------------------------------------------------------------------ running
    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPACK_")}
        env.update(
            SPACK_PYTHON=str(self.venv / "bin" / "python"),
            SPACK_DISABLE_LOCAL_CONFIG="1",
            SPACK_USER_CONFIG_PATH=str(self.root / "user-config"),
            SPACK_USER_CACHE_PATH=str(self.root / "cache"),
        )
        env.update(extra or {})
        return env

    def run(self, args: list[str], extra_env: dict[str, str] | None = None) -> Result:
        argv = [str(self.prefix / "bin" / "spack"), *args]
        try:
            p = subprocess.run(
                argv,
                env=self.env(extra_env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else ""
            return Result(argv, 124, out + f"\n==> Error: timed out after {TIMEOUT} s")
        return Result(argv, p.returncode, p.stdout)


def files_hash(
    paths: list[Path], extra: str = "", skip: Callable[[Path], bool] | None = None
) -> str:
    """sha256 over the names and contents of ``paths`` (directories: every file below but
    those ``skip`` names: build outputs)."""
    h = hashlib.sha256(extra.encode())
    for path in paths:
        files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
        for f in files:
            if "__pycache__" in f.parts or (skip is not None and skip(f)):
                continue
            h.update(str(f).encode() + b"\0")
            h.update(f.read_bytes() if f.is_file() else b"(missing)")
    return h.hexdigest()
