"""Score one question: deterministic metrics, judged metrics if any, then the gate.

The output row is what `results.jsonl` holds, one per question.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_pipeline.retrieve.results import QuestionRetrieval
from eval_pipeline.score.answer_proxy import answer_proxies
from eval_pipeline.score.gate import MetricResult, decide_coverage
from eval_pipeline.score.retrieval_metrics import question_metrics
from eval_pipeline.score.tokens import PayloadTokenizer

GATE_K = 10


def evidence_recall(retrieval_metrics: dict, abstention: bool, k: int = GATE_K) -> MetricResult:
    """Gating retrieval metric: every evidence turn (any role) in the top k."""
    if abstention:
        # Nothing to recall: an abstention question is gated on its answer alone.
        return MetricResult.unscored("abstention question: no evidence to recall")
    value = retrieval_metrics["turn"]["all"][f"recall_all@{k}"]
    if value is None:
        reason = retrieval_metrics["excluded"]["all"] or "no evidence turn labelled"
        return MetricResult.unscored(f"not scored: {reason}", gating=True)
    return MetricResult.judged(
        value, 1.0, f"turn recall_all@{k} over all evidence turns = {value:g}", gating=True
    )


def score_question(
    golden: Mapping[str, Any],
    retrieval: QuestionRetrieval,
    tokenizer: PayloadTokenizer,
    *,
    judged: Mapping[str, MetricResult] | None = None,
    gate_k: int = GATE_K,
) -> dict[str, Any]:
    meta = golden["additional_metadata"]
    abstention = bool(meta["abstention"])
    roles = dict(zip(meta["evidence_turn_ids"], meta["evidence_turn_roles"], strict=True))
    turn_ids = retrieval.retrieved_turn_ids
    session_ids = retrieval.retrieved_session_ids
    retrieval_metrics = question_metrics(
        turn_ids,
        roles,
        meta["evidence_session_ids"],
        abstention,
        retrieved_session_ids=session_ids,
    )
    payload = tokenizer.count_context(retrieval.retrieval_context)
    metrics: dict[str, MetricResult] = {
        "evidence_recall": evidence_recall(retrieval_metrics, abstention, gate_k)
    }
    for name, value in answer_proxies(golden["expected_output"], retrieval.answer).items():
        metrics[name] = (
            MetricResult(score=value, reason="offline proxy against the expected answer")
            if value is not None
            else MetricResult.unscored("no answer or empty expected answer")
        )
    metrics.update(judged or {})
    covered, weakest = decide_coverage(metrics, payload, abstention=abstention)
    return {
        "question_id": retrieval.question_id,
        "tier": meta.get("tier", 1),
        "question_type": meta["question_type"],
        "abstention": abstention,
        "retrieved_turn_ids": turn_ids,
        "retrieved_session_ids": session_ids,
        "retrieval_context": retrieval.retrieval_context,
        "answer": retrieval.answer,
        "expected_output": golden["expected_output"],
        "metrics": {name: m.model_dump() for name, m in metrics.items()},
        "retrieval_metrics": retrieval_metrics,
        "covered": covered,
        "weakest_link": weakest,
        "payload_tokens": payload,
        "latency_ms": {
            "retrieval": retrieval.retrieval_latency_ms,
            "reader": retrieval.reader_latency_ms,
        },
        "queries": [q.model_dump() for q in retrieval.queries],
        "errors": retrieval.errors,
    }
