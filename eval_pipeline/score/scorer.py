"""Score one question: deterministic metrics, judged metrics if any, then the gate.

The output row is what `results.jsonl` holds, one per question.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from eval_pipeline.failures import InfraFailure
from eval_pipeline.retrieve.results import MEMORY_KIND, QuestionRetrieval
from eval_pipeline.score.answer_proxy import answer_proxies
from eval_pipeline.score.gate import MetricResult, decide_coverage
from eval_pipeline.score.retrieval_metrics import (
    EXCLUDED_ABSTENTION,
    question_metrics,
    unscored_metrics,
)
from eval_pipeline.score.tokens import PayloadTokenizer

GATE_K = 10


def evidence_level(retrievals: Iterable[QuestionRetrieval]) -> str:
    """A run's evidence level: "turn", unless a provider's memory names its session but no
    turn anywhere in the run — a provider that cannot say which turn is measured at session
    level for every question (never 0 at turn level for a memory traced to its session)."""
    session_only = any(
        i.kind == MEMORY_KIND and i.session_ids and not i.turn_ids
        for r in retrievals
        for i in r.items
    )
    return "session" if session_only else "turn"


def evidence_recall(
    retrieval_metrics: dict, abstention: bool, k: int = GATE_K, *, level: str = "turn"
) -> MetricResult:
    """Gating retrieval metric: every evidence turn (any role) in the top k; at session
    level, every evidence session."""
    if abstention:
        # Nothing to recall: an abstention question is gated on its answer alone.
        return MetricResult.unscored("abstention question: no evidence to recall")
    value = retrieval_metrics[level]["all"][f"recall_all@{k}"]
    if value is None:
        reason = retrieval_metrics["excluded"]["all"] or f"no evidence {level} labelled"
        return MetricResult.unscored(f"not scored: {reason}", gating=True)
    return MetricResult.judged(
        value, 1.0, f"{level} recall_all@{k} over all evidence {level}s = {value:g}", gating=True
    )


def retrieval_unmeasured(retrieval: QuestionRetrieval) -> bool:
    """True when the pipeline's own failure stopped this question's retrieval: nothing about
    the system was measured (and the judge is not asked either)."""
    return any(f.stage == "retrieval" for f in retrieval.infra_failures)


def judge_failures(judged: Mapping[str, MetricResult] | None) -> list[InfraFailure]:
    """A judged metric that errored is the judge's failure (our instrument), never the
    system's: one entry per question, naming the metrics."""
    failed = {name: m.error for name, m in (judged or {}).items() if m.error}
    if not failed:
        return []
    names = ", ".join(sorted(failed))
    first = next(iter(failed.values()))
    return [InfraFailure(stage="judge", cause="judge", error=f"{names}: {first}"[:500])]


def score_question(
    golden: Mapping[str, Any],
    retrieval: QuestionRetrieval,
    tokenizer: PayloadTokenizer,
    *,
    judged: Mapping[str, MetricResult] | None = None,
    gate_k: int = GATE_K,
    level: str = "turn",
) -> dict[str, Any]:
    """One results.jsonl row. A question hit by an infrastructure failure (`infra_failures`
    of its retrieval, or a judge that failed) is unscored: `covered` is None, never False,
    and metrics that were not taken are None, never 0."""
    meta = golden["additional_metadata"]
    abstention = bool(meta["abstention"])
    roles = dict(zip(meta["evidence_turn_ids"], meta["evidence_turn_roles"], strict=True))
    turn_ids = retrieval.retrieved_turn_ids
    session_ids = retrieval.retrieved_session_ids
    infra = [*retrieval.infra_failures, *judge_failures(judged)]
    unmeasured = retrieval_unmeasured(retrieval)
    if unmeasured:
        causes = ", ".join(sorted({f.cause for f in retrieval.infra_failures}))
        retrieval_metrics = unscored_metrics(
            EXCLUDED_ABSTENTION if abstention else f"unscored: infrastructure failure ({causes})"
        )
    else:
        retrieval_metrics = question_metrics(
            turn_ids,
            roles,
            meta["evidence_session_ids"],
            abstention,
            retrieved_session_ids=session_ids,
        )
    payload = None if unmeasured else tokenizer.count_context(retrieval.retrieval_context)
    metrics: dict[str, MetricResult] = {
        "evidence_recall": evidence_recall(retrieval_metrics, abstention, gate_k, level=level)
    }
    for name, value in answer_proxies(golden["expected_output"], retrieval.answer).items():
        metrics[name] = (
            MetricResult(score=value, reason="offline proxy against the expected answer")
            if value is not None
            else MetricResult.unscored("no answer or empty expected answer")
        )
    metrics.update(judged or {})
    covered, weakest = decide_coverage(metrics, payload, abstention=abstention)
    if infra:
        # Not the system's result: whatever the gates said, the question was not measured.
        covered, weakest = None, None
    return {
        "question_id": retrieval.question_id,
        "tier": meta.get("tier", 1),
        "question_type": meta["question_type"],
        "abstention": abstention,
        "question": golden["input"],
        "question_date": meta.get("question_date"),
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
        "notes": retrieval.notes,
        "infra_failures": [f.model_dump() for f in infra],
    }
