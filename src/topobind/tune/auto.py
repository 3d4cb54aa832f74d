"""``--layout auto`` (run, env, plan): the choice of ``topobind tune``'s record for the same
program (path and executable hash), node type and job size, found in O(1) files through the
records' index (:func:`topobind.tune.records.lookup`); compact, with a note, when there is
none, it is stale (the executable changed since), of another user, or corrupt. Options the
user gave (``--pages``, ``--mem``, ``--ranks``, ``--threads``) win over the record, said in
the line; a choice this node cannot honour now (a hugepage pool used up, a NUMA node gone)
falls back to compact with the user's options, in one line, never a failed job. Imported
only for ``--layout auto``."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping

from topobind.errors import TopobindError, plural
from topobind.plan.request import PlanRequest
from topobind.topo.manager import detect
from topobind.topo.topology import Topology
from topobind.tune import records
from topobind.tune.records import Choice, Record, shown

FALLBACK = Choice("compact", "local", "thp", None, None)
#: the record's fields an option of the user's replaces
FIELDS = ("mem", "pages", "ranks", "threads")


def job_nodes() -> int:
    return detect().nodes


def choose(topo: Topology, argv: list[str] | None) -> tuple[Choice, str]:
    """The choice for the command line ``argv`` (None: env and plan, which name none) and the
    one line that says which record and what it chose, or why compact. The record of the
    same arguments first, else the newest for the same program (said)."""
    program = argv[0] if argv else None
    node, nodes = records.node_type(topo), job_nodes()
    path = _resolve(program) if program else None
    rec, why = records.lookup(path, argv, node, nodes)
    if rec is None and why is not None and why.startswith("many:"):
        return FALLBACK, ("--layout auto: several programs have tune records for this node "
                          "type; name the program (topobind run --layout auto -- PROGRAM): "
                          "compact")  # fmt: skip
    if rec is None:
        what = f" for {shown(path or program or '')}" if program else ""
        bad, usable = (f" ({shown(why, 300)})", "usable ") if why else ("", "")
        return FALLBACK, (f"--layout auto: no {usable}tune record{what} on this node type "
                          f"({node}, {plural(nodes, 'node')}){bad}; run topobind tune "
                          "first: compact")  # fmt: skip
    same = argv is not None and list(rec.argv[1:]) == list(argv[1:])
    other = "" if same or argv is None else (
        f", tuned with other arguments ({shown(shlex.join(rec.argv))})")  # fmt: skip
    if path is not None and os.path.isfile(path) and records.program_hash(path) != rec.sha256:
        return FALLBACK, (f"--layout auto: the tune record {rec.path} is stale "
                          f"({shown(path)} changed since it was tuned); not used: compact; "
                          "tune again")  # fmt: skip
    return rec.choice, (f"--layout auto: tune record {rec.path} ({shown(rec.when[:19])}; "
                        f"{how(rec)}{other}): {rec.choice.words()}")  # fmt: skip


def how(rec: Record) -> str:
    """What the record claims, with the gains as it holds them."""
    gains = "; ".join(f"{_pct(g[0])} [{_pct(g[1])} .. {_pct(g[2])}] over the {whom}"
                      for whom, g in sorted(rec.gains.items()))  # fmt: skip
    what = {"winner": "winner", "group": "decided in part",
            "no-difference": "no difference: the simplest",
            "baseline": "the plain launch is best: compact",
            }.get(rec.verdict, "recorded")  # fmt: skip
    what += "; tuned on a busy node" if rec.busy else ""
    return f"{what}, {gains}" if gains else what


def _pct(x: float | None) -> str:
    return "+inf %" if x is None else f"{x * 100:+.1f} %"


def apply(choice: Choice, given: Mapping[str, object], explicit: set[str]) -> tuple[
        dict[str, object], str]:  # fmt: skip
    """The values ``--layout auto`` sets (the record's, except where the user gave the option
    explicitly: ``explicit``) and the words naming the record's fields overridden ("" none)."""
    values: dict[str, object] = {}
    overridden = []
    for name in FIELDS:
        mine = getattr(choice, name)
        if name in explicit:
            if mine is not None and given.get(name) != mine:
                overridden.append(f"--{name} {given.get(name)} (record: {mine})")
            continue
        if mine is not None:
            values[name] = mine
    said = f"; your {', '.join(overridden)} kept" if overridden else ""
    return values, said


def honoured(req: PlanRequest, program: str | None) -> str | None:
    """Why this node cannot honour the request now (it does not plan: a hugepage pool used
    up; or the plan cannot run here: a NUMA node gone, a static program under the shim), or
    None."""
    from topobind.plan import request
    from topobind.plan.memory import check_here
    from topobind.topo.topology import load

    try:
        where = (shutil.which(program) or program) if program else None
        check_here(request.plan(load(req.topology), req), where)
    except TopobindError as exc:
        return str(exc).splitlines()[0][:300]
    return None


def _resolve(program: str) -> str:
    path = program if "/" in program else shutil.which(program) or program
    return os.path.realpath(path)
