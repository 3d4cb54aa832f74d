"""Which MPI library a program links: its ELF ``DT_NEEDED`` names and run path, read once on
the batch host with a bounded read (headers and the dynamic section, at most a few MiB),
then the library found as the loader would (run path, ``LD_LIBRARY_PATH``, the system's
directories) and matched to the launcher installed with it."""

from __future__ import annotations

import glob
import os
import struct
from dataclasses import dataclass

from topobind.errors import TopobindError

#: read no more than this from a program (program headers, dynamic section, its strings)
MAX_READ = 4 << 20
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 1, 5, 10, 15, 29
#: the soname prefix of each MPI family (MPICH ABI: MPICH, Intel MPI, Cray MPICH, MVAPICH)
FAMILIES = {"libmpi.so.40": "openmpi", "libmpi.so.12": "mpich", "libmpich.so": "mpich"}


@dataclass(frozen=True)
class Linked:
    """A program's MPI: ``soname`` as linked, ``family``, ``library``: the file the loader
    would open (None when not found here)."""

    program: str
    soname: str
    family: str
    library: str | None


def dynamic_entries(path: str) -> tuple[list[str], list[str]]:
    """(DT_NEEDED names, run path directories) of an ELF64 little-endian file; ([], []) for
    anything else (a script, a static program)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return [], []
            phoff, phentsize, phnum = _u64(head, 32), _u16(head, 54), _u16(head, 56)
            if phnum * phentsize > MAX_READ:
                return [], []
            fh.seek(phoff)
            table = fh.read(phnum * phentsize)
            loads, dyn = [], None
            for i in range(phnum):
                p = table[i * phentsize : (i + 1) * phentsize]
                if len(p) < 56:
                    break
                kind, offset, vaddr, filesz = _u32(p, 0), _u64(p, 8), _u64(p, 16), _u64(p, 32)
                if kind == PT_LOAD:
                    loads.append((vaddr, offset, filesz))
                elif kind == PT_DYNAMIC:
                    dyn = (offset, min(filesz, MAX_READ))
            if dyn is None:
                return [], []
            fh.seek(dyn[0])
            raw = fh.read(dyn[1])
            entries = [struct.unpack_from("<qQ", raw, k) for k in range(0, len(raw) - 15, 16)]
            tags = {t: v for t, v in entries if t in (DT_STRTAB, DT_STRSZ)}
            strtab = _file_offset(loads, tags.get(DT_STRTAB, 0))
            if strtab is None:
                return [], []
            fh.seek(strtab)
            strings = fh.read(min(tags.get(DT_STRSZ, MAX_READ), MAX_READ))
    except OSError as exc:
        raise TopobindError(f"cannot read program {path}: {exc.strerror or exc}") from exc
    needed, runpath = [], []
    for tag, value in entries:
        if tag == DT_NEEDED:
            needed.append(_cstr(strings, value))
        elif tag in (DT_RPATH, DT_RUNPATH):
            runpath += [d for d in _cstr(strings, value).split(":") if d]
    origin = os.path.dirname(os.path.realpath(path))
    return needed, [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in runpath]


def linked_mpi(path: str) -> Linked | None:
    """The MPI ``path`` links, or None (not an MPI program, not ELF)."""
    needed, runpath = dynamic_entries(path)
    for name in needed:
        family = next((f for p, f in FAMILIES.items() if name.startswith(p)), None)
        if family:
            return Linked(path, name, family, find_library(name, runpath))
    return None


def find_library(name: str, runpath: list[str]) -> str | None:
    """The file the loader would open for ``name``: ``LD_LIBRARY_PATH``, then ``runpath``,
    then the system's directories; None when none has it."""
    env = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    system = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
              "/lib", "/usr/lib", *sorted(glob.glob("/usr/lib/*-linux-gnu"))]  # fmt: skip
    for d in [*env, *runpath, *system]:
        f = os.path.join(d, name)
        if os.path.exists(f):
            return os.path.realpath(f)
    return None


def is_intel_mpi(linked: Linked) -> bool:
    """Intel MPI's libmpi.so.12 (MPICH ABI): its directory, or the one above (oneAPI's
    ``lib/release/``), also holds Intel's ILP64 library ``libmpi_ilp64.so``, which MPICH,
    Cray MPICH and MVAPICH do not ship."""
    if linked.library is None:
        return False
    here = os.path.dirname(linked.library)
    dirs = (here, os.path.dirname(here))
    return any(glob.glob(os.path.join(d, "libmpi_ilp64.so*")) for d in dirs)


def _file_offset(loads: list[tuple[int, int, int]], vaddr: int) -> int | None:
    for start, offset, size in loads:
        if start <= vaddr < start + size:
            return offset + vaddr - start
    return None


def _cstr(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at : end if end >= 0 else len(data)].decode(errors="replace")


def _u16(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<H", b, at)[0])


def _u32(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", b, at)[0])


def _u64(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<Q", b, at)[0])
