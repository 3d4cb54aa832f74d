"""topobind.measure.stats: hand-computed values, numpy cross-checks and properties."""

from __future__ import annotations

import math
import random

import pytest

from topobind.measure import stats

# ---------------------------------------------------------------- hand-computed values


def test_median_odd_even() -> None:
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert stats.median([7.0]) == 7.0


def test_mean_stdev_cv_by_hand() -> None:
    xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    # mean 5; squared deviations sum 32; sample variance 32/7
    assert stats.mean(xs) == 5.0
    assert stats.stdev(xs) == pytest.approx(math.sqrt(32 / 7))
    assert stats.cv(xs) == pytest.approx(math.sqrt(32 / 7) / 5)
    assert stats.stdev([1.0]) is None
    assert stats.cv([1.0]) is None


def test_best_worst_direction() -> None:
    xs = [10.0, 12.0, 11.0]
    assert stats.best(xs, higher_is_better=True) == 12.0
    assert stats.worst(xs, higher_is_better=True) == 10.0
    assert stats.best(xs, higher_is_better=False) == 10.0
    assert stats.worst(xs, higher_is_better=False) == 12.0


def test_slowdown_definitions() -> None:
    # bandwidth: 90 against a best of 100 takes 100/90 - 1 = 11.1 % longer
    assert stats.slowdown(90.0, 100.0, higher_is_better=True) == pytest.approx(1 / 9)
    # latency: 110 ns against a best of 100 ns is 10 % slower
    assert stats.slowdown(110.0, 100.0, higher_is_better=False) == pytest.approx(0.10)
    assert stats.slowdown(100.0, 100.0, higher_is_better=True) == 0.0
    assert stats.slowdown(120.0, 100.0, higher_is_better=True) < 0  # better than the reference
    with pytest.raises(ValueError):
        stats.slowdown(0.0, 100.0, higher_is_better=True)


def test_percentiles_by_hand() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    # h = 3 * 0.9 = 2.7 -> 3 + 0.7 * (4 - 3)
    assert stats.percentile(xs, 90) == pytest.approx(3.7)
    assert stats.percentile(xs, 50) == pytest.approx(2.5)
    assert stats.percentile(xs, 0) == 1.0
    assert stats.percentile(xs, 100) == 4.0
    assert stats.percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        stats.percentile(xs, 101)


def test_ecdf_points_with_ties() -> None:
    assert stats.ecdf([3.0, 1.0, 3.0, 2.0]) == [(1.0, 0.25), (2.0, 0.5), (3.0, 1.0)]


def test_mad_by_hand() -> None:
    xs = [1.0, 1.0, 2.0, 2.0, 4.0, 6.0, 9.0]
    # median 2; |x - 2| = 1,1,0,0,2,4,7 -> median 1
    assert stats.mad(xs) == 1.0
    assert stats.mad(xs, scaled=True) == pytest.approx(1.4826)


def test_median_ci_thresholds_and_coverage() -> None:
    assert stats.median_ci_min_n(0.95) == 6
    assert stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) is None
    ci = stats.median_ci([6.0, 1.0, 5.0, 2.0, 4.0, 3.0], 0.95)
    assert ci is not None
    assert (ci.low, ci.high, ci.rank) == (1.0, 6.0, 1)
    assert ci.coverage == pytest.approx(1 - 2 / 64)
    # n = 20: P(B <= 5) = 21700/2^20 -> coverage 0.9586 >= 0.95; P(B <= 6) gives 0.8847 < 0.95
    ci20 = stats.median_ci([float(i) for i in range(1, 21)], 0.95)
    assert ci20 is not None
    assert ci20.rank == 6
    assert (ci20.low, ci20.high) == (6.0, 15.0)
    assert ci20.coverage == pytest.approx(1 - 2 * 21700 / 2**20)


