"""A tuning session (``topobind tune``'s loop), independent of how a run is made: the
candidates run interleaved in a shuffled round-robin (a burst of load lands on all alike),
each first once for warm-up (not counted), then counted; a run under load (other processes'
CPU share above :data:`~topobind.measure.cpuload.BUSY_SHARE`) is made again once. After the
first counted round the session plans its looks (:class:`Looks`): the session's error rate
(``1 - level``, 5 %) is spent over them by an alpha-spending function and split over every
pair of candidates, so that every claim of the session holds together at that rate however
many looks it takes. At each look, candidates worse than the leader by more than
``--min-gain`` leave the race (:func:`classify`, :func:`ratio`: paired by round); the session
stops when no candidate in the race is undecided, when the budget is spent (a run's own
limit is the budget left plus a grace, :mod:`topobind.tune.launching`), at ``max_runs``, or
on Ctrl-C (what was measured is kept, nothing claimed).

The verdict (:func:`_claims`): a winner (every other candidate worse by the margin), a group
(the baseline worse, the members not: what they share decided), no difference (every
interval within the margin), the plain launch best, or no claim: undecided, too short,
failing, interrupted. A failed run counts as a cost of +inf (censored) and a candidate that
fails more than the baseline never leads. ``measure`` makes one run (the real launcher in
:mod:`topobind.tune.launching`; tests and ``make bench-tune`` simulate) and returns a
:class:`Measured`.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple, Protocol

from topobind.errors import Interrupted, TopobindError, plural
from topobind.measure.cpuload import BUSY_SHARE
from topobind.tune import sequential, stats

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
    timed_out: bool = False  # killed past the budget and its grace (counted as failed)
    load: float | None = None  # other processes' share of the CPUs meanwhile (None: unknown)


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
    loads: list[float] = field(default_factory=list)  # counted runs' others' CPU share
    busy: int = 0  # counted runs under load beyond BUSY_SHARE (after their one re-run)
    reruns: int = 0  # runs made again because the node was busy
    dropped: str | None = None  # why it left the race (None: still in it)
    dropped_round: int | None = None

    @property
    def runs(self) -> int:
        return len(self.costs)

    @property
    def failed(self) -> int:
        """Counted runs that failed (kept as a cost of +inf)."""
        return sum(1 for c in self.costs if math.isinf(c))

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


#: the exponent of the power-family spending function alpha * t**RHO (Kim & DeMets 1987)
RHO = 2.0


@dataclass
class Looks:
    """The planned looks of a session (the counted runs a candidate has when the data are
    judged) and how the session's error rate ``1 - level`` is spent over them. It is split
    evenly over every pair of candidates (Bonferroni: the leader is chosen from the data);
    each pair's share is spent by an alpha-spending function (Lan & DeMets 1983) of the
    power family (Kim & DeMets 1987), alpha(t) = alpha * t**RHO with t = n / last (little
    early, as O'Brien-Fleming's bounds), and each look's boundary is the group-sequential one
    (:mod:`topobind.tune.sequential`: the looks' statistics are correlated, so the last look
    keeps nearly the whole share). A session that ends between looks (its budget) judges
    once more with everything left."""

    at: tuple[int, ...]
    alpha: float  # the session's error rate
    pairs: int
    needed: int  # counted runs of each candidate before the first look
    last: float = 0.0  # the nominal error rate of each interval at the last look made
    fresh: bool = False  # no run since the last look
    made: list[int] = field(default_factory=list)  # the counted runs of each look made

    def spend(self, n: int) -> float:
        """A pair's error rate spent by the look at ``n`` counted runs."""
        return self.alpha / self.pairs * min(1.0, n / self.at[-1]) ** RHO

    def look(self, n: int) -> float:
        """The error rate of each interval at the look at ``n`` counted runs."""
        self.made.append(n)
        self.last = self._nominal(self.made, everything=False)
        return self.last

    def final(self, n: int) -> float:
        """The error rate of each interval when the session ends at ``n`` counted runs: the
        last look's when no run came after it (or all was spent), else one more look that
        spends what is left."""
        if self.made and (self.fresh or n <= self.made[-1] or self.made[-1] >= self.at[-1]):
            return self.last
        return self._nominal([*self.made, max(n, 1)], everything=True)

    def _nominal(self, looks: list[int], everything: bool) -> float:
        end = self.at[-1]
        times = [min(1.0, n / end) for n in looks]
        spent = [self.spend(n) for n in looks]
        if everything:
            spent[-1] = self.alpha / self.pairs
        return sequential.nominal(times, spent)


