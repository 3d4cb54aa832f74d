"""``topobind spack externals``: a ``packages:`` section of this machine's externals.

Detected the way ``spack external find`` does it: from the executables present (their
``--version`` output) and, for libraries, from the installed files; prefixes are the
directory above ``bin/`` or ``lib/``. Versions are written in Spack's spelling (Slurm's
``22.05.8`` is ``22-05-8-1`` in Spack's recipe).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class External:
    package: str
    version: str
    prefix: str
    extra: str = ""  # variants in the spec
    buildable: bool = True
    source: str = ""  # how it was found

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}{(' ' + self.extra) if self.extra else ''}"


def _out(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout + p.stderr


def _prefix(exe: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.realpath(exe)))


def _exe(name: str, prefer: str | None = None) -> str | None:
    if prefer and os.access(prefer, os.X_OK):
        return prefer
    return shutil.which(name)


def detect() -> list[External]:
    found: list[External] = []
    exe = _exe("lstopo-no-graphics")
    if exe:
        m = re.search(r"(\d+\.\d+\.\d+)", _out([exe, "--version"]))
        if m:
            found.append(External("hwloc", m.group(1), _prefix(exe), "+libxml2", True, exe))
    exe = _exe("ompi_info", "/usr/bin/ompi_info") or _exe("mpirun", "/usr/bin/mpirun")
    if exe:
        m = re.search(r"Open MPI\)?:?\s+v?(\d+\.\d+\.\d+)", _out([exe, "--version"]))
        if m:
            found.append(
                External("openmpi", m.group(1), _prefix(exe), "schedulers=slurm", True, exe)
            )
    exe = _exe("slurmd", "/usr/sbin/slurmd") or _exe("srun")
    if exe:  # srun --version needs a reachable configuration; slurmd -V does not
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", _out([exe, "-V"]))
        if m:
            version = f"{int(m.group(1)):02d}-{int(m.group(2)):02d}-{m.group(3)}-1"
            found.append(
                External("slurm", version, _prefix(exe), "sysconfdir=/etc/slurm", False, exe)
            )
    exe = _exe("munged", "/usr/sbin/munged")
    if exe:
        m = re.search(r"munge-(\d+\.\d+\.\d+)", _out([exe, "--version"]))
        if m:
            found.append(External("munge", m.group(1), _prefix(exe), "", False, exe))
    libs = sorted(
        glob.glob("/usr/lib/*/libopenblas*.so.*") + glob.glob("/usr/lib/libopenblas*.so.*")
    )
    if libs:
        version = _dpkg_version("libopenblas0") or _dpkg_version("libopenblas-dev")
        if version:
            found.append(External("openblas", version, "/usr", "", True, libs[0]))
    pmix = sorted(glob.glob("/usr/lib/*/libpmix.so.*"))
    if pmix:
        version = _dpkg_version("libpmix2")
        if version:
            found.append(External("pmix", version, "/usr", "", False, pmix[0]))
    exe = _exe("python3", "/usr/bin/python3")
    if exe:
        m = re.search(r"Python (\d+\.\d+\.\d+)", _out([exe, "--version"]))
        if m:
            found.append(External("python", m.group(1), _prefix(exe), "", True, exe))
    return found


def _dpkg_version(package: str) -> str | None:
    out = _out(["dpkg-query", "-W", "-f=${Version}", package]).strip()
    m = re.match(r"(?:\d+:)?(\d+(?:\.\d+)+)", out)
    return m.group(1) if m else None


def packages_yaml(found: list[External]) -> str:
    lines = [
        "# Externals found on this machine by `topobind spack externals`",
        "# (paste into site_configs/SITE/spack-packages.yaml).",
        "packages:",
    ]
    for ext in found:
        lines.append(f"  {ext.package}:")
        if not ext.buildable:
            lines.append("    buildable: false")
        lines.append("    externals:")
        lines.append(f'    - spec: "{ext.spec}"')
        lines.append(f"      prefix: {ext.prefix}")
    return "\n".join(lines) + "\n"
