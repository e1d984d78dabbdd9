"""deepeval metrics judged through the layer: cached, counted, and never made up when offline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from eval_pipeline.llm import LLMLayer, OfflineRoleError
from eval_pipeline.llm.deepeval_adapter import LayerDeepEvalModel
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

from .conftest import MakeLayer


class Verdict(BaseModel):
    verdict: str


def contextual_recall_judge(request: RecordedRequest) -> ScriptedReply:
    """Answers deepeval's ContextualRecall prompts by the schema it asks for."""
    name = (request.body or {}).get("response_format", {}).get("json_schema", {}).get("name")
    if name == "Verdicts":
        return ScriptedReply(
            text='{"verdicts": [{"verdict": "yes", "reason": "in node 1"},'
            ' {"verdict": "no", "reason": "nowhere"}]}'
        )
    if name == "ContextualRecallScoreReason":
        return ScriptedReply(text='{"reason": "half of the expected output is supported"}')
    return ScriptedReply(status=400, text=f"unexpected schema {name}")


def test_adapter_generates_through_the_layer_with_a_schema(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(text='{"verdict": "yes"}'))
    layer = make_layer("openai")
    model = LayerDeepEvalModel(layer.role("judge"))

    async def go() -> tuple[Any, Any]:
        async with layer:
            first = await model.a_generate("Is it?", schema=Verdict)
            second = await model.a_generate("Is it?", schema=Verdict)
            return first, second

    first, second = asyncio.run(go())
    assert first == second == Verdict(verdict="yes")
    assert wire.request_count == 1  # the second came from the cache
    assert model.get_model_name().startswith("openai:gpt-4o-mini")
    assert model.generate("plain text please") == "ok"  # sync path, no schema → text


def test_a_real_deepeval_metric_is_judged_through_the_layer(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    from deepeval.metrics import ContextualRecallMetric
    from deepeval.test_case import LLMTestCase

    wire.responder = contextual_recall_judge
    layer = make_layer("openai")
    case = LLMTestCase(
        input="Where did I park?",
        actual_output="Level 3.",
        expected_output="You parked on level 3. It was a Tuesday.",
        retrieval_context=["User: I parked on level 3 today."],
    )

    def measure() -> ContextualRecallMetric:
        metric = ContextualRecallMetric(
            model=LayerDeepEvalModel(layer.role("judge")), async_mode=True, eval_mode="llm"
        )

        async def go() -> None:
            async with layer:
                await metric.a_measure(case, _show_indicator=False)

        asyncio.run(go())
        return metric

    metric = measure()
    assert metric.error is None
    assert metric.score == pytest.approx(0.5)
    assert metric.reason == "half of the expected output is supported"
    assert wire.request_count == 2
    judge = layer.snapshot().roles["judge"]
    assert (judge.calls, judge.provider_requests, judge.cache_hits) == (2, 2, 0)

    again = measure()  # a re-run: same inputs, answers from the cache
    assert again.score == metric.score and again.reason == metric.reason
    assert wire.request_count == 2
    assert layer.snapshot().roles["judge"].cache_hits == 2


def test_adapter_refuses_an_offline_judge() -> None:
    with pytest.raises(OfflineRoleError, match="unscored"):
        LayerDeepEvalModel(LLMLayer().role("judge"))