class Outcome(NamedTuple):
    """A session's result: every candidate's standing; ``verdict`` (winner, group,
    no-difference, undecided, too-short, interrupted); the winner (a winner only); the
    recommended (winner, the simplest of a group or of equivalent candidates; None when
    nothing was decided); why the session stopped; the recommended's gains over
    'runner-up' and 'baseline'; the per-interval level; the headline."""

    standings: list[Standing]
    winner: Standing | None
    recommended: Standing | None
    stopped: str  # decided | budget | max-runs | interrupted | too-short | one-left
    gains: dict[str, stats.Ratio]
    rounds: int
    runner_up: str | None = None
    verdict: str = "undecided"
    headline: str = ""
    level: float = 0.95  # each interval's level (the session's error rate split)
    noise: dict[str, float | int | bool] | None = None  # the load seen (:func:`noise`)
    decided_fields: tuple[str, ...] = ()  # a group: the fields its members share

    @property
    def decided(self) -> bool:
        return self.verdict in ("winner", "group", "no-difference", "baseline")


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
    rounds, plan = 0, None
    stopped = "budget"
    try:
        while True:
            stopped = _one_round(table, measure, settings, rng, clock, deadline, progress, rounds)
            rounds += 1
            if plan is not None:
                plan.fresh = False  # runs since the last look
            if stopped:
                break
            if plan is None and all(s.runs for s in table if s.dropped is None):
                plan = plan_looks(len(table), _fit(table, settings, clock, deadline), settings)
                if plan.needed > settings.max_runs or plan.needed > _fit(
                    table, settings, clock, deadline
                ):
                    stopped = "too-short"
                    break
            if plan is not None:
                stopped = _decide(table, settings, rounds, plan)
            if stopped:
                break
    except Interrupted:
        stopped = "interrupted"
    _check_any_ran(table, settings)
    if plan is None:
        plan = plan_looks(len(table), settings.min_runs, settings)
    return _outcome(table, settings, stopped, rounds, plan)


def _fit(table: Sequence[Standing], settings: Settings, clock: Callable[[], float],
         deadline: float) -> int:  # fmt: skip
    """The counted runs a candidate will have by the end of the budget, at the rounds' pace
    so far (every candidate racing: the fewest)."""
    per_round = sum(s.estimate() for s in table if s.dropped is None)
    done = min((s.runs for s in table if s.dropped is None), default=0)
    more = int(max(0.0, deadline - clock()) / per_round) if per_round > 0 else settings.max_runs
    return min(settings.max_runs, done + more)


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
        if not warmup and _busy(run) and not run.interrupted and _fits(s, clock, deadline):
            s.reruns += 1  # under load: made again once, the first not counted
            if progress is not None:
                note = f"under load ({run.load * 100:.0f} % of the CPUs to others): made again"
                progress(s, warmup, run._replace(reason=note), max(0.0, deadline - clock()))
            run = measure(s.candidate)
        if run.interrupted:
            return "interrupted"
        s.warmed = True
        s.walls.append(run.wall)
        _record(s, run, warmup, settings, number)
        if progress is not None:
            progress(s, warmup, run, max(0.0, deadline - clock()))
        if run.timed_out:
            return "budget"
    if all(s.dropped is not None or s.runs >= settings.max_runs for s in table):
        return "max-runs"
    return ""


def _busy(run: Measured) -> bool:
    return run.load is not None and run.load > BUSY_SHARE


def _fits(s: Standing, clock: Callable[[], float], deadline: float) -> bool:
    return clock() + s.estimate() <= deadline


def _record(s: Standing, run: Measured, warmup: bool, settings: Settings, number: int) -> None:
    """A run into the candidate's standing. A counted run that failed is kept as a cost of
    +inf: censored, worse than any run that finished (its wall time is only a lower bound
    of what the run would have cost), so a candidate that fails when it is slow does not
    look fast; the failure also counts against it (:func:`fails_more`)."""
    reason = run.reason
    if reason is None and run.value is not None and run.value <= 0 and settings.maximize:
        reason = f"figure {run.value:g} is not a positive rate"
    if reason is None and run.value is not None and run.value <= 0:
        reason = f"figure {run.value:g} is not positive"
    if reason is not None or run.value is None:
        s.failures.append(reason or "no figure")
        if not warmup:
            s.costs.append(math.inf)
            s.rounds.append(number)
        if len(s.failures) >= MAX_FAILURES and len(s.failures) > s.runs - s.failed:
            s.dropped = f"fails: {s.failures[-1]}"
        return
    if warmup:
        return
    if run.load is not None:
        s.loads.append(run.load)
        s.busy += _busy(run)
    s.values.append(run.value)
    s.costs.append(1.0 / run.value if settings.maximize else run.value)
    s.rounds.append(number)


