"""Tier-2 metrics: citations (deterministic) and the weighted criteria judge.

Citations are judged on what retrieval handed over, at session (= event) level, in the top k
sessions (order of first appearance):

    citation_precision = |top_k ∩ must_cite| / |top_k ∩ (must_cite ∪ must_not_cite)|
                         None when the top k holds neither kind (nothing to judge)
    citation_recall    = |top_k ∩ must_cite| / |must_cite|     None when must_cite is empty
    must_not_cite_hits = |top_k ∩ must_not_cite|               None when must_not_cite is empty

Precision ignores neutral distractors on purpose: it asks "when retrieval surfaced one of the
events that decide the answer, was it the right one or the lure?", which plain precision over
the whole top k would drown in neutral noise. None of these gate coverage.

The criteria judge asks the `judge` role, with structured output, which of the scenario's
criteria the answer meets; the score is the sum of the met weights (0..100). No judge, an
offline judge, a provider failure or a malformed verdict → unscored, never 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from eval_pipeline.llm import LLMError, LLMLayer
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.retrieval_metrics import dedupe, session_of

CITATION_K = 10
CRITERIA_PROMPT_VERSION = 1
CRITERIA_THRESHOLD = 70.0  # a pass mark for reports; the criteria score never gates
CITATION_METRICS = ("citation_precision", "citation_recall", "must_not_cite_hits")
CRITERIA_METRIC = "criteria_score"
INVARIANT_METRIC = "invariant_score"  # tier2.invariant_judge's metric (kept in step there)

CRITERIA_SYSTEM = (
    "You grade an AI assistant's answer to a question about a software company's engineering "
    "history (pull requests, issues, chat threads, deploys, alerts, documents). You are given "
    "the question, a reference answer and a numbered list of criteria. Decide for each "
    "criterion on its own whether the assistant's answer meets it; use the reference answer "
    "as the source of truth. An answer that states a fact and its contradiction does not meet "
    "a criterion about that fact. Return exactly one verdict per criterion, with its number."
)


def _retrieved_sessions(retrieved: Any) -> list[str]:
    """Session ids in rank order from a scored row, a QuestionRetrieval or a plain list
    (of session ids or `<session_id>#<index>` turn ids)."""
    if isinstance(retrieved, Mapping):
        sessions = retrieved.get("retrieved_session_ids")
        if sessions is None:
            sessions = retrieved.get("retrieved_turn_ids", [])
    elif hasattr(retrieved, "retrieved_session_ids"):
        sessions = retrieved.retrieved_session_ids
    else:
        sessions = retrieved
    return dedupe(session_of(s) if "#" in s else s for s in sessions)


def citation_metrics(
    retrieved: Any, golden: Mapping[str, Any], *, k: int = CITATION_K
) -> dict[str, MetricResult]:
    meta = golden["additional_metadata"]
    must = list(dict.fromkeys(meta.get("must_cite", [])))
    must_not = list(dict.fromkeys(meta.get("must_not_cite", [])))
    top = _retrieved_sessions(retrieved)[:k]
    cited = [s for s in top if s in set(must)]
    lured = [s for s in top if s in set(must_not)]

    judged = len(cited) + len(lured)
    if judged:
        precision = MetricResult(
            score=len(cited) / judged,
            reason=f"top {k}: {len(cited)} must_cite vs {len(lured)} must_not_cite event(s)",
        )
    else:
        precision = MetricResult.unscored(f"top {k} holds no must_cite or must_not_cite event")
    if must:
        missing = [e for e in must if e not in set(cited)]
        recall = MetricResult(
            score=len(cited) / len(must),
            threshold=1.0,
            passed=not missing,
            reason=f"top {k}: {len(cited)}/{len(must)} must_cite"
            + (f"; missing {missing}" if missing else ""),
        )
    else:
        recall = MetricResult.unscored("no must_cite event")
    if must_not:
        hits = MetricResult(
            score=float(len(lured)),
            passed=not lured,
            reason=f"top {k}: must_not_cite retrieved {lured}" if lured else "none retrieved",
        )
    else:
        hits = MetricResult.unscored("no must_not_cite event")
    return {"citation_precision": precision, "citation_recall": recall, "must_not_cite_hits": hits}


# --------------------------------------------------------------------------------------------
# Weighted criteria judge


class CriterionVerdict(BaseModel):
    criterion: int = Field(ge=1, description="the criterion's number in the list")
    met: bool
    reason: str = Field(default="", max_length=1000)


class CriteriaVerdicts(BaseModel):
    verdicts: list[CriterionVerdict]


def criteria_prompt_hash() -> str:
    """sha256 of the criteria judge's fixed wording: a pin next to the tier-1 prompt hash."""
    texts = {
        "version": CRITERIA_PROMPT_VERSION,
        "system": CRITERIA_SYSTEM,
        "threshold": CRITERIA_THRESHOLD,
    }
    return hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()


