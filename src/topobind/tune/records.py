"""``topobind tune``'s records: what a session chose, per program (its path and a SHA-256 of
the executable), node type (:func:`node_type`: a fingerprint of the topology) and job size
(nodes), one small JSON file each in the user's state folder
(:func:`topobind.paths.state_dir`). Plain
``NamedTuple``s: ``--layout auto`` reads them on the job-script path (no dataclasses)."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from typing import Any, NamedTuple

from topobind.errors import TopobindError
from topobind.inputs import InputFile
from topobind.paths import state_dir
from topobind.topo.topology import Topology

SCHEMA = "topobind.tune/1"
#: records read at most (the newest), and the size of one
MAX_RECORDS = 1000
#: folder entries looked at at most (a folder of millions of files costs no more)
MAX_SCAN = 100_000
MAX_RECORD_BYTES = 1 << 20
#: bytes of an executable hashed at most (a bigger one: its first bytes, size and mtime)
MAX_HASH_BYTES = 1 << 30


def records_dir() -> str:
    return os.path.join(state_dir(), "tune")


def node_type(topo: Topology) -> str:
    """A fingerprint of the node's type: packages, cores and PUs per core, NUMA nodes and
    their PUs, shared caches and their sizes, GPUs (vendor, model); not the host name, so
    every node of a kind shares it, and not the NUMA nodes' memory, which hwloc gives less
    the hugepage pools (reserving pages must not make another node type)."""
    parts = [
        f"pkg{len(topo.packages)}",
        "cores:" + ",".join(str(len(c.pus)) for c in topo.cores),
        "numa:" + ",".join(str(len(n.pus)) for n in topo.numa_nodes),
        "l3:" + ",".join(f"{d.level}:{d.size_bytes}:{len(d.pus)}" for d in topo.l3_domains),
        "gpu:" + ",".join(sorted(f"{g.vendor}:{g.model}" for g in topo.devices.gpus)),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def node_summary(topo: Topology) -> str:
    pus = sum(len(c.pus) for c in topo.cores)
    return (f"{len(topo.packages)} package(s), {len(topo.cores)} cores, {pus} PUs, "
            f"{len(topo.numa_nodes)} NUMA node(s)")  # fmt: skip


def program_hash(path: str) -> str:
    """SHA-256 of the executable (its first :data:`MAX_HASH_BYTES`, with its size)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            h.update(str(os.fstat(f.fileno()).st_size).encode())
            left = MAX_HASH_BYTES
            while left > 0 and (chunk := f.read(min(left, 1 << 20))):
                h.update(chunk)
                left -= len(chunk)
    except OSError as exc:
        raise TopobindError(f"cannot read {path} to hash it ({exc.strerror})") from None
    return h.hexdigest()


class Choice(NamedTuple):
    """What a record chose for ``topobind run``."""

    layout: str
    mem: str
    pages: str
    ranks: int | None
    threads: int | None

    def words(self) -> str:
        out = [f"--layout {self.layout}", f"--mem {self.mem}", f"--pages {self.pages}"]
        out += [f"--ranks {self.ranks}"] if self.ranks else []
        out += [f"--threads {self.threads}"] if self.threads else []
        return " ".join(out)


class Record(NamedTuple):
    path: str  # the record file
    program: str
    sha256: str
    node_type: str
    nodes: int
    argv: tuple[str, ...]  # the command line tuned (the program's arguments too)
    choice: Choice
    winner: bool  # a winner (False: no significant difference, the simplest recommended)
    gain: float | None
    when: str


def key(program: str, argv: list[str], node: str, nodes: int) -> str:
    """The record's file name: one record per program, arguments, node type and job size."""
    text = "\0".join([program, *argv[1:], node, str(nodes)])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def write(doc: dict[str, Any]) -> str:
    """Write a session's record (atomically) and return its path."""
    from topobind.fsutil import atomic_write_text  # only when a record is written

    where = records_dir()
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        path = os.path.join(
            where, key(doc["program"], doc["argv"], doc["node_type"], doc["nodes"]) + ".json"
        )
        atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise TopobindError(f"cannot write the tune record in {where} ({exc.strerror}); set "
                            "TOPOBIND_STATE_DIR to a writable folder") from None  # fmt: skip
    return path


def read_all() -> tuple[list[Record], list[str]]:
    """Every readable record (newest first) and one line per unreadable file."""
    where = records_dir()
    try:  # the newest MAX_RECORDS by modification time (names are hashes: no order)
        with os.scandir(where) as it:
            found = [(_mtime(e), e.name) for e in itertools.islice(it, MAX_SCAN)
                     if e.name.endswith(".json")]  # fmt: skip
    except OSError:
        return [], []
    out, bad = [], []
    for _, name in sorted(found, reverse=True)[:MAX_RECORDS]:
        path = os.path.join(where, name)
        try:
            out.append(_parse(path))
        except TopobindError as exc:  # not a regular file, too big, not UTF-8
            bad.append(str(exc))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            why = f"no field {exc}" if isinstance(exc, KeyError) else str(exc)
            bad.append(f"{path}: not a tune record ({why[:80]}); remove it")
    out.sort(key=lambda r: r.when, reverse=True)
    return out, bad


#: a record file is read as any input file: never a FIFO or device (the state folder may hold
#: anything), bounded in size, UTF-8
RECORD_FILE = InputFile(
    "the tune record", MAX_RECORD_BYTES, "remove it (topobind tune writes it again)"
)


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _parse(path: str) -> Record:
    doc = json.loads(RECORD_FILE.read_text(path))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"schema is not {SCHEMA}")
    choice = _choice(doc["choice"])
    winner = doc.get("winner") or {}
    if not isinstance(winner, dict):
        raise ValueError("'winner' is not an object")
    gain = winner.get("gain")
    argv = doc["argv"]
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv is not a list of words")
    return Record(path, str(doc["program"]), str(doc["sha256"]), str(doc["node_type"]),
                  _count(doc["nodes"]), tuple(argv), choice, bool(winner),
                  float(gain) if isinstance(gain, (int, float)) and math.isfinite(gain) else None,
                  str(doc["when"]))  # fmt: skip


def _choice(c: dict[str, Any]) -> Choice:
    """The record's choice, each word one that ``topobind tune`` offers (a hand-edited
    'auto' or unknown layout would fail the run it is meant to place)."""
    from topobind.plan import layouts, memory

    layout, mem, pages = str(c["layout"]), str(c["mem"]), str(c["pages"])
    try:
        layouts.parse_layout(layout)
    except TopobindError as exc:
        raise ValueError(f"layout {layout[:40]!r}: {exc}") from None
    if (
        layout == "auto"
        or mem not in memory.POLICIES
        or pages == "auto"
        or pages not in memory.PAGES
    ):
        raise ValueError(f"'{layout[:40]}', '{mem[:40]}', '{pages[:40]}' is no choice of tune")
    return Choice(layout, mem, pages, _opt_int(c.get("ranks")), _opt_int(c.get("threads")))


def _opt_int(value: object) -> int | None:
    return None if value is None else _count(value)


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 1 << 20:
        raise ValueError(f"{value!r} is not a count")
    return value
