"""OpenMP environment: OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND.

Single-process plans get explicit places (exact OS PU indexes, in the compact interval
notation where the places are regular). Multi-rank plans get ``cores`` (or ``threads``
with SMT): each rank's launcher binding (srun mask, mpirun --bind-to, rankfile) restricts
the places to that rank's CPUs, and ``close`` puts thread t on the rank's t-th place. The
runtime builds that list in increasing OS order, so ``topobind run`` exports each rank's
exact places through its per-rank step (``rank_env``) where the plan's order differs.
"""

from __future__ import annotations

import re

from topobind.errors import TopobindError
from topobind.plan.model import Plan

# Values every OpenMP 4.0+ runtime (libgomp, LLVM libomp, Intel) accepts.
PROC_BIND_VALUES = ("false", "true", "master", "primary", "close", "spread")


def _fmt_set(place: tuple[int, ...]) -> str:
    """One place: ``{0}``, ``{0,128}``, or ``{0:4}`` for a contiguous run."""
    vals = list(place)
    if len(vals) > 2 and vals == list(range(vals[0], vals[0] + len(vals))):
        return f"{{{vals[0]}:{len(vals)}}}"
    return "{" + ",".join(str(v) for v in vals) + "}"


def _shift(a: tuple[int, ...], b: tuple[int, ...]) -> int | None:
    """The common non-zero offset from place ``a`` to place ``b``, if there is one."""
    if len(a) != len(b):
        return None
    d = b[0] - a[0]
    if d == 0 or any(y - x != d for x, y in zip(a, b, strict=True)):
        return None
    return d


def format_places(places: list[tuple[int, ...]]) -> str:
    """Shortest exact place list: runs of equally shifted places become ``{p}:count:stride``."""
    parts: list[str] = []
    i, n = 0, len(places)
    while i < n:
        stride = _shift(places[i], places[i + 1]) if i + 1 < n else None
        j = i + 1
        if stride is not None:
            while j < n and _shift(places[j - 1], places[j]) == stride:
                j += 1
        if j - i >= 3:
            suffix = "" if stride == 1 else f":{stride}"
            parts.append(f"{_fmt_set(places[i])}:{j - i}{suffix}")
            i = j
        else:
            parts.append(_fmt_set(places[i]))
            i += 1
    return ",".join(parts)


#: one place of an explicit list (compiled by the first reader: writing a plan needs none)
_PLACE = r"\{([^}]*)\}(?::(-?\d+)(?::(-?\d+))?)?"


def parse_places(text: str) -> list[tuple[int, ...]]:
    """Expand an explicit OMP_PLACES list (``{0}:4:2,{16,17}``) to places of OS indexes."""
    out: list[tuple[int, ...]] = []
    pos = 0
    text = text.strip()
    place = re.compile(_PLACE)  # re's cache: compiled once
    while pos < len(text):
        m = place.match(text, pos)
        if not m:
            raise TopobindError(f"cannot parse OMP_PLACES {text!r} at column {pos + 1}")
        members: list[int] = []
        for item in m.group(1).split(","):
            bits = [int(x) for x in item.split(":")]
            if len(bits) == 1:
                members.append(bits[0])
            else:
                length = bits[1]
                step = bits[2] if len(bits) > 2 else 1
                members.extend(bits[0] + k * step for k in range(length))
        count = int(m.group(2)) if m.group(2) else 1
        stride = int(m.group(3)) if m.group(3) else 1
        for k in range(count):
            out.append(tuple(v + k * stride for v in members))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise TopobindError(f"cannot parse OMP_PLACES {text!r} at column {pos + 1}")
            pos += 1
    return out


def omp_env(plan: Plan, uniform_places: str | None = None) -> dict[str, str]:
    """The OMP_* variables of every rank: the one place they are assembled.

    One rank: its exact places. Several ranks: ``cores`` (``threads`` with SMT) inside each
    rank's launcher mask, or ``uniform_places`` when the caller knows better (``threads``
    where the masks give the exact plan); the per-rank step overrides OMP_PLACES per rank
    with :func:`rank_env`."""
    if plan.nranks == 1:
        places = format_places(list(plan.ranks[0].places))
    else:
        places = uniform_places or ("threads" if plan.smt else "cores")
    return {
        "OMP_NUM_THREADS": str(plan.threads),
        "OMP_PLACES": places,
        "OMP_PROC_BIND": "close",
    }


def script_env(plan: Plan) -> dict[str, str]:
    """What a job script that launches by itself exports (``topobind env``): the OMP_*
    variables, a single rank's own variables, the layout's name. The same as
    :func:`topobind.launch.rank_step.job_env` of a shape without a launcher, which ``env`` does
    not import (the launch stack; tests/cli/test_env_command.py holds the two equal)."""
    one = dict(plan.ranks[0].env) if plan.nranks == 1 else {}  # a single rank's variables
    return {**omp_env(plan), **one, "TOPOBIND_LAYOUT": plan.layout}


def rank_places(plan: Plan, rank: int) -> str:
    """Explicit OMP_PLACES for one rank (what topobind-run exports per rank)."""
    return format_places(list(plan.ranks[rank].places))


def rank_env(plan: Plan, rank: int) -> dict[str, str]:
    """The variables one rank gets from the per-rank step: its exact places, and for per-gpu
    plans its device variables (``ranks[].env``)."""
    return {**omp_env(plan), "OMP_PLACES": rank_places(plan, rank), **plan.ranks[rank].env}


def omp_notes(plan: Plan) -> list[str]:
    """What the ``OMP_*`` exports alone mean, for scripts that launch by themselves."""
    if plan.nranks > 1 and not plan.smt and plan.topology.smt > 1:
        return [
            "OMP_PLACES=cores: each thread gets the PUs of one core that its rank's binding "
            "allows: only the planned PU under topobind's srun masks, the whole core (all its "
            "PUs) under mpirun --bind-to core; 'topobind run' exports exact places per rank"
        ]
    return []
