"""Rates, bootstrap intervals, exact McNemar and medians."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.score.stats import (
    bootstrap_ci,
    mcnemar_exact,
    mcnemar_paired,
    median,
    rate,
)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (1, 9, 0.021484375),  # 2 * (1 + 10) / 1024
        (9, 1, 0.021484375),
        (0, 5, 0.0625),  # 2 / 32
        (0, 0, 1.0),
        (2, 8, 0.109375),  # 2 * (1 + 10 + 45) / 1024
        (3, 3, 1.0),  # 2 * 42 / 64 > 1, capped
        (0, 1, 1.0),
        (0, 10, 2 / 1024),
    ],
)
def test_mcnemar_hand_computed(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == p


def test_mcnemar_large_counts_stay_exact_enough() -> None:
    p = mcnemar_exact(200, 300)
    assert 0 < p < 1e-5
    assert mcnemar_exact(250, 250) == 1.0


def test_mcnemar_rejects_negative() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_symmetric_and_bounded(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    assert 0 < p <= 1
    assert p == mcnemar_exact(c, b)


def test_mcnemar_paired_skips_unscored() -> None:
    base = [1, 1, 0, 0, None, 1, True]
    cand = [0, 1, 1, 1, 1, None, False]
    result = mcnemar_paired(base, cand)
    assert (result.b, result.c, result.n_pairs) == (2, 2, 5)
    assert result.p_value == 1.0
    with pytest.raises(ValueError):
        mcnemar_paired([1], [1, 0])


def test_rate() -> None:
    assert rate([1, 0, None, 1]) == pytest.approx(2 / 3)
    assert rate([True, False]) == 0.5
    assert rate([]) is None
    assert rate([None, None]) is None
    assert rate([0, 0]) == 0.0
    with pytest.raises(ValueError):
        rate([2])


def test_bootstrap_none_when_nothing_scored() -> None:
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([None, None]) is None


def test_bootstrap_deterministic_and_seeded() -> None:
    rng = random.Random(1)
    outcomes = [rng.random() < 0.6 for _ in range(150)]
    first = bootstrap_ci(outcomes, seed=7, resamples=500)
    assert first == bootstrap_ci(outcomes, seed=7, resamples=500)
    other = bootstrap_ci(outcomes, seed=8, resamples=500)
    assert other is not None and first is not None
    assert (other.low, other.high) != (first.low, first.high)
    assert first.resamples == 500 and first.seed == 7
    # The interval does not depend on global random state.
    random.seed(123)
    assert bootstrap_ci(outcomes, seed=7, resamples=500) == first


def test_bootstrap_bounds_are_sensible() -> None:
    outcomes = [1] * 100 + [0] * 100 + [None] * 7
    est = bootstrap_ci(outcomes)
    assert est is not None
    assert est.rate == 0.5
    assert (est.n_scored, est.n_unscored) == (200, 7)
    assert 0 <= est.low < est.rate < est.high <= 1
    # Normal approximation half-width: 1.96 * sqrt(0.25 / 200) ~= 0.069.
    half_width = 1.96 * math.sqrt(0.25 / 200)
    assert est.high - est.low == pytest.approx(2 * half_width, rel=0.15)
    assert est.as_dict()["level"] == 0.95


def test_bootstrap_degenerate_outcomes() -> None:
    ones = bootstrap_ci([1, 1, 1])
    zeros = bootstrap_ci([0, 0, None])
    assert ones is not None and (ones.rate, ones.low, ones.high) == (1.0, 1.0, 1.0)
    assert zeros is not None and (zeros.rate, zeros.low, zeros.high) == (0.0, 0.0, 0.0)


def test_bootstrap_rejects_bad_config() -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([1], resamples=0)
    with pytest.raises(ValueError):
        bootstrap_ci([1], level=1.0)


@given(st.lists(st.sampled_from([0, 1, None]), max_size=40), st.integers(0, 2**32))
def test_bootstrap_interval_within_unit_range(outcomes, seed: int) -> None:
    est = bootstrap_ci(outcomes, seed=seed, resamples=50)
    if all(o is None for o in outcomes):
        assert est is None
        return
    assert est is not None
    assert 0.0 <= est.low <= est.high <= 1.0
    assert est.n_scored + est.n_unscored == len(outcomes)


def test_median() -> None:
    assert median([]) is None
    assert median([3, 1, 2]) == 2.0
    assert median([1, 2, 3, 4]) == 2.5
    assert median(iter([5])) == 5.0
