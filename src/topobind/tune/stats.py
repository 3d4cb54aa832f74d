"""The statistics of ``topobind tune`` (pure Python, no randomness: the same samples give
the same answer; ``docs/explanation/tune-statistics.md`` explains them and their limits).

Every figure is a *cost* (lower is better: a wall time, or 1/rate for ``--maximize``). Two
candidates are compared by the ratio of their typical costs, estimated on the log scale:
the Hodges-Lehmann estimate (the median of every pairwise difference ``log a_i - log b_j``)
and its Moses confidence interval, whose ends are order statistics of those differences
chosen from the exact distribution of the Mann-Whitney U statistic (the normal
approximation with continuity correction above :data:`EXACT_MAX` pairs). It assumes the two
samples differ by a factor (a shift of the logs) and that runs are independent: see the
explanation page for what breaks it. A failed run is a cost of +inf (censored: worse than
every finished run, two failed runs tie); the ranks take it as the worst.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

#: the largest n*m for which U's exact distribution is counted (above: normal approximation)
EXACT_MAX = 900


class Ratio(NamedTuple):
    """``a / b`` of two candidates' costs: the estimate and its confidence interval."""

    estimate: float
    low: float
    high: float


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of no values")
    return s[n // 2] if n % 2 else _mid(s[n // 2 - 1], s[n // 2])


def _plain_mid(x: float, y: float) -> float:
    return (x + y) * 0.5


def _mid(x: float, y: float) -> float:
    """``(x + y) / 2``, where -inf and +inf (a failed run on either side) meet at 0."""
    if math.isinf(x) and math.isinf(y) and x != y:
        return 0.0
    return (x + y) / 2


@lru_cache(maxsize=512)
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many orderings give U = 0 .. n*m (two samples of n and m, no ties)."""
    # counts[j][u] for samples (i, j), built up over i; the recurrence
    # f(i, j, u) = f(i - 1, j, u - j) + f(i, j - 1, u)
    rows = [[1] for _ in range(m + 1)]  # i = 0: U is 0 whatever j
    for i in range(1, n + 1):
        new = [[1]]  # j = 0
        for j in range(1, m + 1):
            size = i * j + 1
            row = [0] * size
            left = new[j - 1]  # f(i, j-1, .)
            up = rows[j]  # f(i-1, j, .)
            for u, c in enumerate(left):
                row[u] += c
            for u, c in enumerate(up):
                row[u + j] += c
            new.append(row)
        rows = new
    return tuple(rows[m])


def _lower_tail_count(counts: Sequence[int], total: int, alpha: float) -> int:
    """How many of the smallest values of an exact null distribution (``counts[t]`` ways of
    statistic ``t`` out of ``total``) fit in a lower tail of probability at most ``alpha``."""
    acc, w = 0, 0
    for c in counts:
        if (acc + c) / total > alpha:
            break
        acc += c
        w += 1
    return w


def critical_rank(n: int, m: int, level: float = 0.95) -> int:
    """The number ``w`` of the Moses interval: ``[D(w), D(nm + 1 - w)]`` of the sorted
    pairwise differences holds the shift with probability >= ``level``; 0 when the samples
    are too small for any interval at that level."""
    alpha = (1 - level) / 2
    if alpha < 1e-12:  # no interval at so high a level (nothing excluded)
        return 0
    nm = n * m
    if nm <= EXACT_MAX:
        counts = _u_counts(n, m)
        return _lower_tail_count(counts, sum(counts), alpha)
    z = _z(1 - alpha)
    sd = math.sqrt(n * m * (n + m + 1) / 12)
    return max(0, math.floor(nm / 2 - z * sd - 0.5) + 1)


def _z(p: float) -> float:
    """The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.3577518672690,
         -30.66479806614716, 2.506628277459239)  # fmt: skip
    b = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972,
         -13.28068155288572)  # fmt: skip
    c = (-7.784894002430293e-03, -0.3223964580411365, -2.400758277161838, -2.549732539343734,
         4.374664141464968, 2.938163982698783)  # fmt: skip
    d = (7.784695709041462e-03, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    if p > 0.97575:
        q = math.sqrt(-2 * math.log(1 - p))
        return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )


