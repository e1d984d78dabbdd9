"""Scoring a question and aggregating a run: gate, unscored vs 0, per-tier summary."""

from __future__ import annotations

import pytest

from eval_pipeline.failures import InfraFailure
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.score.gate import MetricResult, decide_coverage
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize, summary_markdown
from eval_pipeline.score.tokens import PayloadTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return PayloadTokenizer()


def golden(qid, *, evidence=("s1#0",), roles=("user",), qtype="multi-session", abstention=False):
    return {
        "name": qid,
        "input": "q?",
        "expected_output": "blue",
        "additional_metadata": {
            "tier": 1,
            "question_type": qtype,
            "question_date": "2023/05/30 (Tue) 23:40",
            "abstention": abstention,
            "evidence_turn_ids": list(evidence),
            "evidence_turn_roles": list(roles),
            "evidence_session_ids": sorted({t.split("#")[0] for t in evidence}),
            "haystack_session_ids": ["s1", "s2"],
        },
    }


def retrieval(qid, turn_ids, *, answer="it was blue", texts=None):
    items = [
        RetrievedItem(
            text=(texts or {}).get(t, f"text of {t}"), turn_ids=[t], session_ids=[t.split("#")[0]]
        )
        for t in turn_ids
    ]
    return QuestionRetrieval(
        question_id=qid,
        scope="question",
        retriever="fulltext",
        items=items,
        retrieval_context=[i.text for i in items],
        answer=answer,
        reader="offline:extractive",
    )


def test_covered_when_every_evidence_turn_is_retrieved(tokenizer):
    row = score_question(golden("q1"), retrieval("q1", ["s2#1", "s1#0"]), tokenizer)
    assert row["covered"] is True and row["weakest_link"] is None
    assert row["metrics"]["evidence_recall"]["score"] == 1.0
    assert row["retrieval_metrics"]["turn"]["all"]["recall_any@1"] == 0.0
    assert row["retrieval_metrics"]["turn"]["all"]["recall_any@3"] == 1.0
    assert row["payload_tokens"] == tokenizer.count_context(["text of s2#1", "text of s1#0"])
    assert row["metrics"]["proxy_containment"]["score"] == 1.0


def test_missing_evidence_is_not_covered_and_names_the_weakest_link(tokenizer):
    g = golden("q1", evidence=("s1#0", "s2#3"), roles=("user", "assistant"))
    row = score_question(g, retrieval("q1", ["s1#0"]), tokenizer)
    assert row["covered"] is False and row["weakest_link"] == "evidence_recall"
    assert row["retrieval_metrics"]["turn"]["all"]["recall_any@10"] == 1.0
    assert row["retrieval_metrics"]["turn"]["all"]["recall_all@10"] == 0.0


def test_zero_token_payload_is_never_covered(tokenizer):
    row = score_question(golden("q1"), retrieval("q1", ["s1#0"], texts={"s1#0": ""}), tokenizer)
    assert row["payload_tokens"] == 0
    assert row["covered"] is False and row["weakest_link"] == "empty_payload"


def test_unscored_gate_means_unknown_coverage_not_failure(tokenizer):
    outage = {"answer_judge": MetricResult.unscored("judge error: HTTP 500", gating=True)}
    row = score_question(golden("q1"), retrieval("q1", ["s1#0"]), tokenizer, judged=outage)
    assert row["covered"] is None
    assert row["metrics"]["answer_judge"]["score"] is None


def test_abstention_question_is_ungated_offline(tokenizer):
    g = golden("q_abs", evidence=(), roles=(), abstention=True)
    row = score_question(g, retrieval("q_abs", ["s1#0"]), tokenizer)
    assert row["metrics"]["evidence_recall"]["gating"] is False
    assert row["covered"] is None


def test_decide_coverage_orders_failures_by_stage():
    m = {
        "answer_judge": MetricResult.judged(0.0, 1.0, "no", gating=True),
        "evidence_recall": MetricResult.judged(0.0, 1.0, "missing", gating=True),
    }
    assert decide_coverage(m, 10) == (False, "evidence_recall")
    assert decide_coverage({}, 10) == (None, None)


def test_summary_per_tier_with_unscored_apart_and_none_rates(tokenizer):
    rows = [
        score_question(golden("a"), retrieval("a", ["s1#0"]), tokenizer),
        score_question(golden("b", qtype="knowledge-update"), retrieval("b", ["s2#0"]), tokenizer),
        score_question(
            golden("c", evidence=(), roles=(), abstention=True), retrieval("c", []), tokenizer
        ),
    ]
    s = summarize(rows)["tiers"]["1"]
    assert s["counts"] == {
        "questions": 3,
        "abstention": 1,
        "covered": 1,
        "not_covered": 1,
        "unscored": 0,
        "unscored_infrastructure": 0,
    }
    assert s["coverage"]["rate"] == 0.5 and s["coverage"]["n_scored"] == 2
    assert s["coverage_by_type"]["multi-session"]["rate"] == 1.0
    assert s["coverage_by_type"]["knowledge-update"]["rate"] == 0.0
    assert s["coverage_task_averaged"] == 0.5
    assert s["abstention"]["questions"] == 1
    assert s["abstention"]["coverage"] is None  # never scored → None, not 0
    assert s["excluded"] == {
        "upstream": {"c": "abstention question"},
        "all": {"c": "abstention question"},
    }
    assert s["retrieval"]["turn"]["all"]["recall_any@1"]["mean"] == 0.5
    assert s["efficiency"]["median_payload_tokens_covered"] == rows[0]["payload_tokens"]
    md = summary_markdown(summarize(rows))
    assert "### Tier 1" in md and "unscored" not in md.split("| coverage |")[1].split("\n")[2]


