"""``topobind tune``'s engine: the program checked, the candidates planned
(:mod:`.candidates`), the session run (:mod:`.session`) with each run made by
:mod:`.launching`, and the record written when it is decided (:mod:`.records`). Returns a
:class:`Tuned` that :mod:`topobind.cli.commands.tune` prints."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from topobind.errors import TopobindError
from topobind.interrupt import stop_on_signals
from topobind.launch import run as jobrun
from topobind.launch.shape import RunOptions
from topobind.plan import request
from topobind.plan.request import PlanRequest
from topobind.topo.manager import detect
from topobind.topo.topology import load
from topobind.tune import records
from topobind.tune.auto import job_nodes
from topobind.tune.candidates import Choices, Planned, candidates
from topobind.tune.launching import Launcher, session_dir
from topobind.tune.session import Candidate, Outcome, Progress, Settings, run_session


@dataclass(frozen=True)
class Tuned:
    """A session done: its outcome, the candidates as planned, what each launch's
    verification said, the notes (candidates left out), the record written (None: none)."""

    outcome: Outcome
    planned: list[Planned]
    verdicts: dict[str, str]
    notes: list[str]
    record: str | None
    program: list[str]
    launches: dict[str, tuple[list[str], dict[str, str]]]  # argv, the variables it exports


def base_request(topology: str = "live") -> PlanRequest:
    """The request every candidate varies: this job's (ranks per node follow the allocation
    inside a Slurm or Flux job, unless TOPOBIND_IGNORE_ALLOCATION_TASKS=1); the allocation,
    made here once, rides on it."""
    alloc = detect()
    follow = alloc.manager != "none" and os.environ.get(request.IGNORE_ALLOCATION_TASKS) != "1"
    return request.parse("compact", topology=topology, follow_allocation=follow,
                         allocation=alloc)  # fmt: skip


class Prepared(NamedTuple):
    program: list[str]
    base: PlanRequest
    topo: Any
    planned: list[Planned]
    notes: list[str]  # candidates left out, and why


def prepare(program: Sequence[str], choices: Choices) -> Prepared:
    """The program checked (127/126 when it cannot run) and the candidates planned."""
    jobrun.check_program(program[0])
    records.check_writable()  # before the first run: the record goes there
    base = base_request()
    topo = load(base.topology)
    notes = []
    manager = base.allocation.manager if base.allocation is not None else "none"
    if manager == "flux":
        notes.append("the load is not measured inside a Flux allocation: its jobs' processes "
                     "are not this process's children, and cannot be told from other work on "
                     "the node; tune on a node no other job shares")  # fmt: skip
    if choices.ranks is None and choices.cpus is None and not base.follow_allocation:
        choices = choices._replace(ranks=1)  # every candidate and the baseline: one rank
        notes.append("outside a Slurm or Flux job every candidate runs 1 rank; give --ranks R (or "
                     "--cpus N for every ranks x threads split) for an MPI program")  # fmt: skip
    planned, left_out = candidates(topo, choices, base)
    return Prepared(list(program), base, topo, planned, notes + left_out)


def tune(ready: Prepared, settings: Settings, metric: re.Pattern[str] | None,
         progress: Progress | None = None, opts: RunOptions | None = None) -> Tuned:  # fmt: skip
    """Tune the program: every candidate planned and the baseline, measured."""
    program, base, topo, planned, notes = ready
    with session_dir() as where:
        runner = Launcher(program, base, opts or RunOptions(), metric, settings.budget_s, where)
        runner.add(planned)
        # Ctrl-C between runs: Interrupted, which the session turns into its end (kept)
        with stop_on_signals("while tuning; the table so far follows"):
            outcome = run_session([p.candidate for p in planned], runner, settings,
                                  time.monotonic, progress)  # fmt: skip
    record = None
    if outcome.recommended is not None and outcome.decided:
        record = records.write(record_doc(program, topo, planned, outcome, settings, metric))
    launches = {c.name: (v[0], runner.exports.get(c, {})) for c, v in runner.launches.items()
                if not isinstance(v, str)}  # fmt: skip
    verdicts = {c.name: v for c, v in runner.verdicts.items()}
    return Tuned(outcome, planned, verdicts, notes, record, list(program), launches)


def choice_of(outcome: Outcome) -> Candidate | None:
    """What ``--layout auto`` gets: the winner, else the recommended; when that is the
    baseline (the plain launch), topobind's defaults (compact, local memory, the kernel's
    pages) with the session's ranks and threads."""
    pick = outcome.winner or outcome.recommended
    if pick is None:
        return None
    c = pick.candidate
    return Candidate("compact", ranks=c.ranks, threads=c.threads) if c.baseline else c


def record_doc(program: Sequence[str], topo: Any, planned: Sequence[Planned], outcome: Outcome,
               settings: Settings, metric: re.Pattern[str] | None) -> dict[str, Any]:  # fmt: skip
    path = os.path.realpath(jobrun.program_path(program[0]) or program[0])
    c = choice_of(outcome)
    if c is None:
        raise TopobindError("no candidate was measured: nothing to record")
    win = outcome.winner
    return {
        "schema": records.SCHEMA,
        "program": path,
        "argv": list(program),
        "sha256": records.program_hash(path),
        "node_type": records.node_type(topo),
        "node": records.node_summary(topo),
        "nodes": job_nodes(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "figure": metric.pattern if metric is not None else "wall time",
        "maximize": settings.maximize,
        "choice": {
            "layout": c.layout,
            "mem": c.mem,
            "pages": c.pages,
            "ranks": c.ranks,
            "threads": c.threads,
        },  # fmt: skip
        "verdict": outcome.verdict,
        "headline": outcome.headline,
        "level": outcome.level,
        "decided_fields": list(outcome.decided_fields),
        "winner": None if win is None else {"candidate": win.candidate.name},
        "gains": {
            whom: [g.estimate, g.low, _finite(g.high)] for whom, g in outcome.gains.items()
        },  # fmt: skip
        "runner_up": outcome.runner_up,
        "noise": outcome.noise,
        "busy": bool(outcome.noise and outcome.noise["busy"]),
        "candidates": {s.candidate.name: s.values for s in outcome.standings},
        "failures": {
            s.candidate.name: [len(s.failures), len(s.walls)]
            for s in outcome.standings
            if s.failures
        },  # fmt: skip
    }


def _finite(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None
