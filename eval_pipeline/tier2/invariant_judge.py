"""Tier 2's invariant judge: one call grades an answer against the scenario's signal events.

It sits beside the per-criteria judge (`metrics.criteria_judge`) and asks something else:
not "does the answer meet these authored criteria?" but "is everything the answer says backed
by the events, and does it use what the events hold?". One call sees the question, the
question's signal events (with id, source kind, time, title and the signal turns) and the
agent's full answer, and grades four dimensions on a whole-number scale of 0 to 4:

    faithfulness  every claim is supported by the events (invented or contradicted = low)
    coverage      the facts in the events that the question needs are in the answer
    clarity       direct and organised, no padding
    usefulness    an engineer could act on it

Each grade g becomes points weight · g / 4 with weights 30/30/20/20, so the aggregate
`invariant_score` runs 0..100 like `criteria_score`: a perfectly clear answer that invents
its facts and misses the question's facts still tops out at 40 (clarity 20 + usefulness 20).
An answer *passes* when the aggregate reaches 70 **and** the two invariants hold, faithfulness
and coverage each at least 3 of 4: the weights alone would let a half-covered answer through
(4, 2, 4, 2 → 75) or one with several unsupported claims (2, 4, 4, 4 → 85). The pass is the
yes/no that a labelled-set check reads (`invariant_verdict`); the score is reported whole.
The reference answer is not shown: the events are the ground truth, which keeps this judge
independent of the authored expected answer.

The structured output has no length or range keywords in its JSON schema (llama.cpp's grammar
converter refuses `maxLength`); ranges are checked when the reply is parsed (a grade outside
0..4 or a boolean is invalid, which the LLM layer answers with its one repair request) and
lengths are enforced by truncating reasons and claims on parsing. A missing judge, an offline
judge, no answer, no signal events, a provider failure or a reply still invalid after the
repair is **unscored**, carrying the error, never 0.

Wiring: `assets/scoring.add_tier2_scores` runs `invariant_judge_batch` beside
`criteria_judge_batch` on the same layer; the row gets `metrics["invariant_score"]`
(`InvariantResult.as_metric()`) and `row["invariant"]` (dimensions, unsupported claims); the
manifest pins `invariant_prompt_hash()` next to `criteria_prompt_hash` (a comparability pin),
and `eval-pipeline judge-check` checks it on the labelled set's tier-2 items.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from eval_pipeline.llm import LLMError, LLMLayer
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.tier2.schema import Universe

INVARIANT_PROMPT_VERSION = 1
INVARIANT_METRIC = "invariant_score"
DIMENSIONS = ("faithfulness", "coverage", "clarity", "usefulness")
WEIGHTS: dict[str, int] = {"faithfulness": 30, "coverage": 30, "clarity": 20, "usefulness": 20}
SCALE_MAX = 4  # grades are whole numbers 0..SCALE_MAX
INVARIANT_THRESHOLD = 70.0  # pass mark of the aggregate, for reports and the yes/no check
INVARIANT_MIN_GRADE = 3  # ... and faithfulness and coverage must each reach this to pass
INVARIANTS = ("faithfulness", "coverage")
REASON_MAX_CHARS = 1000
CLAIM_MAX_CHARS = 300
CLAIMS_MAX = 20

INVARIANT_SYSTEM = (
    "You grade an AI assistant's answer to a question about a software company's engineering "
    "history. You are given the question, the source events the answer should rest on (pull "
    "requests, issues, chat threads, deploys, alerts and documents, each with its id, kind and "
    "time) and the assistant's full answer. The events are the only ground truth: do not use "
    "outside knowledge, and count any claim the events do not support as unsupported, however "
    "plausible it sounds.\n\n"
    "Grade four dimensions, each with a whole number from 0 to 4:\n"
    "- faithfulness: is every claim in the answer supported by the events? 4 = all claims "
    "supported; 3 = one minor detail unsupported; 2 = several unsupported or wrong claims next "
    "to supported ones; 1 = mostly unsupported; 0 = the main claim is invented or contradicts "
    "the events.\n"
    "- coverage: does the answer contain the facts from the events that the question needs? "
    "4 = all of them; 3 = nearly all; 2 = about half; 1 = a small part; 0 = none.\n"
    "- clarity: is it direct and well organised, without padding? 4 = very clear; 0 = hard to "
    "follow.\n"
    "- usefulness: could an engineer act on it for the question asked? 4 = fully; 0 = not at "
    "all.\n\n"
    "When the events do not hold the answer, an answer that says so is faithful and covers the "
    "question, and an answer that gives one anyway is not faithful. Grade each dimension on its "
    "own: clear wording does not make a claim supported. List every unsupported claim you "
    "found, and give a short reason for each grade."
)
USER_TEMPLATE = "Question: {question}\n\nSource events:\n{events}\n\nAssistant's answer: {answer}"


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# The class docstrings are the schema's descriptions, which the judge reads. No range or
# length keyword goes into the schema: both are checked by the validators, on parsing.
class DimensionGrade(BaseModel):
    """A whole-number grade from 0 to 4, and a short reason for it."""

    score: int
    reason: str = ""

    @field_validator("score", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a grade is a whole number from 0 to 4, not a boolean")
        return value

    @field_validator("score")
    @classmethod
    def _in_range(cls, value: int) -> int:
        if not 0 <= value <= SCALE_MAX:
            raise ValueError(f"a grade is a whole number from 0 to {SCALE_MAX}, got {value}")
        return value

    @field_validator("reason")
    @classmethod
    def _reason_length(cls, value: str) -> str:
        return _clip(value, REASON_MAX_CHARS)


class InvariantGrades(BaseModel):
    """The four grades, and every claim of the answer that the events do not support."""

    faithfulness: DimensionGrade
    coverage: DimensionGrade
    clarity: DimensionGrade
    usefulness: DimensionGrade
    unsupported_claims: list[str] = []

    @field_validator("unsupported_claims")
    @classmethod
    def _claims_length(cls, value: list[str]) -> list[str]:
        claims = [_clip(c, CLAIM_MAX_CHARS) for c in value if c.strip()]
        return claims[:CLAIMS_MAX]


class DimensionScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grade: int  # 0..SCALE_MAX as the judge gave it
    weight: int
    points: float  # weight * grade / SCALE_MAX
    reason: str = ""


class InvariantResult(BaseModel):
    """The invariant score of one answer: 0..100, or None (unscored) with the reason/error."""

    model_config = ConfigDict(extra="forbid")

    score: float | None
    threshold: float = INVARIANT_THRESHOLD
    passed: bool | None = None
    dimensions: dict[str, DimensionScore] | None = None
    unsupported_claims: list[str] = []
    reason: str = ""
    error: str | None = None

    @classmethod
    def unscored(cls, reason: str, *, error: str | None = None) -> InvariantResult:
        return cls(score=None, passed=None, reason=reason, error=error)

    def as_metric(self) -> MetricResult:
        """As the row's `metrics["invariant_score"]` (never gating; `passed` as decided here,
        which also asks for the invariants, not only score >= threshold)."""
        if self.score is None:
            return MetricResult.unscored(self.reason, error=self.error)
        return MetricResult(
            score=self.score,
            threshold=self.threshold,
            passed=self.passed,
            gating=False,
            reason=self.reason,
        )


class SignalEvent(BaseModel):
    """One signal event as the judge sees it: the signal turns only."""

    model_config = ConfigDict(extra="forbid")

    id: str
    source: str | None = None
    timestamp: str | None = None  # "2024-02-26 11:00" (UTC)
    title: str | None = None
    messages: list[str]  # "<author>: <text>"


def invariant_prompt_hash() -> str:
    """sha256 of the invariant judge's fixed wording, scale and weights: its pin."""
    texts = {
        "version": INVARIANT_PROMPT_VERSION,
        "system": INVARIANT_SYSTEM,
        "user": USER_TEMPLATE,
        "dimensions": list(DIMENSIONS),
        "weights": WEIGHTS,
        "scale_max": SCALE_MAX,
        "threshold": INVARIANT_THRESHOLD,
        "invariants": [list(INVARIANTS), INVARIANT_MIN_GRADE],
        "limits": [REASON_MAX_CHARS, CLAIM_MAX_CHARS, CLAIMS_MAX],
        # The schema is part of what the judge reads (the layer puts it in the prompt).
        "schema": InvariantGrades.model_json_schema(),
    }
    return hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()


