"""``--layout auto`` (run, env, plan): the choice of ``topobind tune``'s record for the same
program (path and executable hash), node type and job size; compact, with a note, when there
is none or it is stale (the executable changed since). Imported only for ``--layout auto``."""

from __future__ import annotations

import os
import shlex
import shutil

from topobind.errors import plural
from topobind.topo.manager import detect
from topobind.topo.topology import Topology
from topobind.tune import records
from topobind.tune.records import Choice

FALLBACK = Choice("compact", "local", "thp", None, None)


def job_nodes() -> int:
    return detect().nodes


def choose(topo: Topology, argv: list[str] | None) -> tuple[Choice, str]:
    """The choice for the command line ``argv`` (None: env and plan, which name none) and the
    one line that says which record and what it chose, or why compact. The record of the
    same arguments first, else the newest for the same program (said)."""
    program = argv[0] if argv else None
    node, nodes = records.node_type(topo), job_nodes()
    found, bad = records.read_all()
    here = [r for r in found if r.node_type == node and r.nodes == nodes]
    path = _resolve(program) if program else None
    if program is not None:
        mine = [r for r in here if r.program == path]
    else:
        mine = here if len({r.program for r in here}) == 1 else []
        if len({r.program for r in here}) > 1:
            return FALLBACK, (f"--layout auto: {len({r.program for r in here})} programs have "
                              "tune records for this node type; name the program "
                              "(topobind run --layout auto -- PROGRAM): compact")  # fmt: skip
    if not mine:
        what = f" for {path or program}" if program else ""
        unread = (f" ({plural(len(bad), 'unreadable record')} in {records.records_dir()}: "
                  "topobind tune --list names them)") if bad else ""  # fmt: skip
        return FALLBACK, (f"--layout auto: no tune record{what} on this node type "
                          f"({node}, {plural(nodes, 'node')}){unread}; run topobind tune "
                          "first: compact")  # fmt: skip
    same = [r for r in mine if argv is not None and list(r.argv[1:]) == list(argv[1:])]
    rec = (same or mine)[0]
    other = "" if same or argv is None else f", tuned with other arguments ({shlex.join(rec.argv)})"
    if path is not None and os.path.isfile(path) and records.program_hash(path) != rec.sha256:
        return FALLBACK, (f"--layout auto: the tune record {rec.path} is stale ({path} changed "
                          "since it was tuned); not used: compact; tune again")  # fmt: skip
    how = (
        f"winner, {rec.gain * 100:.1f} % faster than the runner-up and the baseline"
        if rec.winner and rec.gain is not None
        else "no significant difference: the simplest"
    )
    return rec.choice, (f"--layout auto: tune record {rec.path} ({rec.when[:19]}; {how}{other}): "
                        f"{rec.choice.words()}")  # fmt: skip


def _resolve(program: str) -> str:
    path = program if "/" in program else shutil.which(program) or program
    return os.path.realpath(path)
