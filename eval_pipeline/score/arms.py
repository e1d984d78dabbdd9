"""The reference arms, judged and summarised: where the system sits between floor and ceiling.

Each arm's answer (`retrieve.arms`, one `ArmAnswer` per arm and question in arms.jsonl) is
judged by the run's own answer judge and gated on the answer alone: evidence recall does not
apply to an arm (the floor has no context, the ceiling's is the evidence itself). The
built-in judge gives its `answer_judge` verdict under the run's verdict method
(`verdicts.judge_answer`, no model for `match`); a plug-in judge is asked as for the system
(`judge_question`, or its `judge_offline`) and its `answer_judge` metric decides.

An arm's question is unscored (covered null, answer_judge null, never 0) when the reader or
the judge failed for infrastructure reasons, or when no verdict was taken. Arms never change
the system's own rows, summary or pins.

Row field `arms`: {arm: {answer, covered, answer_judge, context_tokens, reason,
infra_failures}}. Summary (per tier) `arms`: {"arms": {arm: {coverage, coverage_by_type,
abstention_coverage, unscored, unscored_infrastructure}}, "position": {overall, by_type,
outside}}: answerable and abstention questions apart, as the system's coverage.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from eval_pipeline.retrieve.arms import ARMS, ArmAnswer
from eval_pipeline.score.gate import MetricResult, decide_coverage
from eval_pipeline.score.stats import bootstrap_ci
from eval_pipeline.score.verdicts import judge_answer

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer
    from eval_pipeline.score.answer_judge import AnswerJudge

NOT_JUDGED = "not judged: the arm's reader failed (infrastructure)"
NO_VERDICT = "unscored: the run's judge gave no answer verdict"
ANSWER_METRIC = "answer_judge"


async def _verdict(
    judge: AnswerJudge,
    role: Any,
    golden: Mapping[str, Any],
    answer: ArmAnswer,
) -> MetricResult:
    """The answer_judge verdict of the run's judge on one arm's answer."""
    abstention = bool(golden["additional_metadata"]["abstention"])
    verdict = getattr(judge, "verdict", None)
    if isinstance(verdict, str) and hasattr(judge, "judge_offline"):
        # The built-in: its verdict method alone, without the context metrics it adds.
        return await judge_answer(verdict, role, golden, answer.answer)
    if role is not None:
        metrics = await judge.judge_question(role, golden, answer.context, answer.answer)
    else:
        offline = getattr(judge, "judge_offline", None)
        if offline is None:
            return MetricResult.unscored(NO_VERDICT, gating=True)
        metrics = offline(golden, answer.answer, judge.unscored(abstention, NO_VERDICT))
    result = metrics.get(ANSWER_METRIC)
    return result if result is not None else MetricResult.unscored(NO_VERDICT, gating=True)


def judge_arms(
    judge: AnswerJudge,
    layer: LLMLayer | None,
    goldens: Mapping[str, Mapping[str, Any]],
    answers: Sequence[ArmAnswer],
    *,
    concurrency: int = 4,
    progress: Callable[[], None] | None = None,
) -> list[MetricResult]:
    """Each arm answer's answer_judge result, in input order. An answer whose reader failed
    for infrastructure reasons is not judged; `layer` None: the judge has no model.
    `progress()` after each answer."""
    role = layer.role("judge") if layer is not None else None

    async def run() -> list[MetricResult]:
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(a: ArmAnswer) -> MetricResult:
            if a.infra_failures:
                return MetricResult.unscored(NOT_JUDGED, gating=True)
            async with gate:
                result = await _verdict(judge, role, goldens[a.question_id], a)
            if progress is not None:
                progress()
            return result

        return list(await asyncio.gather(*(one(a) for a in answers)))

    return layer.run_sync(run()) if layer is not None else asyncio.run(run())


def arm_result(answer: ArmAnswer, result: MetricResult, abstention: bool) -> dict[str, Any]:
    """One arm's part of a question's row: covered by the answer gate alone."""
    infra = [f.model_dump() for f in answer.infra_failures]
    if result.error:
        infra.append({"stage": "judge", "cause": "judge", "error": result.error[:500]})
    covered, _ = decide_coverage({ANSWER_METRIC: result}, None, abstention=abstention)
    return {
        "answer": answer.answer,
        "covered": None if infra else covered,
        "answer_judge": None if infra else result.score,
        "context_tokens": answer.context_tokens,
        "reason": result.reason,
        "infra_failures": infra,
    }


def row_arms(
    rows: Sequence[Mapping[str, Any]],
    answers: Sequence[ArmAnswer],
    results: Sequence[MetricResult],
) -> list[dict[str, Any]]:
    """The rows with their `arms` field ({arm: result}, in `ARMS` order)."""
    by_question: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    abstains = {r["question_id"]: bool(r["abstention"]) for r in rows}
    for a, res in zip(answers, results, strict=True):
        if a.question_id in abstains:
            by_question[a.question_id][a.arm] = arm_result(a, res, abstains[a.question_id])
    out = []
    for r in rows:
        got = by_question.get(r["question_id"])
        arms = {arm: got[arm] for arm in ARMS if arm in got} if got else None
        out.append({**r, "arms": arms})
    return out


# --- summary -------------------------------------------------------------------------------


def _ci(outcomes: list[bool | None]) -> dict[str, Any] | None:
    est = bootstrap_ci(outcomes)
    return None if est is None else est.as_dict()


def _rate(est: Mapping[str, Any] | None) -> float | None:
    return None if est is None else est["rate"]


def _pct(value: float | None) -> str:
    return "unscored" if value is None else f"{100 * value:.1f}%"


def position(
    system: float | None,
    floor: float | None,
    ceiling: float | None,
    ran: Sequence[str] = ARMS,
) -> str:
    """Where the system's rate sits: 'system 33.3% between floor 5.0% and ceiling 70.0%',
    or 'below the floor' / 'above the ceiling'; an arm that did not run (`ran`) is left out."""
    text = f"system {_pct(system)}"
    low = f"floor {_pct(floor)}" if "floor" in ran else None
    high = f"ceiling {_pct(ceiling)}" if "ceiling" in ran else None
    if system is not None and floor is not None and low and system < floor:
        return f"{text} below the {low}" + (f" ({high})" if high else "")
    if system is not None and ceiling is not None and high and system > ceiling:
        return f"{text} above the {high}" + (f" ({low})" if low else "")
    if low and high:
        return f"{text} between {low} and {high}"
    return ", ".join(p for p in (text, low, high) if p)


def outside(system: float | None, floor: float | None, ceiling: float | None) -> bool:
    """True when the system is below the floor or above the ceiling (worth a line)."""
    if system is None:
        return False
    return (floor is not None and system < floor) or (ceiling is not None and system > ceiling)


def _arm_outcomes(rows: Sequence[Mapping[str, Any]], arm: str) -> list[bool | None]:
    return [((r.get("arms") or {}).get(arm) or {}).get("covered") for r in rows]


def arm_summary(rows: Sequence[Mapping[str, Any]], arm: str) -> dict[str, Any]:
    """One arm's coverage over a tier's rows: answerable (overall and per type) and
    abstention questions apart, and how many it left unscored."""
    answerable = [r for r in rows if not r["abstention"]]
    abstaining = [r for r in rows if r["abstention"]]
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in answerable:
        by_type[r["question_type"]].append(r)
    mine = [((r.get("arms") or {}).get(arm) or {}) for r in rows]
    return {
        "coverage": _ci(_arm_outcomes(answerable, arm)),
        "coverage_by_type": {t: _ci(_arm_outcomes(rs, arm)) for t, rs in sorted(by_type.items())},
        "abstention_coverage": _ci(_arm_outcomes(abstaining, arm)),
        "unscored": sum(1 for m in mine if m.get("covered") is None),
        "unscored_infrastructure": sum(1 for m in mine if m.get("infra_failures")),
    }


def tier_summary(
    rows: Sequence[Mapping[str, Any]], system: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A tier's arms and where the system sits between them (`system`: the tier's own
    summary, for its coverage, per type and of abstention questions). None without arms."""
    ran = [a for a in ARMS if any(a in (r.get("arms") or {}) for r in rows)]
    if not ran:
        return None
    arms = {a: arm_summary(rows, a) for a in ran}

    def rates(key: str, qtype: str | None = None) -> tuple[float | None, float | None]:
        def get(arm: str) -> float | None:
            if arm not in arms:
                return None
            s = arms[arm]
            return _rate(s[key] if qtype is None else s[key].get(qtype))

        return get("floor"), get("ceiling")

    overall = (_rate(system.get("coverage")), *rates("coverage"))
    by_type = {
        t: (_rate(est), *rates("coverage_by_type", t))
        for t, est in (system.get("coverage_by_type") or {}).items()
    }
    abstention = (
        _rate((system.get("abstention") or {}).get("coverage")),
        *rates("abstention_coverage"),
    )
    lines = [("answerable", overall), *by_type.items(), ("abstention", abstention)]
    return {
        "arms": arms,
        "position": {
            "overall": position(*overall, ran),
            "by_type": {t: position(*v, ran) for t, v in by_type.items()},
            "abstention": position(*abstention, ran),
            "outside": [f"{name}: {position(*v, ran)}" for name, v in lines if outside(*v)],
        },
    }


def markdown(tier_arms: Mapping[str, Any] | None) -> list[str]:
    """A tier's arms: the position line, a floor/ceiling coverage table and every line where
    the system sits outside them."""
    if not tier_arms:
        return []
    pos = tier_arms["position"]
    out = [f"reference arms: {pos['overall']}", ""]
    names = list(tier_arms["arms"])
    out.append("| question type | " + " | ".join(names) + " | where the system sits |")
    out.append("|---" * (len(names) + 2) + "|")
    for qtype, line in pos["by_type"].items():
        cells = [_pct(_rate(tier_arms["arms"][a]["coverage_by_type"].get(qtype))) for a in names]
        out.append(f"| {qtype} | " + " | ".join(cells) + f" | {line} |")
    cells = [_pct(_rate(tier_arms["arms"][a]["abstention_coverage"])) for a in names]
    out.append("| abstention | " + " | ".join(cells) + f" | {pos['abstention']} |")
    out.append("")
    out.extend(f"note: {line}" for line in pos["outside"])
    if pos["outside"]:
        out.append("")
    return out
