"""Retrieval metrics against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from eval_pipeline.score.retrieval_metrics import (
    EXCLUDED_ABSTENTION,
    EXCLUDED_NO_EVIDENCE,
    EXCLUDED_NO_USER_EVIDENCE,
    KS,
    dedupe,
    exclusion_set,
    metrics_at_ks,
    ndcg_at_k,
    question_metrics,
    recall_all_at_k,
    recall_any_at_k,
    session_of,
    sessions_from_turns,
)


def test_recall_any_and_all_basic() -> None:
    ranked = ["x", "g1", "y", "g2"]
    gold = {"g1", "g2"}
    assert recall_any_at_k(ranked, gold, 1) == 0.0
    assert recall_any_at_k(ranked, gold, 2) == 1.0
    assert recall_all_at_k(ranked, gold, 3) == 0.0
    assert recall_all_at_k(ranked, gold, 4) == 1.0


def test_k_larger_than_list_uses_whole_list() -> None:
    assert recall_any_at_k(["a", "g"], {"g"}, 10) == 1.0
    assert recall_all_at_k(["a", "g"], {"g", "h"}, 10) == 0.0
    # Ideal DCG still assumes min(k, |gold|) = 2 relevant items, so a short list is penalised:
    # DCG = 1 (g at rank 2 carries full weight upstream); IDCG = 1 + 1.
    assert ndcg_at_k(["a", "g"], {"g", "h"}, 10) == pytest.approx(0.5)


def test_empty_ranked_list_scores_zero_not_none() -> None:
    assert recall_any_at_k([], {"g"}, 5) == 0.0
    assert recall_all_at_k([], {"g"}, 5) == 0.0
    assert ndcg_at_k([], {"g"}, 5) == 0.0


def test_no_gold_is_none_not_zero() -> None:
    assert recall_any_at_k(["a"], set(), 1) is None
    assert recall_all_at_k(["a"], set(), 1) is None
    assert ndcg_at_k(["a"], set(), 1) is None
    assert set(metrics_at_ks(["a"], set()).values()) == {None}


def test_ndcg_by_hand_upstream_discount() -> None:
    # Upstream DCG: rank 1 -> 1, rank r >= 2 -> 1/log2(r).
    ranked = ["x", "g1", "y", "g2"]
    gold = {"g1", "g2"}
    # k=1: nothing relevant at rank 1.
    assert ndcg_at_k(ranked, gold, 1) == 0.0
    # k=3: DCG = 1/log2(2) = 1; IDCG = 1 + 1/log2(2) = 2.
    assert ndcg_at_k(ranked, gold, 3) == pytest.approx(0.5)
    # k=5 (> list): DCG = 1 + 1/log2(4) = 1.5; IDCG = 2.
    assert ndcg_at_k(ranked, gold, 5) == pytest.approx(0.75)
    # Three gold, k=1: IDCG from min(1, 3) = 1 item.
    assert ndcg_at_k(["g1"], {"g1", "g2", "g3"}, 1) == 1.0
    # k=10, gold at ranks 1 and 3 of three: DCG = 1 + 1/log2(3); IDCG = 1 + 1 + 1/log2(3).
    expected = (1 + 1 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_at_k(["g1", "x", "g2"], {"g1", "g2", "g3"}, 10) == pytest.approx(expected)


def test_ndcg_by_hand_standard_discount() -> None:
    ranked = ["x", "g1", "y", "g2"]
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3).
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(ranked, {"g1", "g2"}, 5, discount="standard") == pytest.approx(expected)
    with pytest.raises(ValueError):
        ndcg_at_k(ranked, {"g1"}, 5, discount="nope")  # type: ignore[arg-type]


def test_ties_rank_one_and_two_weigh_the_same_upstream() -> None:
    # Upstream's discount cannot tell rank 1 from rank 2: both are a perfect single hit.
    assert ndcg_at_k(["g", "x"], {"g"}, 3) == 1.0
    assert ndcg_at_k(["x", "g"], {"g"}, 3) == 1.0
    assert ndcg_at_k(["x", "y", "g"], {"g"}, 3) == pytest.approx(1 / math.log2(3))
    # Swapping two gold items (a tie in relevance) never changes any metric.
    assert metrics_at_ks(["g1", "x", "g2"], {"g1", "g2"}) == metrics_at_ks(
        ["g2", "x", "g1"], {"g1", "g2"}
    )


def test_duplicates_count_once_at_first_position() -> None:
    assert dedupe(["a", "g", "a", "g", "b"]) == ["a", "g", "b"]
    # The repeated "a" does not take rank 2, so "g" is still in the top 2.
    ranked = ["a", "a", "g"]
    assert recall_any_at_k(ranked, {"g"}, 2) == 1.0
    # A gold id retrieved twice is one hit, not two: NDCG stays <= 1.
    assert ndcg_at_k(["g", "g", "g"], {"g"}, 3) == 1.0
    assert ndcg_at_k(["g", "g", "x"], {"g", "h"}, 3) == pytest.approx(0.5)


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], {"a"}, 0)


def test_session_derivation_first_appearance() -> None:
    assert session_of("sess_1-a#12") == "sess_1-a"
    assert sessions_from_turns(["s2#0", "s1#3", "s2#1", "s3#0", "s1#0"]) == ["s2", "s1", "s3"]
    for bad in ("s1", "#3", "s1#", "s1#x"):
        with pytest.raises(ValueError):
            session_of(bad)


def _question(**overrides):
    args = dict(
        retrieved_turn_ids=["s9#0", "s1#1", "s2#0", "s1#0", "s3#4"],
        evidence_turn_roles={"s1#0": "user", "s2#1": "assistant"},
        evidence_session_ids=["s1", "s2"],
        abstention=False,
    )
    args.update(overrides)
    return question_metrics(**args)


def test_question_metrics_layout() -> None:
    result = _question()
    assert set(result) == {"turn", "session", "excluded"}
    for level in ("turn", "session"):
        assert set(result[level]) == {"upstream", "all"}
        for variant in ("upstream", "all"):
            expected_keys = {
                f"{name}@{k}" for k in KS for name in ("recall_any", "recall_all", "ndcg")
            }
            assert set(result[level][variant]) == expected_keys
    assert result["excluded"] == {"upstream": None, "all": None}


def test_question_metrics_turn_level_variants() -> None:
    result = _question()
    # upstream gold = {s1#0} (user only), at rank 4.
    up = result["turn"]["upstream"]
    assert up["recall_any@3"] == 0.0
    assert up["recall_any@5"] == 1.0
    assert up["recall_all@5"] == 1.0
    assert up["ndcg@5"] == pytest.approx(1 / math.log2(4))
    # all gold = {s1#0, s2#1}; s2#1 never retrieved.
    every = result["turn"]["all"]
    assert every["recall_any@5"] == 1.0
    assert every["recall_all@10"] == 0.0
    # DCG = 1/log2(4) = 0.5; IDCG = 1 + 1 = 2.
    assert every["ndcg@10"] == pytest.approx(0.25)


def test_question_metrics_session_level_variants() -> None:
    result = _question()
    # Ranked sessions: s9, s1, s2, s3.
    up = result["session"]["upstream"]  # gold {s1}: only s1 holds a user evidence turn
    assert up["recall_any@1"] == 0.0
    assert up["recall_all@3"] == 1.0
    assert up["ndcg@3"] == 1.0  # rank 2 carries full weight upstream
    every = result["session"]["all"]  # gold {s1, s2}
    assert every["recall_all@1"] == 0.0
    assert every["recall_all@3"] == 1.0
    # DCG = 1 + 1/log2(3); IDCG = 2.
    assert every["ndcg@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_explicit_session_ranking_overrides_derivation() -> None:
    result = _question(retrieved_session_ids=["s2", "s1"])
    assert result["session"]["all"]["recall_all@1"] == 0.0
    assert result["session"]["all"]["recall_all@3"] == 1.0
    assert result["session"]["upstream"]["recall_any@1"] == 0.0  # s1 at rank 2


def test_assistant_only_evidence_excluded_from_upstream() -> None:
    result = _question(evidence_turn_roles={"s2#1": "assistant"}, evidence_session_ids=["s2"])
    assert result["excluded"] == {"upstream": EXCLUDED_NO_USER_EVIDENCE, "all": None}
    for level in ("turn", "session"):
        assert set(result[level]["upstream"].values()) == {None}
    assert result["turn"]["all"]["recall_any@10"] == 0.0
    assert result["session"]["all"]["recall_any@3"] == 1.0


def test_abstention_excluded_from_every_level_and_variant() -> None:
    """Issue 11 §6: abstention is apart from every recall and NDCG variant. The question's
    evidence is retrieved (user turn at rank 4), so scoring it anywhere would give 1.0."""
    result = _question(abstention=True)
    assert result["excluded"] == {"upstream": EXCLUDED_ABSTENTION, "all": EXCLUDED_ABSTENTION}
    for level in ("turn", "session"):
        for variant in ("upstream", "all"):
            assert set(result[level][variant].values()) == {None}, (level, variant)
    # Abstention takes precedence over the evidence-based reasons, in both variants.
    for roles in ({"s2#1": "assistant"}, {}):
        result = _question(abstention=True, evidence_turn_roles=roles, evidence_session_ids=[])
        assert result["excluded"] == dict.fromkeys(("upstream", "all"), EXCLUDED_ABSTENTION)


def test_no_evidence_excluded_everywhere() -> None:
    result = _question(evidence_turn_roles={}, evidence_session_ids=[], abstention=True)
    assert result["excluded"] == {"upstream": EXCLUDED_ABSTENTION, "all": EXCLUDED_ABSTENTION}
    result = _question(evidence_turn_roles={}, evidence_session_ids=[])
    assert result["excluded"] == {
        "upstream": EXCLUDED_NO_USER_EVIDENCE,
        "all": EXCLUDED_NO_EVIDENCE,
    }
    for level in ("turn", "session"):
        for variant in ("upstream", "all"):
            assert set(result[level][variant].values()) == {None}


def test_sessions_labelled_without_turn_labels() -> None:
    # An answer session with no flagged turn: session metrics score, turn metrics are None.
    result = _question(evidence_turn_roles={}, evidence_session_ids=["s1"])
    assert result["excluded"]["all"] is None
    assert set(result["turn"]["all"].values()) == {None}
    assert result["session"]["all"]["recall_any@3"] == 1.0


def test_exclusion_set() -> None:
    per_question = {
        "q1": _question(),
        "q2_abs": _question(abstention=True),
        "q3": _question(evidence_turn_roles={"s2#1": "assistant"}),
        "q4": _question(evidence_turn_roles={}, evidence_session_ids=[]),
    }
    assert exclusion_set(per_question) == {
        "upstream": {
            "q2_abs": EXCLUDED_ABSTENTION,
            "q3": EXCLUDED_NO_USER_EVIDENCE,
            "q4": EXCLUDED_NO_USER_EVIDENCE,
        },
        "all": {"q2_abs": EXCLUDED_ABSTENTION, "q4": EXCLUDED_NO_EVIDENCE},
    }
