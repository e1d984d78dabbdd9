"""Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): one ranking from many.

Each candidate scores sum(1 / (k + rank)) over the rankings it appears in (rank 1 = best), so
agreement between rankings counts and no ranking's raw scores need to be comparable with
another's (BM25 against cosine). k = 60 is the paper's constant. Ties go to the better best
rank, then to the earlier ranking, then to the id, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")

RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[T]], key: Callable[[T], Hashable], *, k: int = RRF_K
) -> list[tuple[T, float]]:
    """(candidate, fused score) best first. A candidate is the first ranking's copy of it;
    one listed twice in a ranking counts once, at its better rank, and takes no rank from
    those after it."""
    if k < 0:
        raise ValueError("the RRF constant k must be >= 0")
    score: dict[Hashable, float] = {}
    first: dict[Hashable, T] = {}
    best: dict[Hashable, tuple[int, int]] = {}  # (best rank, ranking index)
    for which, ranking in enumerate(rankings):
        seen: set[Hashable] = set()
        for candidate in ranking:
            ident = key(candidate)
            if ident in seen:
                continue
            seen.add(ident)
            rank = len(seen)  # among distinct candidates: a repeat takes no place
            score[ident] = score.get(ident, 0.0) + 1.0 / (k + rank)
            first.setdefault(ident, candidate)
            best[ident] = min(best.get(ident, (rank, which)), (rank, which))
    order = sorted(score, key=lambda i: (-score[i], best[i], str(i)))
    return [(first[i], score[i]) for i in order]
