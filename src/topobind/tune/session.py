"""A tuning session (``topobind tune``'s loop), independent of how a run is made: the
candidates run interleaved in a shuffled round-robin (a burst of load lands on all alike),
each first once for warm-up (not counted), then counted; after every round in which each
candidate still in the race has at least ``min_runs`` counted runs, successive halving drops
those worse than the leader with 95 % confidence (:func:`ratio`: paired by round), and the
session stops when it is decided (a winner, or a gain below ``--min-gain`` established),
when the budget is spent, at ``max_runs``, or on Ctrl-C (what was measured is kept).

A winner needs a gain of at least ``min_gain`` over the runner-up and over the baseline,
each with the lower end of its 95 % interval; otherwise there is no winner and the simplest
candidate still standing is recommended. ``measure`` makes one run (the real launcher in
:mod:`topobind.tune.launching`; tests give synthetic samples) and returns a :class:`Measured`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple, Protocol

from topobind.errors import Interrupted, TopobindError
from topobind.tune import stats

#: failed runs after which a candidate that has not run well more often is dropped
MAX_FAILURES = 3


class Candidate(NamedTuple):
    """One placement to try. ``layout`` None: the baseline (the program launched plainly)."""

    layout: str | None
    mem: str = "local"
    pages: str = "thp"
    ranks: int | None = None
    threads: int | None = None

    @property
    def baseline(self) -> bool:
        return self.layout is None

    @property
    def name(self) -> str:
        if self.layout is None:
            return "baseline"
        parts = [self.layout]
        if self.mem != "local":
            parts.append(f"mem={self.mem}")
        if self.pages != "thp":
            parts.append(f"pages={self.pages}")
        if self.ranks is not None and self.threads is not None:
            parts.append(f"{self.ranks}x{self.threads}")
        return " ".join(parts)

    @property
    def simplicity(self) -> tuple[int, str]:
        """Sort key: the baseline first, then fewer choices away from the defaults."""
        if self.layout is None:
            return (0, "")
        pages = {"thp": 0, "4k": 1, "2M": 2, "1G": 3}.get(self.pages, 1)
        away = (self.layout != "compact") + (self.mem != "local") + pages
        return (1 + away, self.name)


class Measured(NamedTuple):
    """One run: its figure (a wall time in seconds or the --metric value), its wall time,
    and ``reason`` when it does not count (verification failed, exit status, no match)."""

    value: float | None
    wall: float
    reason: str | None = None
    interrupted: bool = False  # the run was stopped by Ctrl-C / SIGTERM


@dataclass
class Standing:
    """What was measured of one candidate."""

    candidate: Candidate
    costs: list[float] = field(default_factory=list)  # counted runs, as costs (lower better)
    rounds: list[int] = field(default_factory=list)  # the round of each counted run
    values: list[float] = field(default_factory=list)  # counted runs, as measured
    walls: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warmed: bool = False
    dropped: str | None = None  # why it left the race (None: still in it)
    dropped_round: int | None = None

    @property
    def runs(self) -> int:
        return len(self.costs)

    def estimate(self) -> float:
        """The expected wall time of its next run (0 before any)."""
        return stats.median(self.walls) if self.walls else 0.0


class Settings(NamedTuple):
    budget_s: float = 600.0
    min_runs: int = 5
    max_runs: int = 200
    min_gain: float = 0.03
    maximize: bool = False
    level: float = 0.95
    seed: int | None = None


class Progress(Protocol):
    def __call__(self, standing: Standing, warmup: bool, run: Measured, left_s: float) -> None:
        """One run done (the command prints it on stderr)."""


@dataclass
class Outcome:
    """A session's result: every candidate's standing, the winner (None: no significant
    difference, or not decided), the recommended candidate, and why the session stopped."""

    standings: list[Standing]
    winner: Standing | None
    recommended: Standing | None
    stopped: str  # decided | no-difference | budget | max-runs | interrupted | one-left
    gains: dict[str, stats.Ratio]  # the winner's (or leader's) gain over 'runner-up', 'baseline'
    rounds: int
    runner_up: str | None = None  # the runner-up's name

    @property
    def decided(self) -> bool:
        return self.stopped in ("decided", "no-difference", "max-runs", "one-left")


def run_session(
    candidates: Sequence[Candidate],
    measure: Callable[[Candidate], Measured],
    settings: Settings,
    clock: Callable[[], float],
    progress: Progress | None = None,
) -> Outcome:
    """Measure ``candidates`` (the baseline among them) until decided or out of budget."""
    rng = random.Random(settings.seed)
    table = [Standing(c) for c in candidates]
    deadline = clock() + settings.budget_s
    rounds = 0
    stopped = "budget"
    try:
        while True:
            stopped = _one_round(table, measure, settings, rng, clock, deadline, progress, rounds)
            rounds += 1
            if stopped:
                break
            stopped = _decide(table, settings, rounds)
            if stopped:
                break
    except Interrupted:
        stopped = "interrupted"
    _check_any_ran(table, settings)
    return _outcome(table, settings, stopped, rounds)


def _one_round(table: list[Standing], measure: Callable[[Candidate], Measured],
               settings: Settings, rng: random.Random, clock: Callable[[], float],
               deadline: float, progress: Progress | None, number: int) -> str:  # fmt: skip
    """One shuffled pass over the candidates in the race; a reason to stop, or ""."""
    order = [s for s in table if s.dropped is None]
    rng.shuffle(order)
    for s in order:
        if clock() + s.estimate() > deadline:
            return "budget"
        warmup = not s.warmed
        run = measure(s.candidate)
        if run.interrupted:
            return "interrupted"
        s.warmed = True
        s.walls.append(run.wall)
        _record(s, run, warmup, settings, number)
        if progress is not None:
            progress(s, warmup, run, max(0.0, deadline - clock()))
    if all(s.dropped is not None or s.runs >= settings.max_runs for s in table):
        return "max-runs"
    return ""


def _record(s: Standing, run: Measured, warmup: bool, settings: Settings, number: int) -> None:
    reason = run.reason
    if reason is None and run.value is not None and run.value <= 0 and settings.maximize:
        reason = f"figure {run.value:g} is not a positive rate"
    if reason is None and run.value is not None and run.value <= 0:
        reason = f"figure {run.value:g} is not positive"
    if reason is not None or run.value is None:
        s.failures.append(reason or "no figure")
        if len(s.failures) >= MAX_FAILURES and len(s.failures) > s.runs:
            s.dropped = f"fails: {s.failures[-1]}"
        return
    if warmup:
        return
    s.values.append(run.value)
    s.costs.append(1.0 / run.value if settings.maximize else run.value)
    s.rounds.append(number)


#: pairs (counted runs of both candidates in the same round) from which the paired test is used
MIN_PAIRS = 6


def ratio(a: Standing, b: Standing, level: float = 0.95) -> stats.Ratio:
    """``a``'s typical cost over ``b``'s with its interval: from the runs the two made in the
    same rounds (:func:`topobind.tune.stats.paired_ratio`: load that lasts a round cancels)
    when they share at least :data:`MIN_PAIRS` rounds, else from all their runs
    (:func:`topobind.tune.stats.ratio`, Mann-Whitney)."""
    return _ratio(tuple(a.rounds), tuple(a.costs), tuple(b.rounds), tuple(b.costs), level,
                  MIN_PAIRS)  # fmt: skip


@lru_cache(maxsize=256)
def _ratio(a_rounds: tuple[int, ...], a_costs: tuple[float, ...], b_rounds: tuple[int, ...],
           b_costs: tuple[float, ...], level: float, min_pairs: int) -> stats.Ratio:  # fmt: skip
    """:func:`ratio` of the runs themselves (one look asks for the same pair several times)."""
    at = dict(zip(b_rounds, b_costs, strict=True))
    pairs = [(x, at[r]) for r, x in zip(a_rounds, a_costs, strict=True) if r in at]
    if len(pairs) >= min_pairs:
        return stats.paired_ratio([p[0] for p in pairs], [p[1] for p in pairs], level)
    return stats.ratio(a_costs, b_costs, level)


def gain(winner: Standing, other: Standing, level: float = 0.95) -> stats.Ratio:
    """How much less ``winner`` costs than ``other``: ``other / winner - 1``, interval too."""
    r = ratio(other, winner, level)
    return stats.Ratio(r.estimate - 1, r.low - 1, r.high - 1)


def _ranked(table: Sequence[Standing], settings: Settings) -> list[Standing]:
    """Candidates with enough counted runs, best (lowest median cost) first."""
    ok = [s for s in table if s.runs >= min(settings.min_runs, 2) and not _failing(s)]
    return sorted(ok, key=lambda s: (stats.median(s.costs), s.candidate.simplicity))


def _failing(s: Standing) -> bool:
    return s.dropped is not None and s.dropped.startswith("fails")


def _decide(table: list[Standing], settings: Settings, rounds: int) -> str:
    """Successive halving, then whether the session is decided ("" when not). A candidate
    worse than the leader with 95 % confidence leaves the race, except the runner-up and the
    baseline while the leader's gain over them is not yet established (the winner's
    intervals need their runs)."""
    racing = [s for s in table if s.dropped is None]
    if any(s.runs < settings.min_runs for s in racing):
        return ""
    if min(s.runs for s in racing) not in looks(settings.min_runs, settings.max_runs):
        return ""
    ranked = _ranked(table, settings)
    if not ranked:
        return "one-left"
    leader = ranked[0]
    gains = _gains(leader, ranked, table, settings)
    needed = {id(s) for s in _compared(leader, ranked, table)}
    for s in ranked:  # the runner-up or baseline left earlier (another leader): back in
        short = gain(leader, s, settings.level).low < settings.min_gain
        if id(s) in needed and s.dropped is not None and short and s.runs < settings.max_runs:
            s.dropped = s.dropped_round = None
            racing.append(s)
    for s in racing:
        if s is leader or ratio(s, leader, settings.level).low <= 1.0:
            continue
        if id(s) in needed and gain(leader, s, settings.level).low < settings.min_gain:
            continue
        s.dropped = f"worse than {leader.candidate.name} (95 %)"
        s.dropped_round = rounds
    if gains and all(g.low >= settings.min_gain for g in gains.values()):
        return "decided"
    cannot_win = any(g.high < settings.min_gain for g in gains.values())
    nobody_else = all(
        gain(s, leader, settings.level).high < settings.min_gain
        for s in table
        if s.dropped is None and s is not leader
    )
    if cannot_win and nobody_else:
        return "no-difference"
    return "" if any(s.dropped is None for s in table) else "one-left"


@lru_cache(maxsize=16)
def looks(first: int, last: int) -> frozenset[int]:
    """The counted runs at which the session looks at its data: ``first``, then about 20 %
    more each time (5, 6, 7, 8, 9, 10, 12, 14, 16, 19, ...), and ``last``: fewer looks than
    one a round, so that fewer tests are made over the session (each look is one more chance
    of a false winner) and the cost of the statistics stays small next to the runs."""
    out, n = [], first
    while n < last:
        out.append(n)
        n = max(n + 1, int(n * 1.2))
    return frozenset([*out, last])


def _compared(leader: Standing, ranked: Sequence[Standing],
              table: Sequence[Standing]) -> list[Standing]:  # fmt: skip
    """The runner-up and the baseline: whom a winner must beat by --min-gain."""
    out = [s for s in table if s.candidate.baseline and s is not leader]
    others = [s for s in ranked if s is not leader]
    if others:
        out.append(min(others, key=lambda s: ratio(s, leader).estimate))
    return out


def _gains(leader: Standing, ranked: Sequence[Standing], table: Sequence[Standing],
           settings: Settings) -> dict[str, stats.Ratio]:  # fmt: skip
    """The leader's gain over the runner-up and over the baseline (a leader that is the
    baseline has no gain over it: no entry, and no winner)."""
    out: dict[str, stats.Ratio] = {}
    others = [s for s in ranked if s is not leader]
    if others:
        best = min(others, key=lambda s: ratio(s, leader).estimate)
        out["runner-up"] = gain(leader, best, settings.level)
    base = next((s for s in table if s.candidate.baseline), None)
    if base is not None and base is not leader and base.runs >= 2:
        out["baseline"] = gain(leader, base, settings.level)
    if leader.candidate.baseline or base is None or base.runs < 2:
        out["baseline"] = stats.Ratio(0.0, 0.0, 0.0)  # no gain over itself (or unmeasured)
    return out


def _check_any_ran(table: Sequence[Standing], settings: Settings) -> None:
    """Every candidate failed every run: the program cannot be tuned (one line, its reason)."""
    if table and all(s.runs == 0 and s.failures for s in table):
        base = next((s for s in table if s.candidate.baseline), table[0])
        raise TopobindError(
            f"no run counted: every candidate's runs failed ({base.failures[-1]}); "
            "run the program by itself first and check its exit status and output"
        )


def _outcome(table: list[Standing], settings: Settings, stopped: str, rounds: int) -> Outcome:
    ranked = _ranked(table, settings)
    if not ranked:
        return Outcome(table, None, None, stopped, {}, rounds)
    leader = ranked[0]
    gains = _gains(leader, ranked, table, settings)
    enough = leader.runs >= settings.min_runs and len(ranked) > 1
    won = enough and all(g.low >= settings.min_gain for g in gains.values())
    others = [s for s in ranked if s is not leader]
    best = min(others, key=lambda s: ratio(s, leader).estimate) if others else None
    name = best.candidate.name if best is not None else None
    if won:
        return Outcome(table, leader, leader, "decided" if stopped == "no-difference" else
                       stopped, gains, rounds, name)  # fmt: skip
    standing = [s for s in ranked if s.dropped is None] or ranked
    simplest = min(standing, key=lambda s: s.candidate.simplicity)
    return Outcome(table, None, simplest, stopped, gains, rounds, name)


#: --budget at most (7 days)
MAX_BUDGET_S = 7 * 86400.0
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_budget(text: str) -> float:
    """``--budget DURATION``: seconds, or a number with s, m (min), h or d; more than 0 and
    at most 7 days (NaN, inf, negative refused)."""
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num) :]
    try:
        # float() also takes '1_0' and non-ASCII digits ('٣'): a duration is ASCII digits
        plain = num.isascii() and "_" not in num
        value = float(num) * _UNITS[unit] if plain and unit in _UNITS else float("nan")
    except ValueError:
        value = float("nan")
    if not value == value or unit not in _UNITS:
        raise TopobindError(f"--budget {text[:40]!r} is not a duration; give seconds or a number "
                            "with s, m, h or d (e.g. 10m)")  # fmt: skip
    if not 0 < value <= MAX_BUDGET_S:
        raise TopobindError(f"--budget {text[:40]!r}: must be more than 0 and at most 7 days")
    return value
