"""Variability statistics for benchmark trials and runs (pure Python, no numpy).

Everything here works on a plain sequence of positive floats (trials of one run, or the
headline values of many runs) plus the direction of the metric (``higher_is_better``).

Definitions used throughout topobind (and documented in docs/report.md):

- **best / worst**: the maximum / minimum for a higher-is-better metric (bandwidth, GFLOP/s),
  the minimum / maximum for a lower-is-better one (latency in ns).
- **slowdown** of a value against a reference, as a fraction (0.05 = 5 % slower), defined so
  that it reads as "how much longer the same work takes":
  lower-is-better ``value / ref - 1``; higher-is-better ``ref / value - 1``.
  It is 0 for the reference itself, positive when worse, negative when better.
- **CV**: sample standard deviation (n - 1 denominator) divided by the mean.
- **percentiles**: linear interpolation between closest ranks, the same as numpy's default
  (``method="linear"``): for sorted ``x[0..n-1]`` and ``q`` in [0, 100] the position is
  ``h = (n - 1) * q / 100`` and the value
  ``x[floor(h)] + (h - floor(h)) * (x[ceil(h)] - x[floor(h)])``.
- **MAD**: median absolute deviation from the median; ``mad_scaled`` multiplies it by 1.4826 so
  that it estimates the standard deviation of normally distributed data.
- **confidence interval of the median**: distribution-free (order statistics and the binomial
  distribution with p = 1/2). For sorted ``x_(1) <= ... <= x_(n)`` the interval
  ``[x_(k), x_(n+1-k)]`` covers the true median with probability
  ``1 - 2 * P(B <= k - 1)``, ``B ~ Binomial(n, 1/2)``; the largest ``k`` whose coverage is at
  least the requested level is used. At 95 % this needs n >= 6 (n = 6 gives [min, max] with
  96.9 % coverage); below that the interval is ``None``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

MAD_NORMAL_SCALE = 1.4826
"""Factor that turns a MAD into a consistent estimate of the standard deviation (normal data)."""

_SLOWER_THRESHOLDS = (0.05, 0.10)


#: Runs per node for a median to be trusted (McCalpin: 7), and the sign-test confidence that
#: calls a verdict strong; fewer runs or less confidence is "weak" (validate --each-node, the
#: report's slow hosts).
MIN_RUNS = 7
STRONG_CONFIDENCE = 0.95


def _checked(values: Sequence[float], what: str = "values") -> list[float]:
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError(f"{what}: need at least one value")
    for v in xs:
        if not math.isfinite(v):
            raise ValueError(f"{what}: non-finite value {v!r}")
    return xs


def _median_sorted(xs: Sequence[float]) -> float:
    n = len(xs)
    mid = n // 2
    if n % 2:
        return xs[mid]
    return (xs[mid - 1] + xs[mid]) / 2.0


def _percentile_sorted(xs: Sequence[float], q: float) -> float:
    h = (len(xs) - 1) * (q / 100.0)
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def median(values: Sequence[float]) -> float:
    """The middle value (the mean of the two middle values for an even count)."""
    return _median_sorted(sorted(_checked(values)))


def mean(values: Sequence[float]) -> float:
    xs = _checked(values)
    return math.fsum(xs) / len(xs)


def stdev(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1 denominator); ``None`` for fewer than two values."""
    xs = _checked(values)
    n = len(xs)
    if n < 2:
        return None
    m = math.fsum(xs) / n
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation: sample stdev / mean; ``None`` for n < 2 or a zero mean."""
    s = stdev(values)
    m = mean(values)
    if s is None or m == 0:
        return None
    return s / m


def best(values: Sequence[float], higher_is_better: bool) -> float:
    xs = _checked(values)
    return max(xs) if higher_is_better else min(xs)


def concurrent_best(series: Sequence[Sequence[float]], higher_is_better: bool) -> float:
    """Best over trials of the trial-by-trial sum of several series run side by side.

    For ranks that each time the same trials at the same moments (one STREAM per rank, say):
    the node's rate in trial i is the sum of the ranks' rates in trial i, and the figure is the
    best of those sums, never the sum of each rank's best (taken at different moments, it
    overstates the node). Series of different lengths are summed over the trials they share.
    """
    if not series:
        raise ValueError("concurrent_best: no series")
    shared = min(len(s) for s in series)
    if shared == 0:
        raise ValueError("concurrent_best: a series has no values")
    checked = [_checked(s[:shared]) for s in series]
    return best([sum(xs[i] for xs in checked) for i in range(shared)], higher_is_better)


def worst(values: Sequence[float], higher_is_better: bool) -> float:
    xs = _checked(values)
    return min(xs) if higher_is_better else max(xs)


def slowdown(value: float, reference: float, higher_is_better: bool) -> float:
    """How much slower ``value`` is than ``reference``, as a fraction (see module docstring).

    Both must be positive: a rate or a time of zero has no meaningful ratio.
    """
    if not (value > 0 and reference > 0) or not (math.isfinite(value) and math.isfinite(reference)):
        raise ValueError(f"slowdown needs positive finite values, got {value!r} vs {reference!r}")
    if higher_is_better:
        return reference / value - 1.0
    return value / reference - 1.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 <= q <= 100) by linear interpolation (numpy's default)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q!r}")
    return _percentile_sorted(sorted(_checked(values)), q)


def ecdf(values: Sequence[float]) -> list[tuple[float, float]]:
    """Points of the empirical CDF: ``(x, fraction of values <= x)`` for each distinct x, sorted.

    The last point has fraction 1.0. Plot it as a step function ("post").
    """
    return _ecdf_sorted(sorted(_checked(values)))


def _ecdf_sorted(xs: Sequence[float]) -> list[tuple[float, float]]:
    n = len(xs)
    out: list[tuple[float, float]] = []
    for i, x in enumerate(xs):
        if i + 1 < n and xs[i + 1] == x:
            continue  # ties: keep only the last (highest) fraction for this x
        out.append((x, (i + 1) / n))
    return out


def mad(values: Sequence[float], scaled: bool = False) -> float:
    """Median absolute deviation from the median (times 1.4826 when ``scaled``)."""
    xs = _checked(values)
    m = _median_sorted(sorted(xs))
    raw = _median_sorted(sorted(abs(x - m) for x in xs))
    return raw * MAD_NORMAL_SCALE if scaled else raw


def _binom_half_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2), exact (integer arithmetic, any n)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)


@dataclass(frozen=True)
class MedianCI:
    """Distribution-free confidence interval of the median: ``[low, high]``.

    ``rank`` is the 1-based order statistic used for ``low`` (``high`` is ``x_(n+1-rank)``);
    ``coverage`` is the exact coverage probability, at least ``confidence``.
    """

    low: float
    high: float
    confidence: float
    coverage: float
    rank: int


def median_ci_min_n(confidence: float = 0.95) -> int:
    """Smallest n for which :func:`median_ci` gives an interval at this confidence."""
    n = 1
    while 1.0 - 2.0 * _binom_half_cdf(0, n) < confidence:
        n += 1
    return n


@functools.lru_cache(maxsize=4096)
def _ci_rank(n: int, confidence: float) -> tuple[int, float] | None:
    """(k, exact coverage) of the narrowest order-statistic interval with enough coverage."""
    # coverage(k) = 1 - 2 * S(k-1) / 2^n with S(j) = sum_{i<=j} C(n, i); it falls as k grows,
    # so walk k up while 2 * S(k-1) <= (1 - confidence) * 2^n, in exact integers.
    alpha = 1 - Fraction(confidence).limit_denominator(10**9)  # 0.95 -> exactly 1/20
    limit_num, limit_den = alpha.numerator << n, alpha.denominator
    chosen: tuple[int, float] | None = None
    term = 1  # C(n, k-1)
    cum = 0  # S(k-1)
    for k in range(1, n // 2 + 1):
        cum += term
        if 2 * cum * limit_den > limit_num:
            break
        chosen = (k, 1.0 - 2 * cum / (1 << n))  # a larger k gives a narrower interval
        term = term * (n - k + 1) // k
    return chosen


def _median_ci_sorted(xs: Sequence[float], confidence: float) -> MedianCI | None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence!r}")
    n = len(xs)
    chosen = _ci_rank(n, confidence)
    if chosen is None:
        return None
    k, coverage = chosen
    return MedianCI(low=xs[k - 1], high=xs[n - k], confidence=confidence, coverage=coverage, rank=k)


def median_ci(values: Sequence[float], confidence: float = 0.95) -> MedianCI | None:
    """Order-statistic confidence interval of the median, or ``None`` when n is too small."""
    return _median_ci_sorted(sorted(_checked(values)), confidence)


@dataclass(frozen=True)
class Summary:
    """Every figure topobind reports for one series of values (trials, or runs).

    ``values`` are the values kept (after dropping ``warmup`` leading ones, listed in
    ``discarded``). Slowdowns are fractions (0.05 = 5 % slower), in the order of ``values``.
    """

    n: int
    higher_is_better: bool
    values: tuple[float, ...]
    discarded: tuple[float, ...]
    median: float
    mean: float
    min: float
    max: float
    best: float
    worst: float
    stdev: float | None
    cv: float | None
    mad: float
    mad_scaled: float
    p50: float
    p90: float
    p99: float
    max_slowdown: float
    slowdown_vs_best: tuple[float, ...]
    slowdown_vs_median: tuple[float, ...]
    frac_slower_5pct: float
    frac_slower_10pct: float
    median_ci: MedianCI | None
    ecdf: tuple[tuple[float, float], ...] = field(repr=False)


def summarize(
    values: Sequence[float],
    higher_is_better: bool,
    warmup: int = 0,
    confidence: float = 0.95,
) -> Summary:
    """All statistics of ``values`` after discarding the first ``warmup`` of them.

    Values must be positive (rates or times): slowdowns are ratios.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    raw = _checked(values)
    if warmup >= len(raw):
        raise ValueError(f"warmup={warmup} would discard all {len(raw)} values")
    discarded = tuple(raw[:warmup])
    xs = raw[warmup:]
    if min(xs) <= 0:
        raise ValueError(f"summarize needs positive values (rates or times), got {min(xs)!r}")
    srt = sorted(xs)
    n = len(xs)
    lo, hi = srt[0], srt[-1]
    b, w = (hi, lo) if higher_is_better else (lo, hi)
    med = _median_sorted(srt)
    m = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    raw_mad = _median_sorted(sorted(abs(x - med) for x in xs))
    if higher_is_better:
        vs_best = tuple(b / x - 1.0 for x in xs)
        vs_med = tuple(med / x - 1.0 for x in xs)
    else:
        vs_best = tuple(x / b - 1.0 for x in xs)
        vs_med = tuple(x / med - 1.0 for x in xs)
    return Summary(
        n=n,
        higher_is_better=higher_is_better,
        values=tuple(xs),
        discarded=discarded,
        median=med,
        mean=m,
        min=lo,
        max=hi,
        best=b,
        worst=w,
        stdev=sd,
        cv=None if sd is None or m == 0 else sd / m,
        mad=raw_mad,
        mad_scaled=raw_mad * MAD_NORMAL_SCALE,
        p50=_percentile_sorted(srt, 50),
        p90=_percentile_sorted(srt, 90),
        p99=_percentile_sorted(srt, 99),
        max_slowdown=max(vs_best),
        slowdown_vs_best=vs_best,
        slowdown_vs_median=vs_med,
        frac_slower_5pct=sum(1 for s in vs_med if s > _SLOWER_THRESHOLDS[0]) / n,
        frac_slower_10pct=sum(1 for s in vs_med if s > _SLOWER_THRESHOLDS[1]) / n,
        median_ci=_median_ci_sorted(srt, confidence),
        ecdf=tuple(_ecdf_sorted(srt)),
    )


