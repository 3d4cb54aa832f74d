"""topobind.tune.sequential: group-sequential boundaries by recursive numerical integration,
checked against published boundaries and against simulated Brownian paths."""

from __future__ import annotations

import math
import random

import pytest

from topobind.tune.sequential import boundaries, nominal
from topobind.tune.stats import _z


def _ld_obf(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type spending: 2 - 2 Phi(z_{alpha/2} / sqrt(t))."""
    return math.erfc(_z(1 - alpha / 2) / math.sqrt(t) / math.sqrt(2))


def test_published_boundaries_five_equal_looks() -> None:
    t = [k / 5 for k in range(1, 6)]
    # Pocock-type spending alpha log(1 + (e - 1) t), two-sided 5 %: Jennison & Turnbull
    # (2000) table 7.x and gsDesign's sfLDPocock give 2.438 2.427 2.410 2.397 2.386
    pocock = [0.05 * math.log(1 + (math.e - 1) * x) for x in t]
    assert [round(c, 3) for c in boundaries(t, pocock)] == [2.438, 2.427, 2.410, 2.397, 2.386]
    # O'Brien-Fleming-type spending, one-sided 2.5 % (two-sided spending twice it): gsDesign's
    # sfLDOF gives 4.877 3.357 2.680 2.290 2.031
    obf = [2 * _ld_obf(x, 0.025) for x in t]
    assert [round(c, 3) for c in boundaries(t, obf)] == [4.877, 3.357, 2.680, 2.290, 2.031]


def test_one_look_is_the_plain_two_sided_test() -> None:
    assert boundaries([1.0], [0.05]) == [pytest.approx(1.959964, abs=1e-5)]
    assert nominal([1.0], [0.05]) == pytest.approx(0.05)
    assert nominal([0.5, 1.0], [0.0, 0.05]) == pytest.approx(0.05, rel=1e-6)  # nothing early


def test_simulated_paths_cross_at_the_spent_rate() -> None:
    """Brownian paths under no difference, looked at 13 times as a 200-run session looks:
    the share that ever crosses is the error rate spent (within Monte Carlo error)."""
    at = [15, 19, 24, 30, 37, 46, 58, 72, 90, 113, 141, 176, 200]
    t = [n / 200 for n in at]
    alpha = 0.05
    c = boundaries(t, [alpha * x**2 for x in t])
    assert all(b < a for a, b in zip(c[2:], c[3:], strict=False))  # narrowing as runs come
    rng = random.Random(1)
    crossed, paths = 0, 20000
    for _ in range(paths):
        s, prev = 0.0, 0.0
        for tk, ck in zip(t, c, strict=True):
            s += rng.gauss(0.0, math.sqrt(tk - prev))
            prev = tk
            if abs(s) / math.sqrt(tk) >= ck:
                crossed += 1
                break
    se = math.sqrt(alpha * (1 - alpha) / paths)
    assert abs(crossed / paths - alpha) < 4 * se, crossed / paths
    # testing each look at its increment alone (Bonferroni over looks) crosses far less often
    assert nominal(t, [alpha * x**2 for x in t]) > 2 * alpha * (1 - t[-2] ** 2)


def test_bad_looks_are_refused() -> None:
    with pytest.raises(ValueError):
        boundaries([0.5, 0.5], [0.01, 0.02])
    with pytest.raises(ValueError):
        boundaries([0.5], [0.01, 0.02])
