"""LongMemEval's judge prompt and the model's yes/no under it: the reference judge.

The protocol is LongMemEval's (a per-type instruction, a separate instruction for abstention
questions, a yes/no verdict), written here in our own words; its prompt hash is a pin, so runs
judged with different wording are never compared. `reasoned` is the same rules with the
reasoning asked for before the verdict. A failed call is unscored, carrying its error.

Its own module so that the verdict methods (`score.verdicts`) and the judge that uses them
(`score.judges`) both build on it without importing each other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from eval_pipeline.llm import LLMError
from eval_pipeline.score.gate import MetricResult

if TYPE_CHECKING:
    from eval_pipeline.llm import RoleClient

JUDGE_PROMPT_VERSION = 1
CONTEXTUAL_RECALL_THRESHOLD = 0.5
ANSWER_COVERAGE_THRESHOLD = 0.5

_BASE = (
    "You grade an AI assistant's answer to a question about {subject}. You are given the "
    "question, the correct answer and the assistant's response. {rule} Reply with verdict "
    "'yes' or 'no' and a one-sentence reason."
)
SUBJECTS = {
    1: "the user's own past conversations",
    2: "its organization's history (code changes, incidents, decisions, conventions)",
}
TYPE_RULES: dict[str, str] = {
    "default": (
        "Say yes when the response contains the correct answer, or says something equivalent "
        "to it. If the response gives only part of the information the answer needs, say no."
    ),
    "temporal-reasoning": (
        "Say yes when the response contains the correct answer or an equivalent one. Counts "
        "of days, weeks or months that are off by one still count as correct. Partial "
        "information is a no."
    ),
    "knowledge-update": (
        "Say yes when the response gives the updated answer, even if it also mentions what "
        "was true before. A response that gives only the outdated information is a no."
    ),
    "single-session-preference": (
        "The correct answer is a rubric describing a personalised response. Say yes when the "
        "response recalls and uses the user's personal information as the rubric asks; it "
        "does not need to cover every point of the rubric."
    ),
}
ABSTENTION_RULE = (
    "This question cannot be answered from the recorded history; the correct answer explains "
    "why. Say yes when the response recognises that the question is unanswerable (for "
    "example, says the information was never mentioned), and no when it answers anyway."
)
GEVAL_CRITERIA = (
    "Judge whether the actual output conveys the facts of the expected output needed to "
    "answer the input. Penalise missing or contradicting facts; ignore style and extra "
    "polite wording."
)


def judge_instruction(question_type: str, abstention: bool, tier: int = 1) -> str:
    rule = ABSTENTION_RULE if abstention else TYPE_RULES.get(question_type, TYPE_RULES["default"])
    return _BASE.format(subject=SUBJECTS.get(tier, SUBJECTS[1]), rule=rule)


def prompt_hash() -> str:
    """sha256 over every prompt text the judges use: part of the run's pins."""
    texts = {
        "version": JUDGE_PROMPT_VERSION,
        "base": _BASE,
        "subjects": SUBJECTS,
        "types": TYPE_RULES,
        "abstention": ABSTENTION_RULE,
        "geval": GEVAL_CRITERIA,
        "thresholds": [CONTEXTUAL_RECALL_THRESHOLD, ANSWER_COVERAGE_THRESHOLD],
    }
    return hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()


class JudgeVerdict(BaseModel):
    verdict: Literal["yes", "no"]
    reason: str = Field(default="", max_length=2000)


# The `reasoned` prompt (score.verdicts): the same rules, the reasoning written first, so a
# small model has compared the response with the answer before it commits to a verdict.
REASONED_SUFFIX = (
    " First write your reasoning: quote the words of the response that answer the question "
    "(or say that none do) and compare them with the correct answer under the rule above. "
    "Then give the verdict that reasoning leads to."
)


class ReasonedVerdict(BaseModel):
    reasoning: str = Field(default="", max_length=2000)
    verdict: Literal["yes", "no"]


def reasoned_prompt_hash() -> str:
    body = {"base": prompt_hash(), "suffix": REASONED_SUFFIX, "schema": "reasoning,verdict"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


async def longmemeval_judge(
    judge: RoleClient, golden: Mapping[str, Any], answer: str | None
) -> MetricResult:
    """LongMemEval's protocol: the per-type instruction, the verdict then its reason."""
    return await _model_verdict(judge, golden, answer, JudgeVerdict)


async def reasoned_judge(
    judge: RoleClient, golden: Mapping[str, Any], answer: str | None
) -> MetricResult:
    """The `reasoned` prompt: LongMemEval's rules, reasoning before the verdict."""
    return await _model_verdict(judge, golden, answer, ReasonedVerdict)


_VERDICT_LINE = " Reply with verdict 'yes' or 'no' and a one-sentence reason."


async def _model_verdict(
    judge: RoleClient,
    golden: Mapping[str, Any],
    answer: str | None,
    schema: type[JudgeVerdict] | type[ReasonedVerdict],
) -> MetricResult:
    meta = golden["additional_metadata"]
    if answer is None:
        return MetricResult.unscored("no answer was produced", gating=True)
    system = judge_instruction(
        meta["question_type"], bool(meta["abstention"]), int(meta.get("tier", 1))
    )
    if schema is ReasonedVerdict:
        system = system.replace(_VERDICT_LINE, REASONED_SUFFIX)
    user = (
        f"Question: {golden['input']}\n\nCorrect answer: {golden['expected_output']}\n\n"
        f"Assistant's response: {answer}"
    )
    try:
        verdict = await judge.complete_structured(user, schema, system=system)
    except LLMError as exc:
        return MetricResult.unscored("judge failed", gating=True, error=str(exc))
    score = 1.0 if verdict.verdict == "yes" else 0.0
    why = verdict.reasoning if isinstance(verdict, ReasonedVerdict) else verdict.reason
    # What the model was told, read from the instruction it was sent (score.protocol).
    rubric = "abstention" if ABSTENTION_RULE in system else "answer"
    return MetricResult.judged(score, 1.0, why or verdict.verdict, gating=True, rubric=rubric)