def beyond_confidence(n_beyond: int, n: int) -> float:
    """Sign-test confidence that the true median lies beyond a limit, given that ``n_beyond``
    of ``n`` runs lie beyond it: ``1 - P(B >= n_beyond)``, ``B ~ Binomial(n, 1/2)`` (the
    chance of so many runs beyond the limit if the median sat exactly on it). Distribution-free
    like :func:`median_ci`: 3 of 3 runs beyond gives 0.875, 7 of 7 gives 0.992, 6 of 7 0.938."""
    if n <= 0 or not 0 <= n_beyond <= n:
        raise ValueError(f"beyond_confidence: need 0 <= {n_beyond} <= {n} and n > 0")
    return _binom_half_cdf(n_beyond - 1, n)


# --------------------------------------------------------------------------- the outlier rule
#: sign-test confidence needed before a node is called an outlier at all (validate
#: --each-node's SLOW, and a cause's signal outside the fleet's range: topobind.measure.causes)
NAME_CONFIDENCE = 0.80


@dataclass(frozen=True, slots=True)
class Outlying:
    """One node's runs of one quantity against the fleet (:func:`outliers`)."""

    median: float  # the node's median
    fleet: float  # the fleet's (the median of the node medians, or the reference given)
    slowdown: float  # :func:`slowdown` of the node's median against the fleet's
    bound: float  # max(threshold, the fleet's noise floor)
    beyond: int  # runs beyond the limit the bound gives
    confidence: float  # :func:`beyond_confidence` of those runs
    outside: bool  # slowdown > bound and confidence >= NAME_CONFIDENCE


