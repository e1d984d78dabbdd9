"""Property-based checks of the retrieval metrics (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.score.retrieval_metrics import (
    KS,
    dedupe,
    metrics_at_ks,
    ndcg_at_k,
    question_metrics,
)

ids = st.sampled_from([f"s{s}#{t}" for s in range(4) for t in range(4)])
ranked_lists = st.lists(ids, max_size=20)
gold_sets = st.sets(ids, min_size=1, max_size=6)
ks = st.integers(min_value=1, max_value=25)


def _reference_ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    """Upstream's definition written independently: index a corpus, DCG over relevances."""
    corpus = dedupe(ranked) + sorted(gold - set(ranked)) + ["filler-1", "filler-2"]
    relevance = [1.0 if doc in gold else 0.0 for doc in corpus]
    order = list(range(len(dedupe(ranked))))  # the ranked list indexes the corpus head

    def dcg(rels: list[float]) -> float:
        rels = rels[:k]
        return sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(rels))

    return dcg([relevance[i] for i in order]) / dcg(sorted(relevance, reverse=True))


@given(ranked_lists, gold_sets)
def test_bounds_and_ordering(ranked: list[str], gold: set[str]) -> None:
    metrics = metrics_at_ks(ranked, gold, KS)
    for value in metrics.values():
        assert value is not None and 0.0 <= value <= 1.0
    for k in KS:
        assert metrics[f"recall_all@{k}"] <= metrics[f"recall_any@{k}"]
        # Some gold id in the top k <=> positive NDCG.
        assert (metrics[f"ndcg@{k}"] > 0) == (metrics[f"recall_any@{k}"] == 1.0)


@given(ranked_lists, gold_sets)
def test_recall_monotone_in_k(ranked: list[str], gold: set[str]) -> None:
    metrics = metrics_at_ks(ranked, gold, range(1, 25))
    for name in ("recall_any", "recall_all"):
        values = [metrics[f"{name}@{k}"] for k in range(1, 25)]
        assert values == sorted(values)


@given(ranked_lists, gold_sets, ks)
def test_ndcg_matches_independent_reference(ranked: list[str], gold: set[str], k: int) -> None:
    assert math.isclose(ndcg_at_k(ranked, gold, k), _reference_ndcg(ranked, gold, k))


@given(ranked_lists, gold_sets, st.data())
def test_duplicates_never_change_metrics(ranked: list[str], gold: set[str], data) -> None:
    if not ranked:
        return
    # Re-insert copies of already-seen ids after their first occurrence.
    noisy = list(ranked)
    for _ in range(data.draw(st.integers(0, 5))):
        i = data.draw(st.integers(0, len(noisy) - 1))
        j = data.draw(st.integers(i + 1, len(noisy)))
        noisy.insert(j, noisy[i])
    assert metrics_at_ks(noisy, gold) == metrics_at_ks(ranked, gold)


@given(ranked_lists, st.dictionaries(ids, st.sampled_from(["user", "assistant"])), st.booleans())
def test_question_metrics_never_crash_and_stay_bounded(ranked, roles, abstention) -> None:
    result = question_metrics(ranked, roles, [], abstention)
    for level in ("turn", "session"):
        for variant in ("upstream", "all"):
            block = result[level][variant]
            if result["excluded"][variant] is not None:
                assert set(block.values()) == {None}
            for value in block.values():
                assert value is None or 0.0 <= value <= 1.0
