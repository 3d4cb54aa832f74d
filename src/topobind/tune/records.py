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
import re
from typing import Any, NamedTuple

from topobind.errors import TopobindError
from topobind.inputs import InputFile
from topobind.paths import state_dir
from topobind.topo.topology import Topology

SCHEMA = "topobind.tune/2"
#: a gain outside these (as a fraction: -100 % .. 10,000 %) is a corrupt record
GAIN_RANGE = (-1.0, 100.0)
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
    winner: bool  # a winner (else: a group, no difference or the plain launch)
    gains: dict[str, tuple[float, float, float | None]]  # whom: estimate, low, high (None: inf)
    verdict: str
    when: str
    busy: bool = False  # tuned on a busy node (other processes' load beyond validate's rule)


def key(program: str, argv: list[str], node: str, nodes: int) -> str:
    """The record's file name: one record per program, arguments, node type and job size."""
    text = "\0".join([program, *argv[1:], node, str(nodes)])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def latest_key(program: str | None, node: str, nodes: int) -> str:
    """The index file naming the newest record of a program (None: of any program) on a
    node type and job size: ``--layout auto`` reads it and one record, whatever the folder
    holds."""
    text = "\0".join([program or "", node, str(nodes)])
    return hashlib.sha256(text.encode()).hexdigest()[:20] + ".latest"


def shown(text: str, limit: int = 200) -> str:
    """Record text for a terminal: control and other unprintable characters escaped (a
    hand-edited record could set the terminal's title or clear it), at most ``limit``."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


def lookup(program: str | None, argv: list[str] | None, node: str,
           nodes: int) -> tuple[Record | None, str | None]:  # fmt: skip
    """The record for ``program`` (its arguments' first, else the program's newest; None:
    the newest of the one program tuned here) in O(1) files: (record, why none can be
    used) with ``why`` one line when a file is there but unusable."""
    where = records_dir()
    names = [key(program, argv, node, nodes) + ".json"] if program and argv else []
    names.append(latest_key(program, node, nodes))
    for name in names:
        path = os.path.join(where, name)
        if not os.path.lexists(path):
            continue
        try:
            if name.endswith(".latest"):
                target = RECORD_FILE.read_text(path).strip()
                if target.startswith("many:"):  # several programs: the caller names one
                    return None, target
                if not re.fullmatch(r"[0-9a-f]{20}\.json", target):
                    raise ValueError(f"the index names {shown(target, 60)!r}")
                path = os.path.join(where, target)
            rec = _parse(path)
            _check_owner(path)
        except TopobindError as exc:
            return None, str(exc)
        except OlderRecord as exc:
            return None, exc.line(path)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            return None, f"{path}: not a tune record ({shown(str(exc), 80)}); remove it"
        if rec.node_type != node or rec.nodes != nodes or (program and rec.program != program):
            return None, (f"{path}: a record of another program or node type; remove it")
        return rec, None
    return None, None


def _check_owner(path: str) -> None:
    st = os.stat(path)
    if st.st_uid != os.geteuid():
        raise TopobindError(f"{path}: a tune record of another user (uid {st.st_uid}); not "
                            "used: set TOPOBIND_STATE_DIR to a folder of yours")  # fmt: skip


def _index(where: str, doc: dict[str, Any], name: str) -> None:
    """The index files of a record just written: its program's newest, and this node
    type's (``many:`` once a second program is tuned there)."""
    from topobind.fsutil import atomic_write_text

    node, nodes, program = doc["node_type"], doc["nodes"], doc["program"]
    atomic_write_text(os.path.join(where, latest_key(program, node, nodes)), name + "\n")
    anyone = os.path.join(where, latest_key(None, node, nodes))
    try:
        before = _parse(os.path.join(where, RECORD_FILE.read_text(anyone).strip()))
        other = before.program != program
    except (TopobindError, ValueError, KeyError, TypeError, AttributeError, OSError):
        other = False  # none yet (or "many:", or unreadable: replaced)
    try:
        many = RECORD_FILE.read_text(anyone).startswith("many:")
    except (TopobindError, OSError):
        many = False
    text = "many: several programs have tune records for this node type" if other or many \
        else name  # fmt: skip
    atomic_write_text(anyone, text + "\n")


def check_writable() -> None:
    """The records' folder made and checked writable by this user, before any run."""
    where = records_dir()
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        ok = os.access(where, os.W_OK | os.X_OK)
        why = "permission denied"
    except OSError as exc:
        ok, why = False, (exc.strerror or str(exc)).lower()
    if not ok:
        raise TopobindError(f"the tune records' folder {where} is not writable ({why}); set "
                            "TOPOBIND_STATE_DIR to a folder of yours")  # fmt: skip


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
        _index(where, doc, os.path.basename(path))
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
        except OlderRecord as exc:
            bad.append(exc.line(path))
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


class OlderRecord(ValueError):
    """A record of an earlier topobind.tune/N: not used, and said so with the fix."""

    def line(self, path: str) -> str:
        return (
            f"{path}: a {self} record of an older topobind, not used (its claims were "
            "not held at one error rate over the session); run topobind tune again"
        )


def _parse(path: str) -> Record:
    doc = json.loads(RECORD_FILE.read_text(path))
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema == "topobind.tune/1":
        raise OlderRecord(schema)
    if not isinstance(doc, dict) or schema != SCHEMA:
        raise ValueError(f"schema is not {SCHEMA}")
    choice = _choice(doc["choice"])
    winner = doc.get("winner") or {}
    if not isinstance(winner, dict):
        raise ValueError("'winner' is not an object")
    argv = doc["argv"]
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv is not a list of words")
    return Record(path, str(doc["program"]), str(doc["sha256"]), str(doc["node_type"]),
                  _count(doc["nodes"]), tuple(argv), choice, bool(winner),
                  _gains(doc.get("gains")), str(doc.get("verdict", "")),
                  str(doc["when"]), doc.get("busy") is True)  # fmt: skip


def _gains(doc: object) -> dict[str, tuple[float, float, float | None]]:
    """The record's gains, each [estimate, low, high or null]: finite and within
    :data:`GAIN_RANGE`, else the record is corrupt."""
    if doc is None:
        return {}
    if not isinstance(doc, dict) or not set(doc) <= {"baseline", "runner-up"}:
        raise ValueError("'gains' is not an object of baseline and runner-up")
    out = {}
    for whom, g in doc.items():
        if not isinstance(g, list) or len(g) != 3 or not all(
                x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                for x in g) or g[0] is None or g[1] is None:  # fmt: skip
            raise ValueError(f"gain over the {whom} is not [estimate, low, high]")
        for x in g:
            if x is not None and not (math.isfinite(x) and GAIN_RANGE[0] <= x <= GAIN_RANGE[1]):
                raise ValueError(f"gain over the {whom} {x!r} is outside -100 % .. 10,000 %")
        out[whom] = (float(g[0]), float(g[1]), None if g[2] is None else float(g[2]))
    return out


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