def test_median_ci_matches_direct_search_and_scales() -> None:
    for n in range(1, 60):
        xs = [float(i) for i in range(n)]
        direct = None
        for k in range(1, n // 2 + 1):
            cov = 1 - 2 * stats._binom_half_cdf(k - 1, n)
            if cov >= 0.95:
                direct = (k, cov)
        ci = stats.median_ci(xs, 0.95)
        assert (None if ci is None else (ci.rank, ci.coverage)) == direct
    # a whole fleet's runs: large n must neither overflow nor take long
    rng = random.Random(7)
    big = stats.median_ci([rng.random() for _ in range(7000)], 0.95)
    assert big is not None
    assert 0.95 <= big.coverage < 0.96
    assert big.low < 0.5 < big.high and big.high - big.low < 0.05


def test_summarize_hand_example_with_warmup() -> None:
    # first value is a cold warm-up run; bandwidth in MB/s, higher is better
    s = stats.summarize([50.0, 100.0, 95.0, 90.0, 80.0], higher_is_better=True, warmup=1)
    assert s.discarded == (50.0,)
    assert s.values == (100.0, 95.0, 90.0, 80.0)
    assert s.n == 4
    assert s.median == 92.5
    assert s.best == 100.0 and s.worst == 80.0
    assert s.max_slowdown == pytest.approx(100 / 80 - 1)
    assert s.slowdown_vs_best == pytest.approx((0.0, 100 / 95 - 1, 100 / 90 - 1, 0.25))
    # against the median 92.5: 80 is 15.6 % slower, 90 is 2.8 % slower
    assert s.frac_slower_5pct == 0.25
    assert s.frac_slower_10pct == 0.25
    assert s.median_ci is None
    with pytest.raises(ValueError):
        stats.summarize([1.0], higher_is_better=True, warmup=1)


def test_summarize_lower_is_better() -> None:
    s = stats.summarize([100.0, 104.0, 111.0, 100.0], higher_is_better=False)
    assert s.best == 100.0 and s.worst == 111.0
    assert s.median == 102.0
    assert s.max_slowdown == pytest.approx(0.11)
    assert s.frac_slower_5pct == 0.25  # 111/102 - 1 = 8.8 %
    assert s.frac_slower_10pct == 0.0


def test_bad_input_rejected() -> None:
    with pytest.raises(ValueError):
        stats.median([])
    with pytest.raises(ValueError):
        stats.mean([1.0, float("nan")])


# ---------------------------------------------------------------- numpy cross-check


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 101])
def test_against_numpy(n: int) -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(n)
    xs = [rng.lognormvariate(3.0, 0.4) for _ in range(n)]
    arr = np.asarray(xs)
    for q in (0, 1, 10, 25, 50, 90, 99, 100):
        assert stats.percentile(xs, q) == pytest.approx(float(np.percentile(arr, q)), rel=1e-12)
    assert stats.median(xs) == pytest.approx(float(np.median(arr)), rel=1e-12)
    assert stats.mean(xs) == pytest.approx(float(np.mean(arr)), rel=1e-12)
    if n > 1:
        assert stats.stdev(xs) == pytest.approx(float(np.std(arr, ddof=1)), rel=1e-10)
    assert stats.mad(xs) == pytest.approx(float(np.median(np.abs(arr - np.median(arr)))))


# ---------------------------------------------------------------- properties


@pytest.mark.parametrize("seed", range(20))
def test_properties(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    hib = bool(seed % 2)
    xs = [rng.uniform(1.0, 1000.0) for _ in range(n)]
    s = stats.summarize(xs, higher_is_better=hib)
    # ordering
    assert s.min <= s.p50 <= s.p90 <= s.p99 <= s.max
    assert s.p50 == pytest.approx(s.median)
    assert s.min <= s.mean <= s.max
    # the best value has no slowdown against itself, none is negative, the worst is the max
    assert min(s.slowdown_vs_best) == 0.0
    assert max(s.slowdown_vs_best) == pytest.approx(s.max_slowdown)
    assert s.frac_slower_10pct <= s.frac_slower_5pct <= 0.5 + 1e-12
    # ECDF: non-decreasing, ends at 1, x sorted, fraction matches a direct count
    xs_e = [p[0] for p in s.ecdf]
    fs = [p[1] for p in s.ecdf]
    assert xs_e == sorted(xs_e) and fs == sorted(fs) and fs[-1] == 1.0
    for x, f in s.ecdf:
        assert f == sum(1 for v in xs if v <= x) / n
    # scale invariance of the relative figures
    s2 = stats.summarize([3.0 * v for v in xs], higher_is_better=hib)
    assert s2.median == pytest.approx(3.0 * s.median)
    if s.cv is not None:
        assert s2.cv == pytest.approx(s.cv)
    assert s2.max_slowdown == pytest.approx(s.max_slowdown)
    # CI, when there is one, brackets the median and uses real data points
    if s.median_ci is not None:
        assert s.median_ci.low <= s.median <= s.median_ci.high
        assert s.median_ci.low in xs and s.median_ci.high in xs
        assert s.median_ci.coverage >= 0.95
    else:
        assert n < 6


def test_median_ci_coverage_empirically() -> None:
    """The 95 % interval contains the true median of a skewed distribution >= ~95 % of the time."""
    rng = random.Random(1234)
    true_median = math.exp(0.0)  # lognormal(0, 1) has median 1
    hits = 0
    reps = 2000
    for _ in range(reps):
        ci = stats.median_ci([rng.lognormvariate(0.0, 1.0) for _ in range(15)], 0.95)
        assert ci is not None
        hits += ci.low <= true_median <= ci.high
    assert hits / reps >= 0.94  # exact coverage at n=15 is 96.5 %


def test_concurrent_best_sums_trial_by_trial_not_the_bests() -> None:
    # Rank 0 peaks in trial 0, rank 1 in trial 2: the node never moved 10 + 10.
    rank0 = [10.0, 6.0, 5.0]
    rank1 = [5.0, 6.0, 10.0]
    assert stats.concurrent_best([rank0, rank1], higher_is_better=True) == 15.0
    assert stats.best(rank0, True) + stats.best(rank1, True) == 20.0
    # Times (lower is better) take the smallest sum; unequal lengths use the shared trials.
    assert stats.concurrent_best([[3.0, 1.0, 9.0], [1.0, 2.0]], higher_is_better=False) == 3.0
    assert stats.concurrent_best([[7.0]], higher_is_better=True) == 7.0


@pytest.mark.parametrize("series", [[], [[1.0], []], [[1.0, float("nan")]]])
def test_concurrent_best_refuses_empty_or_non_finite(series: list[list[float]]) -> None:
    with pytest.raises(ValueError):
        stats.concurrent_best(series, higher_is_better=True)
