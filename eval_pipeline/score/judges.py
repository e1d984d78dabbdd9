"""Judged metrics: the LongMemEval judge protocol, deepeval contextual recall, a GEval rubric.

The judge protocol is LongMemEval's (a per-type instruction, a separate instruction for
abstention questions, a yes/no verdict), written here in our own words; its prompt hash is a
pin, so runs judged with different wording are never compared. deepeval's metrics run on our
LLM layer through `LayerDeepEvalModel`, so their calls are cached and counted as well.

Every failure (provider outage, invalid output after repair, a deepeval error) becomes an
unscored MetricResult carrying the error: a judge outage is never a score of 0.

`LongMemEvalJudge` is all of this as the built-in answer judge `longmemeval` of the plug-in
registry (`score.answer_judge`: the interface another judge implements, and `load_judge`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from eval_pipeline.llm import (
    LLMLayer,
    RoleClient,
    ensure_no_confident_upload,
    import_deepeval,
)
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.judge_prompt import (  # noqa: F401 - the judge's public names
    ABSTENTION_RULE,
    ANSWER_COVERAGE_THRESHOLD,
    CONTEXTUAL_RECALL_THRESHOLD,
    GEVAL_CRITERIA,
    JUDGE_PROMPT_VERSION,
    REASONED_SUFFIX,
    SUBJECTS,
    TYPE_RULES,
    JudgeVerdict,
    ReasonedVerdict,
    judge_instruction,
    longmemeval_judge,
    prompt_hash,
    reasoned_judge,
    reasoned_prompt_hash,
)
from eval_pipeline.score.verdicts import REFERENCE_METHOD, judge_answer, method
from eval_pipeline.score.verdicts import method_hash as verdict_method_hash

if TYPE_CHECKING:
    from eval_pipeline.score.answer_judge import AnswerJudge


def _deepeval():
    """deepeval, imported only after its environment is hardened (it reads it at import)."""
    import_deepeval()
    ensure_no_confident_upload()
    import deepeval.metrics
    import deepeval.test_case

    from eval_pipeline.llm.deepeval_adapter import LayerDeepEvalModel

    return deepeval.metrics, deepeval.test_case, LayerDeepEvalModel


def _deepeval_metrics(judge: RoleClient):
    metrics, test_case, LayerDeepEvalModel = _deepeval()
    ContextualRecallMetric, GEval = metrics.ContextualRecallMetric, metrics.GEval
    LLMTestCaseParams = test_case.SingleTurnParams
    model = LayerDeepEvalModel(judge)
    recall = ContextualRecallMetric(
        threshold=CONTEXTUAL_RECALL_THRESHOLD, model=model, include_reason=True, async_mode=True
    )
    coverage = GEval(
        name="answer_coverage",
        criteria=GEVAL_CRITERIA,
        evaluation_params=[
            LLMTestCaseParams.INPUT,
            LLMTestCaseParams.ACTUAL_OUTPUT,
            LLMTestCaseParams.EXPECTED_OUTPUT,
        ],
        threshold=ANSWER_COVERAGE_THRESHOLD,
        model=model,
        async_mode=True,
    )
    return recall, coverage


async def _measure(metric, test_case, *, gating: bool) -> MetricResult:
    try:
        await metric.a_measure(test_case, _show_indicator=False)
    except Exception as exc:  # noqa: BLE001 - deepeval wraps provider errors in its own types
        return MetricResult.unscored("judge failed", gating=gating, error=f"{exc}")
    if metric.error is not None or metric.score is None:
        return MetricResult.unscored("judge failed", gating=gating, error=str(metric.error))
    return MetricResult.judged(
        float(metric.score), metric.threshold, metric.reason or "", gating=gating
    )


async def judge_question(
    judge: RoleClient,
    golden: Mapping[str, Any],
    retrieval_context: list[str],
    answer: str | None,
    verdict: str = REFERENCE_METHOD,
) -> dict[str, MetricResult]:
    """All judged metrics of one question; only called when the judge role has a model.
    `verdict` is how the answer judge decides (`score.verdicts`)."""
    LLMTestCase = _deepeval()[1].LLMTestCase
    abstention = bool(golden["additional_metadata"]["abstention"])
    results: dict[str, MetricResult] = {
        "answer_judge": await judge_answer(verdict, judge, golden, answer)
    }
    recall, coverage = _deepeval_metrics(judge)
    case = LLMTestCase(
        input=golden["input"],
        actual_output=answer or "",
        expected_output=golden["expected_output"],
        retrieval_context=retrieval_context or [""],
    )
    if abstention:
        # Nothing in the haystack supports an abstention answer: recall has no meaning here.
        results["contextual_recall"] = MetricResult.unscored("abstention question")
    else:
        results["contextual_recall"] = await _measure(recall, case, gating=True)
    results["answer_coverage"] = await _measure(coverage, case, gating=False)
    return results


def judge_batch(
    layer: LLMLayer,
    pairs: list[tuple[Mapping[str, Any], list[str], str | None]],
    *,
    concurrency: int = 4,
    answer_judge: AnswerJudge | None = None,
    progress: Callable[[], None] | None = None,
) -> list[dict[str, MetricResult]]:
    """Judge many questions, in input order (never completion order), with `answer_judge`
    (`score.answer_judge.load_judge`; None: the built-in LongMemEval judge); `progress()`
    after each question."""
    judge = layer.role("judge")
    chosen = answer_judge if answer_judge is not None else LongMemEvalJudge()

    async def run() -> list[dict[str, MetricResult]]:
        gate = asyncio.Semaphore(concurrency)

        async def one(item):
            async with gate:
                result = await chosen.judge_question(judge, *item)
            if progress is not None:
                progress()
            return result

        return list(await asyncio.gather(*(one(p) for p in pairs)))

    return layer.run_sync(run())


def offline_judge_results(
    abstention: bool, reason: str = "unscored: no judge"
) -> dict[str, MetricResult]:
    """Judged metrics not taken (no judge configured, or nothing to judge): unscored, never 0,
    saying why."""
    out = {
        "answer_judge": MetricResult.unscored(reason, gating=False),
        "answer_coverage": MetricResult.unscored(reason),
    }
    if not abstention:
        out["contextual_recall"] = MetricResult.unscored(reason)
    return out


class LongMemEvalJudge:
    """The built-in answer judge `longmemeval`: LongMemEval's yes/no protocol (`answer_judge`),
    deepeval's contextual recall and the GEval answer coverage, all on the judge role."""

    plugin_kind = "judge"
    name = "longmemeval"

    def __init__(self, verdict: str = REFERENCE_METHOD) -> None:
        self.verdict = method(verdict).name  # an unknown method fails here, in one line

    async def judge_question(
        self,
        role: RoleClient,
        golden: Mapping[str, Any],
        retrieval_context: list[str],
        answer: str | None,
    ) -> dict[str, MetricResult]:
        return await judge_question(role, golden, retrieval_context, answer, self.verdict)

    def unscored(
        self, abstention: bool, reason: str = "unscored: no judge"
    ) -> dict[str, MetricResult]:
        return offline_judge_results(abstention, reason)

    @property
    def judge_offline(self):
        """With no judge model: a verdict method that needs none still judges the answer
        (the other metrics stay unscored); None when the method needs a model."""
        if method(self.verdict).needs_model:
            return None
        return self._judge_offline

    def _judge_offline(
        self, golden: Mapping[str, Any], answer: str | None, unscored: dict[str, MetricResult]
    ) -> dict[str, MetricResult]:
        if answer is None:  # nothing to judge: as with no judge at all (never gating)
            return unscored
        result = asyncio.run(judge_answer(self.verdict, None, golden, answer))
        return {**unscored, "answer_judge": result}

    def prompt_hash(self) -> str:
        """The answer verdict's hash (the reference method's is the LongMemEval prompt's)."""
        return verdict_method_hash(self.verdict)

    def pins(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": JUDGE_PROMPT_VERSION,
            "verdict": self.verdict,
            "prompt_hash": self.prompt_hash(),
            "reference_prompt_hash": prompt_hash(),
        }