def criteria_user_message(golden: Mapping[str, Any], answer: str) -> str:
    criteria = golden["additional_metadata"]["criteria"]
    listed = "\n".join(
        f"{i}. ({c['weight']} points) {c['criterion']}" for i, c in enumerate(criteria, 1)
    )
    return (
        f"Question: {golden['input']}\n\nReference answer: {golden['expected_output']}\n\n"
        f"Criteria:\n{listed}\n\nAssistant's answer: {answer}"
    )


def score_verdicts(criteria: Sequence[Mapping[str, Any]], verdicts: CriteriaVerdicts) -> tuple:
    """(score 0..100, reason), or (None, problem) when the verdicts do not match the list."""
    numbers = [v.criterion for v in verdicts.verdicts]
    expected = list(range(1, len(criteria) + 1))
    if sorted(numbers) != expected:
        return None, f"judge returned verdicts for criteria {sorted(numbers)}, expected {expected}"
    met = {v.criterion: v for v in verdicts.verdicts}
    score = float(sum(c["weight"] for i, c in enumerate(criteria, 1) if met[i].met))
    missed = [f"{i} ({met[i].reason or 'not met'})" for i in expected if not met[i].met]
    return score, ("all criteria met" if not missed else "not met: " + "; ".join(missed))


def offline_criteria_result(reason: str = "unscored: no judge") -> MetricResult:
    return MetricResult.unscored(reason)


async def criteria_judge(judge: Any, golden: Mapping[str, Any], answer: str | None) -> MetricResult:
    """The weighted criteria score of one answer. `judge` is the LLM layer's `judge`
    RoleClient (or None when no judge is configured)."""
    if judge is None or getattr(judge, "is_offline", False):
        return offline_criteria_result()
    if answer is None:
        return MetricResult.unscored("no answer was produced")
    criteria = golden["additional_metadata"].get("criteria") or []
    if not criteria:
        return MetricResult.unscored("the golden has no criteria")
    try:
        verdicts = await judge.complete_structured(
            criteria_user_message(golden, answer),
            CriteriaVerdicts,
            system=CRITERIA_SYSTEM,
            # Verdicts that do not match the criteria are refused, hence never cached: a
            # re-run asks again instead of replaying them.
            accept=lambda v: (
                score_verdicts(criteria, v)[1] if score_verdicts(criteria, v)[0] is None else None
            ),
        )
    except LLMError as exc:
        return MetricResult.unscored("judge failed", error=str(exc))
    score, reason = score_verdicts(criteria, verdicts)
    if score is None:
        return MetricResult.unscored("judge failed", error=reason)
    return MetricResult.judged(score, CRITERIA_THRESHOLD, reason, gating=False)


def criteria_judge_batch(
    layer: LLMLayer | None,
    pairs: Sequence[tuple[Mapping[str, Any], str | None]],
    *,
    concurrency: int = 4,
) -> list[MetricResult]:
    """Judge many (golden, answer) pairs, in input order; all unscored without a layer."""
    if layer is None:
        return [offline_criteria_result() for _ in pairs]
    judge = layer.role("judge")

    async def run() -> list[MetricResult]:
        gate = asyncio.Semaphore(concurrency)

        async def one(golden, answer):
            async with gate:
                return await criteria_judge(judge, golden, answer)

        return list(await asyncio.gather(*(one(g, a) for g, a in pairs)))

    return layer.run_sync(run())


def tier2_metrics(
    row: Mapping[str, Any],
    golden: Mapping[str, Any],
    *,
    criteria: MetricResult | None = None,
    invariant: MetricResult | None = None,
    k: int = CITATION_K,
) -> dict[str, MetricResult]:
    """Every tier-2 metric of one scored row: citations, the criteria score and the invariant
    score (each judged one unscored unless given)."""
    out = citation_metrics(row, golden, k=k)
    out[CRITERIA_METRIC] = criteria if criteria is not None else offline_criteria_result()
    out[INVARIANT_METRIC] = invariant if invariant is not None else offline_criteria_result()
    return out


def add_tier2_metrics(
    row: dict[str, Any],
    golden: Mapping[str, Any],
    *,
    criteria: MetricResult | None = None,
    invariant: Any = None,
    k: int = CITATION_K,
) -> dict[str, Any]:
    """A copy of a `score_question` row with the tier-2 metrics merged into `metrics`.
    None gates, so `covered` and `weakest_link` stay as the scorer decided them.

    `invariant` is the invariant judge's `InvariantResult` (or its MetricResult): its score
    goes in `metrics["invariant_score"]`, its four dimensions and unsupported claims in
    `row["invariant"]` (absent when unscored)."""
    if golden["additional_metadata"].get("tier") != 2:
        return row
    dims = None
    if invariant is not None and hasattr(invariant, "as_metric"):
        if invariant.dimensions is not None:
            dims = {
                "dimensions": {n: d.model_dump() for n, d in invariant.dimensions.items()},
                "unsupported_claims": list(invariant.unsupported_claims),
            }
        invariant = invariant.as_metric()
    extra = tier2_metrics(row, golden, criteria=criteria, invariant=invariant, k=k)
    metrics = dict(row["metrics"])
    metrics.update({name: m.model_dump() for name, m in extra.items()})
    out = {**row, "metrics": metrics}
    if dims is not None:
        out["invariant"] = dims
    return out