def signal_events(golden: Mapping[str, Any], universe: Universe | None = None) -> list[SignalEvent]:
    """The question's signal events, from its evidence turn ids (`<event id>#<index>`).

    With the universe: source kind, timestamp, title and the signal messages of each event.
    Without it (or for an event it lacks): the golden's `context` text of those turns."""
    meta = golden.get("additional_metadata") or {}
    turn_ids = list(meta.get("evidence_turn_ids") or [])
    context = list(golden.get("context") or [])
    grouped: dict[str, list[tuple[int, str | None]]] = {}
    for n, tid in enumerate(turn_ids):
        event_id, _, index = tid.rpartition("#")
        text = context[n] if n < len(context) else None
        grouped.setdefault(event_id, []).append((int(index), text))
    out = []
    for event_id, turns in grouped.items():
        if universe is not None and event_id in universe:
            event = universe[event_id]
            messages = [
                f"{event.messages[i].author}: {event.messages[i].text.strip()}"
                for i, _ in turns
                if 0 <= i < len(event.messages)
            ]
            out.append(
                SignalEvent(
                    id=event_id,
                    source=event.source,
                    timestamp=event.timestamp.strftime("%Y-%m-%d %H:%M"),
                    title=event.title.strip() if event.title else None,
                    messages=messages,
                )
            )
        else:
            out.append(SignalEvent(id=event_id, messages=[t for _, t in turns if t]))
    return out