def test_summary_all_unscored_gives_none_not_zero(tokenizer):
    outage = {"answer_judge": MetricResult.unscored("judge error", gating=True)}
    rows = [
        score_question(golden(q), retrieval(q, ["s1#0"]), tokenizer, judged=outage)
        for q in ("a", "b")
    ]
    s = summarize(rows)["tiers"]["1"]
    assert s["coverage"] is None and s["counts"]["unscored"] == 2
    assert s["metrics"]["answer_judge"] == {
        "mean": None,
        "n_scored": 0,
        "n_unscored": 2,
        "pass_rate": None,
    }
    assert "| unscored | unscored |" in summary_markdown(summarize(rows))


def test_a_failed_gate_with_another_unscored_is_undecided_but_named():
    """During a judge outage only failures could be decided; counting them would bias the
    coverage rate towards 0, so the question stays unscored and the failure is still named."""
    m = {
        "evidence_recall": MetricResult.judged(0.0, 1.0, "missing", gating=True),
        "answer_judge": MetricResult.unscored("judge error", gating=True),
    }
    assert decide_coverage(m, 10) == (None, "evidence_recall")


def _infra(stage, cause="graph_server"):
    return InfraFailure(stage=stage, cause=cause, error="ServiceUnavailable: gone")


def test_a_question_the_infrastructure_failed_is_unscored_never_a_miss():
    tokenizer = PayloadTokenizer()
    down = retrieval("a", []).model_copy(update={"infra_failures": [_infra("retrieval")]})
    miss = retrieval("b", []).model_copy(update={"errors": ["retrieval: ValueError: my bug"]})
    reader_down = retrieval("c", ["s1#0"], answer=None).model_copy(
        update={"infra_failures": [_infra("reader", "llm_provider")]}
    )
    rows = [
        score_question(golden(q), r, tokenizer)
        for q, r in zip("abc", [down, miss, reader_down], strict=True)
    ]
    a, b, c = rows
    assert a["covered"] is None and a["weakest_link"] is None and a["payload_tokens"] is None
    assert a["retrieval_metrics"]["turn"]["all"]["recall_all@10"] is None
    assert a["retrieval_metrics"]["excluded"]["all"].startswith("unscored: infrastructure")
    assert a["infra_failures"] == [_infra("retrieval").model_dump()]
    assert b["covered"] is False and b["retrieval_metrics"]["turn"]["all"]["recall_all@10"] == 0
    assert b["infra_failures"] == [] and b["weakest_link"] == "empty_payload"
    # The reader's provider failed: retrieval is still measured, coverage is not decided.
    assert c["retrieval_metrics"]["turn"]["all"]["recall_all@10"] == 1.0 and c["covered"] is None
    summary = summarize(rows)
    assert summary["status"] == "incomplete"
    assert summary["incomplete"]["questions"] == 2
    assert summary["incomplete"]["by_cause"] == {"graph_server": 1, "llm_provider": 1}
    tier = summary["tiers"]["1"]
    assert tier["counts"]["unscored"] == 2 and tier["counts"]["not_covered"] == 1
    assert tier["coverage"]["rate"] == 0.0 and tier["coverage"]["n_scored"] == 1
    assert tier["retrieval"]["turn"]["all"]["recall_all@10"]["n"] == 2  # b and c, not a
    assert "INCOMPLETE" in summary_markdown(summary)


def test_a_judge_that_failed_makes_the_question_unscored_and_the_run_incomplete():
    judged = {
        "answer_judge": MetricResult.unscored("judge failed", gating=True, error="HTTP 500"),
        "contextual_recall": MetricResult.unscored("judge failed", gating=True, error="HTTP 500"),
    }
    row = score_question(golden("a"), retrieval("a", ["s1#0"]), PayloadTokenizer(), judged=judged)
    assert row["covered"] is None
    (failure,) = row["infra_failures"]
    assert failure["stage"] == "judge" and failure["cause"] == "judge"
    assert "answer_judge" in failure["error"] and "HTTP 500" in failure["error"]
    assert summarize([row])["incomplete"]["by_cause"] == {"judge": 1}
    clean = score_question(golden("b"), retrieval("b", ["s1#0"]), PayloadTokenizer())
    assert summarize([clean])["status"] == "complete"
