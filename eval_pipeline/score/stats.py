"""Statistics for per-question outcomes: rates, bootstrap intervals, exact McNemar, medians.

Outcomes are 1/0 (or True/False) per question, or None when the question was not scored
(e.g. the judge errored). None is never counted as a failure: it is left out and reported as
unscored, and a rate over nothing scored is None, not 0.

What scipy does (no hand-written resampling or binomial sums here):
- `bootstrap_ci`: `scipy.stats.bootstrap` with `method="percentile"` draws the resamples
  (from `numpy.random.default_rng(seed)`, passed as `rng`, so the same outcomes, seed and
  resample count give the same interval on every run and no global random state is touched)
  and takes the percentile interval (linear interpolation between order statistics).
- `mcnemar_exact`: `scipy.stats.binomtest(min(b, c), b + c, 0.5, alternative="two-sided")`.
  Its two-sided p sums the probabilities of every outcome no more likely than the observed
  one; for p = 1/2 the binomial is symmetric, so that is the doubled lower tail capped at 1,
  the textbook exact McNemar test. The figures agree with the closed form
  `min(1, 2 * sum(comb(n, i) for i <= min(b, c)) / 2**n)` up to float rounding (relative
  difference below 1e-13; exactly equal on the small hand-computed cases).

What is still written here, and why:
- `_scored` / `rate`: the None-is-unscored rule and the check that outcomes are binary are
  this project's contract, not a statistic scipy knows about.
- Degenerate intervals: when the scored outcomes do not vary (all 1, all 0, or a single
  scored question) every resample has the same rate, so the interval is exactly
  [rate, rate]; scipy refuses a single observation (ValueError) and has nothing to resample
  otherwise, so this case is answered here without calling it.
- Warnings: scipy/numpy warnings raised inside the bootstrap call (e.g. the standard error of
  a single resample, which we do not use) are silenced around that call only (RuntimeWarning
  and scipy's DegenerateDataWarning; `warnings.catch_warnings` is process-wide while the
  call runs, so another thread's warning of those kinds in that moment is hidden too); a
  non-finite endpoint, which percentile intervals of 0/1 data cannot produce, would fall
  back to [rate, rate] rather than reach a report as NaN.
- McNemar with no discordant pair (b = c = 0): p = 1.0 by definition (no evidence of a
  difference); `binomtest` needs n >= 1.
- `mcnemar_paired` (pairing per-question outcomes, leaving out a pair unscored on either
  side) and `median` (None for no values) are bookkeeping around the library calls.
"""

from __future__ import annotations

import math
import operator
import statistics
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as scipy_stats

Outcome = bool | int | None

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
BOOTSTRAP_METHOD = "percentile"


def _scored(outcomes: Iterable[Outcome]) -> tuple[list[int], int]:
    """(scored 0/1 values, count of None) with a check that values really are binary."""
    scored: list[int] = []
    unscored = 0
    for value in outcomes:
        if value is None:
            unscored += 1
        elif value in (0, 1):  # True/False compare equal to 1/0
            scored.append(int(value))
        else:
            raise ValueError(f"outcome must be 0, 1, True, False or None, got {value!r}")
    return scored, unscored


def rate(outcomes: Iterable[Outcome]) -> float | None:
    """Share of scored outcomes that are 1; None when nothing was scored."""
    scored, _ = _scored(outcomes)
    return sum(scored) / len(scored) if scored else None


@dataclass(frozen=True)
class RateEstimate:
    rate: float
    low: float
    high: float
    n_scored: int
    n_unscored: int
    level: float
    resamples: int
    seed: int

    def as_dict(self) -> dict:
        return asdict(self)


