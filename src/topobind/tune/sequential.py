"""Group-sequential boundaries for ``topobind tune``'s looks (pure Python, deterministic).

A statistic looked at repeatedly as runs accumulate behaves, for large samples, as a
Brownian motion in the information (here the counted runs): the z statistics of the looks
``Z_k = S(t_k) / sqrt(t_k)`` are jointly normal with ``corr(Z_j, Z_k) = sqrt(t_j / t_k)``.
Given how much of the error rate is spent up to each look (an alpha-spending function, Lan &
DeMets, Biometrika 1983), the two-sided boundary ``c_k`` of look ``k`` is the one for which
the chance, with no difference, of first crossing at look ``k`` equals that look's increment.
It is found by the recursive numerical integration of Armitage, McPherson & Rowe (J. R.
Statist. Soc. A 1969), as in Jennison & Turnbull, *Group Sequential Methods with
Applications to Clinical Trials* (2000), chapter 19: the density of the paths still inside
the boundaries is carried from look to look on a grid (Simpson's rule) and convolved with the
normal increment.

This spends exactly what the function allows, where testing each look at its increment alone
(Bonferroni over looks) wastes most of it: with a 13-look plan at 1.67 % two-sided the last
look's boundary is z = 2.62 instead of 3.03. Rank statistics (the signed-rank and
Mann-Whitney tests the session uses) have this joint limit too (Sen, *Sequential
Nonparametrics*, 1981), so the nominal level of each look is used with the exact rank
distribution. :func:`nominal` is what the session asks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from topobind.tune.stats import _z

#: grid points across the continuation region (odd: Simpson's rule)
GRID = 161
#: the continuation region of a look with nothing spent, in standard deviations of S(t)
WIDE = 9.0


def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _simpson(a: float, b: float) -> tuple[list[float], list[float]]:
    """GRID points from a to b and Simpson's weights."""
    h = (b - a) / (GRID - 1)
    xs = [a + i * h for i in range(GRID)]
    ws = [h / 3 * (1 if i in (0, GRID - 1) else 4 if i % 2 else 2) for i in range(GRID)]
    return xs, ws


State = tuple[tuple[float, ...], tuple[float, ...]]  # grid points of S, density x weight


def _exit(state: State, sd: float, b: float) -> float:
    """The chance of a path inside after the last look being beyond +-b at the next (its
    increment's standard deviation sd)."""
    xs, ms = state
    return sum(m * (_cdf((-b - x) / sd) + _cdf((x - b) / sd)) for x, m in zip(xs, ms, strict=True))


def _solve(state: State, sd: float, step: float) -> float:
    """The boundary b (on the scale of S) whose exit chance is ``step`` (bisection)."""
    lo, hi = 0.0, max(abs(x) for x in state[0]) + 40 * sd
    for _ in range(60):
        mid = (lo + hi) / 2
        if _exit(state, sd, mid) > step:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _advance(state: State, sd: float, b: float) -> State:
    """The density of the paths inside (-b, b) at the next look, from ``state``."""
    ys, ws = _simpson(-b, b)
    xs, ms = state
    dens = [sum(m * _phi((y - x) / sd) for x, m in zip(xs, ms, strict=True)) / sd for y in ys]
    return tuple(ys), tuple(d * w for d, w in zip(dens, ws, strict=True))


@lru_cache(maxsize=4096)
def _looks(times: tuple[float, ...], spent: tuple[float, ...]) -> tuple[tuple[float, ...], State]:
    """The boundaries (z scale) of looks at ``times`` with cumulative spending ``spent``, and
    the density of the paths still inside after the last."""
    if len(times) == 1:
        t, a = times[0], spent[0]
        c = _z(1 - a / 2) if a > 0 else math.inf
        b = c * math.sqrt(t) if a > 0 else WIDE * math.sqrt(t)
        ys, ws = _simpson(-b, b)
        sd = math.sqrt(t)
        return (c,), (tuple(ys), tuple(_phi(y / sd) / sd * w for y, w in zip(ys, ws, strict=True)))
    before, state = _looks(times[:-1], spent[:-1])
    t, sd = times[-1], math.sqrt(times[-1] - times[-2])
    step = spent[-1] - spent[-2]
    if step <= 0:
        c, b = math.inf, WIDE * math.sqrt(t)
    else:
        b = _solve(state, sd, step)
        c = b / math.sqrt(t)
    return (*before, c), _advance(state, sd, b)


def boundaries(times: Sequence[float], spent: Sequence[float]) -> list[float]:
    """Two-sided boundaries ``c_k`` (|Z_k| >= c_k claims) of looks at information fractions
    ``times`` (increasing, in (0, 1]) spending ``spent`` cumulatively (not decreasing)."""
    if not times or len(times) != len(spent):
        raise ValueError("one cumulative spending a look")
    if any(b <= a for a, b in zip(times, times[1:], strict=False)) or times[0] <= 0:
        raise ValueError("look times must increase from above 0")
    return list(_looks(tuple(times), tuple(spent))[0])


def nominal(times: Sequence[float], spent: Sequence[float]) -> float:
    """The two-sided nominal error rate of the last look: ``2 (1 - Phi(c_K))``."""
    c = boundaries(times, spent)[-1]
    return 0.0 if math.isinf(c) else 2 * (1 - _cdf(c))