def noise_floor(by_node: dict[str, list[float]]) -> float:
    """A quantity's typical run-to-run scatter: the median over the nodes of their runs'
    coefficient of variation (0 with fewer than 2 runs a node)."""
    cvs = [c for c in (cv(v) for v in by_node.values() if len(v) >= 2) if c is not None]
    return median(cvs) if cvs else 0.0


def outliers(by_node: dict[str, list[float]], threshold: float, higher_is_better: bool,
             fleet: float | None = None) -> dict[str, Outlying]:  # fmt: skip
    """The one noise rule of topobind's node verdicts: each node's median against the fleet's
    (``fleet``, else the median of the node medians), beyond max(``threshold``, the fleet's
    :func:`noise_floor`), and enough of the node's runs beyond that limit for a sign test
    (confidence >= :data:`NAME_CONFIDENCE`). Values must be positive (see :func:`slowdown`)."""
    medians = {n: median(v) for n, v in by_node.items()}
    ref = median(list(medians.values())) if fleet is None else fleet
    bound = max(threshold, noise_floor(by_node))
    limit = ref / (1 + bound) if higher_is_better else ref * (1 + bound)
    out = {}
    for node, vals in by_node.items():
        beyond = sum(1 for v in vals if (v < limit if higher_is_better else v > limit))
        conf = beyond_confidence(beyond, len(vals))
        worse = slowdown(medians[node], ref, higher_is_better)
        out[node] = Outlying(medians[node], ref, worse, bound, beyond, conf,
                             worse > bound and conf >= NAME_CONFIDENCE)  # fmt: skip
    return out