def percentile_bootstrap(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    *,
    paired: bool = False,
    resamples: int,
    seed: int,
    level: float,
) -> tuple[float, float] | None:
    """scipy's percentile bootstrap interval of `statistic`; None when an endpoint is not
    finite."""
    with warnings.catch_warnings():
        # Only around this call: e.g. one resample makes scipy's (unused) standard error
        # warn about zero degrees of freedom. The interval itself is checked below.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", scipy_stats.DegenerateDataWarning)
        result = scipy_stats.bootstrap(
            data,
            statistic,
            n_resamples=resamples,
            vectorized=True,
            paired=paired,
            confidence_level=level,
            method=BOOTSTRAP_METHOD,
            rng=np.random.default_rng(seed),
        )
    low = float(result.confidence_interval.low)
    high = float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return low, high


def _percentile_interval(
    scored: Sequence[int], *, resamples: int, seed: int, level: float
) -> tuple[float, float] | None:
    """scipy's percentile bootstrap interval of the mean; None when it is not finite."""
    data = np.asarray(scored, dtype=np.float64)
    return percentile_bootstrap((data,), np.mean, resamples=resamples, seed=seed, level=level)


def bootstrap_ci(
    outcomes: Iterable[Outcome],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> RateEstimate | None:
    """Rate with a percentile-bootstrap confidence interval; None when nothing was scored.

    The resampling and the percentile interval are `scipy.stats.bootstrap(...,
    method="percentile", rng=numpy.random.default_rng(seed))`: the same outcomes, seed and
    resample count give the same interval on every run, and no global random state is
    touched. Outcomes that do not vary (all equal, or one scored question) give
    [rate, rate]. `seed` must be a non-negative integer (numpy's seeding rule).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    seed = operator.index(seed)  # an integer (numpy's too), stored as a plain int
    if seed < 0:
        raise ValueError(f"seed must be >= 0 (numpy's seeding rule), got {seed}")
    scored, unscored = _scored(outcomes)
    if not scored:
        return None
    n = len(scored)
    point = sum(scored) / n
    interval = None
    if min(scored) != max(scored):  # else every resample has rate `point`
        interval = _percentile_interval(scored, resamples=resamples, seed=seed, level=level)
    low, high = interval if interval is not None else (point, point)
    return RateEstimate(
        rate=point,
        low=low,
        high=high,
        n_scored=n,
        n_unscored=unscored,
        level=level,
        resamples=resamples,
        seed=seed,
    )


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts b and c.

    Under no difference each discordant pair goes either way with probability 1/2:
    `scipy.stats.binomtest(min(b, c), b + c, 0.5, alternative="two-sided")`, which for
    p = 1/2 equals min(1, 2 * P[Binomial(b + c, 1/2) <= min(b, c)]). No discordant pair
    gives 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    # min(b, c) rather than b: the same call for (b, c) and (c, b), so exactly symmetric.
    test = scipy_stats.binomtest(min(b, c), n, 0.5, alternative="two-sided")
    return float(test.pvalue)


@dataclass(frozen=True)
class PairedTest:
    b: int  # base passed, candidate failed
    c: int  # base failed, candidate passed
    n_pairs: int  # questions scored in both runs
    p_value: float

    def as_dict(self) -> dict:
        return asdict(self)


def mcnemar_paired(base: Sequence[Outcome], candidate: Sequence[Outcome]) -> PairedTest:
    """Exact McNemar over paired per-question outcomes (same order, same questions).

    A pair with None on either side is left out: an unscored question cannot flip.
    """
    if len(base) != len(candidate):
        raise ValueError(f"paired outcomes differ in length: {len(base)} vs {len(candidate)}")
    b = c = n_pairs = 0
    for x, y in zip(base, candidate, strict=True):
        (xs, _), (ys, _) = _scored([x]), _scored([y])
        if not xs or not ys:
            continue
        n_pairs += 1
        if xs[0] == 1 and ys[0] == 0:
            b += 1
        elif xs[0] == 0 and ys[0] == 1:
            c += 1
    return PairedTest(b=b, c=c, n_pairs=n_pairs, p_value=mcnemar_exact(b, c))


def median(values: Iterable[float]) -> float | None:
    """Median, or None for no values (an empty set has no typical size, not size 0)."""
    values = list(values)
    return float(statistics.median(values)) if values else None