def ratio(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Ratio:
    """The ratio of ``a``'s typical cost to ``b``'s with its ``level`` interval (all values
    > 0). Without enough runs for an interval, it is (0, inf): nothing is excluded."""
    la = [_log(x) for x in a]
    lb = [_log(y) for y in b]
    diffs = sorted(_diff(x, y) for x in la for y in lb)
    est = math.exp(median(diffs))
    w = critical_rank(len(a), len(b), level)
    if w < 1:
        return Ratio(est, 0.0, math.inf)
    return Ratio(est, math.exp(diffs[w - 1]), math.exp(diffs[len(diffs) - w]))


def _log(x: float) -> float:
    return math.inf if math.isinf(x) else math.log(x)


def _diff(x: float, y: float) -> float:
    """``x - y`` of two log costs, where +inf is a failed run (censored: worse than any
    finished run); two failed runs tie."""
    if math.isinf(x) and math.isinf(y):
        return 0.0
    return x - y


def worse(cost: Sequence[float], leader: Sequence[float], level: float = 0.95) -> bool:
    """Whether ``cost``'s candidate is worse than the leader's with ``level`` confidence."""
    return ratio(cost, leader, level).low > 1.0


def gain_over(winner: Sequence[float], other: Sequence[float], level: float = 0.95) -> Ratio:
    """How much better ``winner`` is than ``other``: ``other / winner - 1`` (0.10: 10 %
    less cost), with its interval."""
    r = ratio(other, winner, level)
    return Ratio(r.estimate - 1, r.low - 1, r.high - 1)


#: the largest number of pairs for which the signed-rank statistic's distribution is counted
EXACT_PAIRS_MAX = 60


@lru_cache(maxsize=256)
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the 2**n sign patterns give the signed-rank sum T = 0 .. n(n+1)/2."""
    counts = [1]
    for k in range(1, n + 1):
        grown = counts + [0] * k
        for t, c in enumerate(counts):
            grown[t + k] += c
        counts = grown
    return tuple(counts)


def signed_rank_critical(n: int, level: float = 0.95) -> int:
    """The number ``w`` of the Wilcoxon signed-rank interval: ``[A(w), A(N + 1 - w)]`` of
    the N = n(n+1)/2 sorted Walsh averages holds the shift with probability >= ``level``; 0
    when there are too few pairs for any interval at that level."""
    alpha = (1 - level) / 2
    if alpha < 1e-12:  # no interval at so high a level (nothing excluded)
        return 0
    if n <= EXACT_PAIRS_MAX:
        return _lower_tail_count(_signed_rank_counts(n), 1 << n, alpha)
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(0, math.floor(mean - _z(1 - alpha) * sd - 0.5) + 1)


def paired_ratio(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Ratio:
    """The ratio of ``a``'s typical cost to ``b``'s from runs made in pairs (``a[i]`` and
    ``b[i]`` in the same round of the shuffled round-robin, so close in time): the
    Hodges-Lehmann estimate of the per-round log ratios (the median of their Walsh averages)
    and the Wilcoxon signed-rank interval. Load that lasts a round cancels out of each pair."""
    d = [_diff(_log(x), _log(y)) for x, y in zip(a, b, strict=True)]
    mid = _mid if any(math.isinf(x) for x in d) else _plain_mid
    walsh = sorted([mid(x, y) for i, x in enumerate(d) for y in d[i:]])
    est = math.exp(median(walsh))
    w = signed_rank_critical(len(d), level)
    if w < 1:
        return Ratio(est, 0.0, math.inf)
    return Ratio(est, math.exp(walsh[w - 1]), math.exp(walsh[len(walsh) - w]))
