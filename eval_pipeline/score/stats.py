"""Small, exact statistics for per-question outcomes (pure Python, deterministic).

Outcomes are 1/0 (or True/False) per question, or None when the question was not scored
(e.g. the judge errored). None is never counted as a failure: it is left out and reported as
unscored, and a rate over nothing scored is None, not 0.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

Outcome = bool | int | None

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0


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


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    position = q * (len(sorted_values) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    fraction = position - lower
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * fraction


def bootstrap_ci(
    outcomes: Iterable[Outcome],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> RateEstimate | None:
    """Rate with a percentile-bootstrap confidence interval; None when nothing was scored.

    Seeded with its own `random.Random`, so the same outcomes, seed and resample count give
    the same interval on every run and no global random state is touched.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    scored, unscored = _scored(outcomes)
    if not scored:
        return None
    n = len(scored)
    rng = random.Random(seed)
    rates = sorted(sum(rng.choices(scored, k=n)) / n for _ in range(resamples))
    alpha = 1 - level
    return RateEstimate(
        rate=sum(scored) / n,
        low=_quantile(rates, alpha / 2),
        high=_quantile(rates, 1 - alpha / 2),
        n_scored=n,
        n_unscored=unscored,
        level=level,
        resamples=resamples,
        seed=seed,
    )


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts b and c.

    Under no difference each discordant pair goes either way with probability 1/2, so
    p = min(1, 2 * P[Binomial(b + c, 1/2) <= min(b, c)]). Integer arithmetic keeps it exact
    until the final division.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


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
