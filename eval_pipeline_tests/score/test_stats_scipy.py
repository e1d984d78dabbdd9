"""stats.py gives scipy's own figures, and says where and why they differ from the old code.

The bootstrap interval and the exact McNemar test come from `scipy.stats.bootstrap` and
`scipy.stats.binomtest`. Each test here recomputes a figure independently, on fixed data:
scipy called directly with the same arguments, the closed form the hand-written McNemar
used, or the hand-written `random.Random` bootstrap it replaced (kept below only as a
reference to measure the difference against).
"""

from __future__ import annotations

import math
import random
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from eval_pipeline.score.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_ci,
    mcnemar_exact,
    mcnemar_paired,
)


def _fixed_outcomes() -> dict[str, list]:
    rng = random.Random(1)
    return {
        "98 of 150": [rng.random() < 0.6 for _ in range(150)],
        "100 of 200, 7 unscored": [1] * 100 + [0] * 100 + [None] * 7,
        "1 of 2": [1, 0],
        "9 of 10": [1] * 9 + [0],
        "13 of 20, 7 None interleaved": [1, None, 0] * 7 + [1] * 6,
        "13 of 40": [1] * 13 + [0] * 27,
    }


FIXED = _fixed_outcomes()


def _scipy_direct(scored: list[int], *, resamples: int, seed: int, level: float):
    """scipy.stats.bootstrap called directly, as a user of scipy would call it."""
    return scipy_stats.bootstrap(
        (np.array(scored, dtype=float),),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval


def _old_handwritten_bootstrap(scored: list[int], *, resamples: int, seed: int, level: float):
    """The replaced implementation, verbatim in effect: random.Random resampling + linear
    interpolation between order statistics. Reference only, to measure the difference."""
    n = len(scored)
    r = random.Random(seed)
    rates = sorted(sum(r.choices(scored, k=n)) / n for _ in range(resamples))

    def quantile(q: float) -> float:
        pos = q * (len(rates) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(rates) - 1)
        return rates[lo] + (rates[hi] - rates[lo]) * (pos - lo)

    alpha = 1 - level
    return quantile(alpha / 2), quantile(1 - alpha / 2)


def _binary(outcomes: list) -> list[int]:
    return [int(o) for o in outcomes if o is not None]


# -- bootstrap ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FIXED))
@pytest.mark.parametrize(
    ("resamples", "seed", "level"),
    [(DEFAULT_RESAMPLES, DEFAULT_SEED, 0.95), (500, 7, 0.95), (999, 12345, 0.9), (3, 2, 0.5)],
)
def test_bootstrap_ci_is_scipy_bootstrap_called_directly(name, resamples, seed, level):
    outcomes = FIXED[name]
    scored = _binary(outcomes)
    est = bootstrap_ci(outcomes, resamples=resamples, seed=seed, level=level)
    ci = _scipy_direct(scored, resamples=resamples, seed=seed, level=level)
    assert est is not None
    # Bit-for-bit: same data, same seeded Generator, same method.
    assert (est.low, est.high) == (float(ci.low), float(ci.high))
    assert type(est.low) is float and type(est.high) is float  # JSON-safe, not numpy scalars
    assert est.rate == sum(scored) / len(scored)
    assert (est.n_scored, est.n_unscored) == (len(scored), len(outcomes) - len(scored))
    assert (est.resamples, est.seed, est.level) == (resamples, seed, level)


def test_bootstrap_ci_default_figures_on_fixed_data():
    """The intervals the pipeline now publishes for these inputs (defaults: 2000 resamples,
    seed 0, 95 %), pinned so a scipy/numpy upgrade that changes them is noticed."""
    expected = {
        "98 of 150": (0.58, 0.7266666666666667),
        "100 of 200, 7 unscored": (0.435, 0.57),
        "1 of 2": (0.0, 1.0),
        "9 of 10": (0.7, 1.0),
        "13 of 20, 7 None interleaved": (0.45, 0.85),
        "13 of 40": (0.175, 0.475),
    }
    got = {}
    for name, outcomes in FIXED.items():
        est = bootstrap_ci(outcomes)
        assert est is not None
        got[name] = (est.low, est.high)
    assert got.keys() == expected.keys()
    for name, interval in expected.items():
        assert got[name] == pytest.approx(interval, abs=1e-12), name


def test_bootstrap_ci_differs_from_the_old_handwritten_code_by_at_most_one_step():
    """Why the figures moved: only the random stream changed (numpy's PCG64 through scipy
    instead of Python's Mersenne Twister); the statistic (resampled rate) and the quantile
    rule (linear interpolation, numpy's default) are the same. A resampled rate is k/n, so
    endpoints of the two can differ by whole steps of 1/n; on this fixed data they differ by
    at most one step, and on five of the six inputs not at all."""
    moved = {}
    for name, outcomes in FIXED.items():
        scored = _binary(outcomes)
        n = len(scored)
        est = bootstrap_ci(outcomes)
        old = _old_handwritten_bootstrap(
            scored, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED, level=0.95
        )
        assert est is not None
        diff = max(abs(est.low - old[0]), abs(est.high - old[1]))
        assert diff <= 1 / n + 1e-12, (name, (est.low, est.high), old)
        if diff > 1e-12:
            moved[name] = (old, (est.low, est.high))
    # Measured: only the upper endpoint of "98 of 150" moved, 0.7333... -> 0.7266... (1/150).
    assert moved == {
        "98 of 150": ((0.58, pytest.approx(0.7333333333333333)), (0.58, 0.7266666666666667))
    }


@pytest.mark.parametrize(
    "outcomes",
    [[1, 1, 1], [0, 0, None], [1], [0], [None, 1, None], [True] * 50, [False] * 3],
    ids=["ones", "zeros+None", "single 1", "single 0", "single among None", "50 True", "3 False"],
)
@pytest.mark.parametrize("resamples", [1, 2, DEFAULT_RESAMPLES])
def test_bootstrap_ci_degenerate_is_rate_rate_without_warnings(outcomes, resamples):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        est = bootstrap_ci(outcomes, resamples=resamples)
    assert est is not None
    assert est.low == est.high == est.rate
    assert all(math.isfinite(v) for v in (est.low, est.high))


def test_scipy_alone_would_fail_on_the_cases_handled_here():
    """What the degenerate-case code guards against, shown on scipy directly."""
    with pytest.raises(ValueError, match="two or more observations"):
        _scipy_direct([1], resamples=100, seed=0, level=0.95)
    # One resample: scipy's standard error (ddof=1) warns; our call must not.
    with pytest.warns(RuntimeWarning):
        _scipy_direct([1, 0, 1], resamples=1, seed=0, level=0.95)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = bootstrap_ci([1, 0, 1], resamples=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = _scipy_direct([1, 0, 1], resamples=1, seed=0, level=0.95)
    assert est is not None and (est.low, est.high) == (float(ci.low), float(ci.high))


def test_bootstrap_ci_ignores_global_random_state():
    outcomes = FIXED["98 of 150"]
    first = bootstrap_ci(outcomes, seed=3, resamples=300)
    np.random.seed(99)
    random.seed(99)
    np.random.random(10)
    assert bootstrap_ci(outcomes, seed=3, resamples=300) == first
    assert bootstrap_ci(outcomes, seed=np.int64(3), resamples=300) == first
    assert type(bootstrap_ci(outcomes, seed=np.int64(3), resamples=300).seed) is int


def test_bootstrap_ci_rejects_a_seed_numpy_cannot_use():
    with pytest.raises(ValueError, match="seed"):
        bootstrap_ci([1, 0], seed=-1)
    with pytest.raises(TypeError):
        bootstrap_ci([1, 0], seed=1.5)


# -- McNemar -----------------------------------------------------------------------------------


def closed_form(b: int, c: int) -> float:
    """The old hand-written formula: min(1, 2 * P[Bin(b + c, 1/2) <= min(b, c)])."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


GRID = [(b, c) for b in range(0, 61) for c in range(0, 61)] + [
    (200, 300),
    (250, 250),
    (1, 499),
    (480, 520),
]


def test_mcnemar_exact_is_binomtest():
    for b, c in GRID:
        if b + c == 0:
            assert mcnemar_exact(b, c) == 1.0  # binomtest needs n >= 1; no flips, no evidence
            continue
        p = scipy_stats.binomtest(min(b, c), b + c, p=0.5, alternative="two-sided").pvalue
        assert mcnemar_exact(b, c) == float(p)


def test_mcnemar_exact_equals_the_closed_form_up_to_float_rounding():
    """Same figures as the hand-written closed form: equal to ~1e-14 relative everywhere on
    the grid, and bit-for-bit on most of it. Where they differ it is the last bits only:
    scipy sums floating-point binomial probabilities, the closed form divided exact integers
    once (e.g. b=4, c=11: 0.11846923828124999 vs 0.11846923828125)."""
    exact = off_by_rounding = 0
    worst = 0.0
    for b, c in GRID:
        ours, ref = mcnemar_exact(b, c), closed_form(b, c)
        assert ours == pytest.approx(ref, rel=1e-12, abs=0), (b, c)
        if ours == ref:
            exact += 1
        else:
            off_by_rounding += 1
            worst = max(worst, abs(ours - ref) / ref)
    assert worst < 1e-13
    assert exact > off_by_rounding  # most of the grid is bit-for-bit
    assert mcnemar_exact(4, 11) != closed_form(4, 11)  # the documented example
    assert mcnemar_exact(4, 11) == pytest.approx(closed_form(4, 11), rel=1e-15)


def test_binomtest_two_sided_rule_is_the_doubled_tail_at_one_half():
    """Why the two definitions agree, in exact arithmetic: binomtest's two-sided p sums the
    probabilities of every count no more likely than the observed one. At p = 1/2 the pmf
    C(n, i) / 2**n is symmetric, so that set is {i <= k} and its mirror {i >= n - k}: the
    doubled tail, or everything (p = 1) when k = n / 2, where the doubled tail exceeds 1 and
    the closed form caps it."""
    for n in range(1, 41):
        for k in range(0, n // 2 + 1):
            rule = Fraction(
                sum(math.comb(n, i) for i in range(n + 1) if math.comb(n, i) <= math.comb(n, k)),
                2**n,
            )
            doubled = min(
                Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)
            )
            assert rule == doubled, (n, k)


@pytest.mark.parametrize(
    ("b", "c"), [(1, 9), (9, 1), (0, 5), (0, 0), (2, 8), (3, 3), (0, 1), (0, 10), (7, 0)]
)
def test_mcnemar_exact_hand_computed_cases_are_bit_for_bit(b, c):
    assert mcnemar_exact(b, c) == closed_form(b, c)


def test_mcnemar_paired_uses_the_same_test():
    base = [1] + [0] * 9 + [1] * 5 + [None, 1, 0]
    cand = [0] + [1] * 9 + [1] * 5 + [1, None, None]
    result = mcnemar_paired(base, cand)
    assert (result.b, result.c, result.n_pairs) == (1, 9, 15)
    assert result.p_value == scipy_stats.binomtest(1, 10).pvalue == 2 * 11 / 1024
    assert type(result.p_value) is float