def plan_looks(candidates: int, last: int, settings: Settings) -> Looks:
    """The looks from the first count at which an interval of the first look's level can
    exclude anything (the signed-rank test of n pairs: ``2 / 2**n`` at best) up to ``last``,
    about 25 % more runs each. ``needed`` above ``last``: the budget is too short for any
    verdict."""
    pairs = max(1, candidates * (candidates - 1) // 2)
    alpha = 1 - settings.level
    first = max(settings.min_runs, 2)
    while True:
        end = max(first, last)
        if 2.0 / 2**first <= alpha * (first / end) ** RHO / pairs:
            return Looks(tuple(_geometric(first, end)), alpha, pairs, first)
        first += 1


def _geometric(first: int, last: int) -> list[int]:
    out, n = [], first
    while n < last:
        out.append(n)
        n = max(n + 1, round(n * 1.25))
    return [*out, last]


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


def fails_more(s: Standing, base: Standing | None) -> bool:
    """Whether ``s`` failed a larger share of its runs than the baseline (never a winner)."""
    if not s.failures or base is None or s is base:
        return False
    mine = len(s.failures) / max(1, len(s.walls))
    return mine > len(base.failures) / max(1, len(base.walls))


def _baseline(table: Sequence[Standing]) -> Standing | None:
    return next((s for s in table if s.candidate.baseline), None)


def _ranked(table: Sequence[Standing], settings: Settings) -> list[Standing]:
    """Candidates that may lead (enough counted runs, failing no more than the baseline),
    best (lowest median cost, failed runs +inf) first."""
    base = _baseline(table)
    ok = [s for s in table if s.runs >= min(settings.min_runs, 2) and not _failing(s)
          and not fails_more(s, base)]  # fmt: skip
    return sorted(ok, key=lambda s: (stats.median(s.costs), s.candidate.simplicity))


def _failing(s: Standing) -> bool:
    return s.dropped is not None and s.dropped.startswith("fails")


def classify(s: Standing, leader: Standing, settings: Settings, level: float) -> str:
    """``s`` against the leader at ``level``: 'worse' (costs more than 1 + min_gain times
    the leader's), 'equivalent' (the interval within the margin both ways: two one-sided
    tests), or 'undecided'."""
    if s.runs < settings.min_runs or leader.runs < settings.min_runs:
        return "undecided"
    r = ratio(s, leader, level)
    margin = 1 + settings.min_gain
    if r.low > margin:
        return "worse"
    if 1 / margin < r.low and r.high < margin:
        return "equivalent"
    return "undecided"


def _decide(table: list[Standing], settings: Settings, rounds: int, plan: Looks) -> str:
    """At a planned look: candidates worse than the leader by more than --min-gain at the
    look's level leave the race (one that later is not worse than a new leader comes back);
    the session is decided when no candidate in the race is undecided against the leader."""
    racing = [s for s in table if s.dropped is None]
    n = max((s.runs for s in racing), default=0)
    if not racing or n not in plan.at or (plan.made and n <= plan.made[-1]):
        return ""
    ranked = _ranked(table, settings)
    if not ranked:
        return "one-left"
    leader, level = ranked[0], 1 - plan.look(n)
    plan.fresh = True
    undecided = False
    for s in table:
        if s is leader or _failing(s):
            continue
        kind = classify(s, leader, settings, level)
        if kind == "worse" and s.dropped is None:
            s.dropped = f"worse than {leader.candidate.name} by more than --min-gain"
            s.dropped_round = rounds
        elif kind != "worse" and s.dropped is not None and s.runs < settings.max_runs:
            s.dropped = s.dropped_round = None  # not worse than this leader: back in
        undecided = undecided or kind == "undecided"
    if leader.dropped is not None:
        leader.dropped = leader.dropped_round = None
    return "" if undecided else "decided"


@lru_cache(maxsize=16)
def looks(first: int, last: int) -> frozenset[int]:
    """The counted runs at which a session of unknown length would look (tests)."""
    return frozenset(_geometric(first, last))


def _check_any_ran(table: Sequence[Standing], settings: Settings) -> None:
    """Every candidate failed every run: the program cannot be tuned (one line, its reason)."""
    if table and all(not s.values and s.failures for s in table):
        base = _baseline(table) or table[0]
        raise TopobindError(
            f"no run counted: every candidate's runs failed ({base.failures[-1]}); "
            "run the program by itself first and check its exit status and output"
        )


def _outcome(table: list[Standing], settings: Settings, stopped: str, rounds: int,
             plan: Looks) -> Outcome:  # fmt: skip
    """The claims the data hold at the final look's level (see :class:`Looks`), said of a
    busy node in the headline."""
    done = _claims(table, settings, stopped, rounds, plan)
    seen = noise(table)
    done = done._replace(noise=seen)
    if seen is not None and seen["busy"]:
        done = done._replace(headline=(
            f"busy node (other processes took over {BUSY_SHARE * 100:.0f} % of the CPUs in "
            f"{seen['busy_runs']} of {seen['runs']} counted runs, median "
            f"{seen['median_share'] * 100:.0f} %): {done.headline}"))  # fmt: skip
    return done


def noise(table: Sequence[Standing]) -> dict[str, float | int | bool] | None:
    """The load the counted runs saw: their median of other processes' CPU share, how many
    were beyond :data:`BUSY_SHARE` (after one re-run each), re-runs; busy when more than a
    quarter were. None where the load was not measured (inside a Flux allocation)."""
    loads = [x for s in table for x in s.loads]
    if not loads:
        return None
    busy = sum(s.busy for s in table)
    return {"median_share": round(stats.median(loads), 3), "busy_runs": busy,
            "runs": len(loads), "reruns": sum(s.reruns for s in table),
            "threshold": BUSY_SHARE, "busy": busy > len(loads) / 4}  # fmt: skip


def _claims(table: list[Standing], settings: Settings, stopped: str, rounds: int,
            plan: Looks) -> Outcome:  # fmt: skip
    racing = [s for s in table if s.dropped is None] or table
    level = 1 - plan.final(max(s.runs for s in racing))
    done = Outcome(table, None, None, stopped, {}, rounds, level=level)
    if stopped == "interrupted":
        return done._replace(verdict="interrupted", headline="interrupted: nothing is claimed")
    ranked = _ranked(table, settings)
    fewest = min(s.runs for s in racing)
    if stopped == "too-short" or not ranked or ranked[0].runs < plan.needed or (
            fewest < settings.min_runs):  # fmt: skip
        return done._replace(verdict="too-short", headline=(
            f"too short: {plural(fewest, 'counted run')} of a candidate, {plan.needed} needed "
            f"for a verdict at this session's error rate: nothing is claimed; give a longer "
            "--budget or fewer candidates"))  # fmt: skip
    leader, base = ranked[0], _baseline(table)
    others = [s for s in table if s is not leader and not _failing(s) and not fails_more(s, base)]
    if not others:  # every other candidate fails (more than the baseline): no claim
        failing = [s for s in table if s is not leader]
        return done._replace(verdict="failing", headline=(
            "nothing decided: " + "; ".join(
                f"{s.candidate.name} fails {len(s.failures)} of {plural(len(s.walls), 'run')}"
                f" ({s.failures[-1] if s.failures else 'no runs'})" for s in failing)
            + f"; only {leader.candidate.name} runs"))  # fmt: skip
    kinds = {id(s): classify(s, leader, settings, level) for s in others}
    near = [s for s in others if kinds[id(s)] != "worse"]
    runner = min(others, key=lambda s: ratio(s, leader, level).estimate) if others else None
    done = done._replace(runner_up=runner.candidate.name if runner is not None else None)
    if not near and runner is not None:
        gains = _gains(leader, runner, base, level)
        if leader.candidate.baseline:
            return done._replace(verdict="baseline", recommended=leader, gains=gains,
                                 headline="the plain launch is best: every candidate costs "
                                 "more than --min-gain more")  # fmt: skip
        return done._replace(verdict="winner", winner=leader, recommended=leader, gains=gains,
                             headline=f"winner: {leader.candidate.name}")  # fmt: skip
    undecided = [s for s in near if kinds[id(s)] == "undecided"]
    group = [leader, *near]
    if base is not None and base not in group:
        return _group(done, group, base, undecided, settings, level)
    if not undecided:
        rec = min(group, key=lambda s: s.candidate.simplicity)
        return done._replace(verdict="no-difference", recommended=rec, headline=(
            f"no difference: {', '.join(s.candidate.name for s in group)} within "
            f"{settings.min_gain * 100:g} % of each other; recommended: {rec.candidate.name} "
            "(the simplest)"))  # fmt: skip
    return _undecided(done, leader, undecided[0], level)


def _undecided(done: Outcome, leader: Standing, other: Standing, level: float) -> Outcome:
    r = ratio(other, leader, level)
    return done._replace(verdict="undecided", headline=(
        f"undecided after {plural(min(leader.runs, other.runs), 'counted run')}: "
        f"{other.candidate.name} / {leader.candidate.name} = {r.estimate:.3f}, interval "
        f"[{r.low:.3f}, {_end(r.high)}]: a longer --budget would decide"))  # fmt: skip


def _end(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _group(done: Outcome, group: list[Standing], base: Standing, undecided: list[Standing],
           settings: Settings, level: float) -> Outcome:  # fmt: skip
    """Several candidates near the leader, the baseline worse: what they share is decided
    (its gain over the baseline, from the simplest member that beats it by --min-gain),
    what differs between them is not (no difference, or undecided)."""
    for rec in sorted(group, key=lambda s: s.candidate.simplicity):
        g = gain(rec, base, level)
        if g.low >= settings.min_gain:
            break
    else:
        return _undecided(done, group[0], base, level)
    fields = {
        "layout": lambda c: c.layout,
        "mem": lambda c: c.mem,
        "pages": lambda c: c.pages,
        "ranks x threads": lambda c: (c.ranks, c.threads),
    }
    placed = [s.candidate for s in done.standings if not s.candidate.baseline]
    tried = [f for f, get in fields.items() if len({get(c) for c in placed}) > 1]
    shared = tuple(f for f in tried if len({fields[f](s.candidate) for s in group}) == 1)
    varying = [f for f in tried if f not in shared]
    words = ", ".join(f"{f} {_value(f, rec.candidate)}" for f in shared) or rec.candidate.name
    rest = ", ".join(varying) or "the rest"
    head = (f"{words}: {g.estimate * 100:+.1f} % [{g.low * 100:+.1f} .. {_pct(g.high)}] over "
            f"the baseline; {rest}: {'undecided' if undecided else 'no difference'} "
            f"({', '.join(s.candidate.name for s in group)}); recommended: "
            f"{rec.candidate.name} (the simplest)")  # fmt: skip
    return done._replace(verdict="group", recommended=rec, gains={"baseline": g},
                         headline=head, decided_fields=shared)  # fmt: skip


def _value(field: str, c: Candidate) -> str:
    if field == "ranks x threads":
        return f"{c.ranks}x{c.threads}"
    return str(getattr(c, field))


def _pct(x: float) -> str:
    return "+inf %" if math.isinf(x) else f"{x * 100:+.1f} %"


def _gains(leader: Standing, runner: Standing, base: Standing | None,
           level: float) -> dict[str, stats.Ratio]:  # fmt: skip
    """The leader's gain over the runner-up and over the baseline."""
    out = {"runner-up": gain(leader, runner, level)}
    if base is not None and base is not leader:
        out["baseline"] = gain(leader, base, level)
    return out


#: --budget at most (7 days)
MAX_BUDGET_S = 7 * 86400.0
_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
#: a duration: ASCII digits with at most one point, then one of the units (none: seconds)
_DURATION = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(s|m|min|h|d)?")


def parse_budget(text: str) -> float:
    """``--budget DURATION``: seconds, or a number with s, m (min), h or d, exactly these
    (``1M`` is refused: months or minutes?); more than 0 and at most 7 days."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise TopobindError(f"--budget {text[:40]!r} is not a duration; give seconds or a number "
                            "with s, m, h or d (e.g. 10m)")  # fmt: skip
    value = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if not 0 < value <= MAX_BUDGET_S:
        raise TopobindError(f"--budget {text[:40]!r}: must be more than 0 and at most 7 days")
    return value