def render_events(events: Sequence[SignalEvent]) -> str:
    blocks = []
    for n, e in enumerate(events, 1):
        head = f"[{n}] {e.id}"
        facts = ", ".join(x for x in (e.source, f"{e.timestamp} UTC" if e.timestamp else "") if x)
        if facts:
            head += f" ({facts})"
        if e.title:
            head += f": {e.title}"
        blocks.append("\n".join([head, *(f"  {m}" for m in e.messages)]))
    return "\n".join(blocks)


def invariant_user_message(question: str, events: Sequence[SignalEvent], answer: str) -> str:
    return USER_TEMPLATE.format(
        question=question.strip(), events=render_events(events), answer=answer.strip()
    )


def score_grades(grades: InvariantGrades) -> InvariantResult:
    dims = {}
    for name in DIMENSIONS:
        g: DimensionGrade = getattr(grades, name)
        dims[name] = DimensionScore(
            grade=g.score,
            weight=WEIGHTS[name],
            points=WEIGHTS[name] * g.score / SCALE_MAX,
            reason=g.reason,
        )
    total = round(sum(d.points for d in dims.values()), 6)
    broken = [n for n in INVARIANTS if dims[n].grade < INVARIANT_MIN_GRADE]
    reason = "; ".join(f"{name} {d.grade}/{SCALE_MAX}" for name, d in dims.items())
    if grades.unsupported_claims:
        reason += f"; {len(grades.unsupported_claims)} unsupported claim(s)"
    if broken:
        reason += f"; fails on {' and '.join(broken)} (below {INVARIANT_MIN_GRADE}/{SCALE_MAX})"
    return InvariantResult(
        score=total,
        passed=total >= INVARIANT_THRESHOLD and not broken,
        dimensions=dims,
        unsupported_claims=list(grades.unsupported_claims),
        reason=reason,
    )


async def invariant_judge(
    judge: Any,
    golden: Mapping[str, Any],
    answer: str | None,
    events: Sequence[SignalEvent] | None = None,
    *,
    universe: Universe | None = None,
) -> InvariantResult:
    """Grade one answer. `judge` is the LLM layer's `judge` RoleClient (None: no judge);
    `events` default to `signal_events(golden, universe)`."""
    if judge is None or getattr(judge, "is_offline", False):
        return InvariantResult.unscored("unscored: no judge")
    if answer is None:
        return InvariantResult.unscored("no answer was produced")
    events = list(events) if events is not None else signal_events(golden, universe)
    if not events:
        return InvariantResult.unscored("the question has no signal events to grade against")
    message = invariant_user_message(str(golden["input"]), events, answer)
    try:
        grades = await judge.complete_structured(message, InvariantGrades, system=INVARIANT_SYSTEM)
    except LLMError as exc:
        return InvariantResult.unscored("judge failed", error=str(exc))
    return score_grades(grades)


def invariant_verdict(result: InvariantResult) -> str | None:
    """yes when it passed, no when not, None when unscored: how a labelled-set check reads
    it (against `LabelItem.expected_invariant`, see `judge_labels.invariant_items`)."""
    if result.score is None:
        return None
    return "yes" if result.passed else "no"


def invariant_judge_batch(
    layer: LLMLayer | None,
    pairs: Sequence[tuple[Mapping[str, Any], str | None]],
    *,
    universe: Universe | None = None,
    concurrency: int = 4,
) -> list[InvariantResult]:
    """Grade many (golden, answer) pairs, in input order; all unscored without a layer."""
    if layer is None:
        return [InvariantResult.unscored("unscored: no judge") for _ in pairs]
    judge = layer.role("judge")
    if universe is None and not judge.is_offline:
        from eval_pipeline.tier2.load import load_universe

        universe = load_universe()

    async def run() -> list[InvariantResult]:
        gate = asyncio.Semaphore(concurrency)

        async def one(golden, answer):
            async with gate:
                return await invariant_judge(judge, golden, answer, universe=universe)

        return list(await asyncio.gather(*(one(g, a) for g, a in pairs)))

    return layer.run_sync(run())
