"""Gate then rank: which metrics decide "covered", and the weakest link when one fails.

A question is covered only if every gating metric passed, and decided only when every
gating metric was taken: one never taken (judge outage, no evidence to recall) makes
coverage unknown (`None`), not a failure, though a gate that did fail is still named. A
zero-token payload never covers an answerable question (it is named first).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# Pipeline order: when several gating metrics fail, the earliest stage is the weakest link.
STAGE_ORDER = ("evidence_recall", "contextual_recall", "answer_judge", "answer_coverage")


class MetricResult(BaseModel):
    """One metric of one question, kept whole so a report can attribute a failure."""

    model_config = ConfigDict(extra="forbid")

    score: float | None  # None: not taken (unscored), never 0
    threshold: float | None = None
    passed: bool | None = None
    gating: bool = False
    reason: str = ""
    error: str | None = None
    # The rubric an answer judge applied ("abstention" | "answer" | "mixed", score.protocol);
    # None for other metrics and for a judge that does not say.
    rubric: str | None = None

    @classmethod
    def unscored(cls, reason: str, *, gating: bool = False, error: str | None = None):
        return cls(score=None, passed=None, gating=gating, reason=reason, error=error)

    @classmethod
    def judged(
        cls, score: float, threshold: float, reason: str, *, gating: bool, rubric: str | None = None
    ):
        return cls(
            score=score,
            threshold=threshold,
            passed=score >= threshold,
            gating=gating,
            reason=reason,
            rubric=rubric,
        )


def decide_coverage(
    metrics: dict[str, MetricResult], payload_tokens: int | None, *, abstention: bool = False
) -> tuple[bool | None, str | None]:
    """(covered, weakest link). Unknown coverage is (None, None).

    The empty-payload rule is for answerable questions: handing back nothing can be the
    right behaviour for an abstention question, which its answer gate decides.
    """
    gating = {name: m for name, m in metrics.items() if m.gating}
    failed = [name for name, m in gating.items() if m.passed is False]
    if payload_tokens == 0 and not abstention:
        failed.insert(0, "empty_payload")
    order = {name: i for i, name in enumerate(STAGE_ORDER)}
    weakest = min(failed, key=lambda n: order.get(n, -1)) if failed else None
    if any(m.passed is None for m in gating.values()):
        # Decided only when every gate was taken: during a judge outage only failures could
        # be decided, and a rate over those alone would read as a collapse to 0%.
        return None, weakest
    if failed:
        return False, weakest
    if not gating:
        return None, None
    return True, None
