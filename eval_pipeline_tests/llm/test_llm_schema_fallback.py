"""Servers that refuse a structured-output mode, in the wire format (scripted 400s), and the
`local` provider's settings: what is sent, what is counted, what a cached re-run costs.

The same fallback against the real llama.cpp server is in eval_pipeline_tests/real_model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from eval_pipeline.llm import LLMCallFailed, LLMConfigError, LLMSettings, StructuredOutputInvalid
from eval_pipeline.llm.structured import wire_schema
from eval_pipeline_tests.wire_server import ScriptedReply

GRAMMAR_400 = ScriptedReply(status=400, text="failed to parse grammar")
GOOD = json.dumps({"verdict": "yes", "reason": "the answer names the right city"})


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]
    reason: str = Field(default="", max_length=40)


def ask(layer, prompt: str = "Is Paris the capital of France?"):
    async def go():
        async with layer:
            return await layer.role("judge").complete(prompt, schema=Verdict)

    return asyncio.run(go())


def usage(layer):
    return layer.snapshot().roles["judge"]


def test_the_schema_sent_has_no_length_limits_but_parsing_enforces_them(make_layer, wire):
    sent = wire_schema(Verdict)
    assert "maxLength" not in json.dumps(sent)
    assert sent["properties"]["reason"]["type"] == "string"
    too_long = json.dumps({"verdict": "yes", "reason": "x" * 41})
    wire.enqueue(ScriptedReply(text=too_long), ScriptedReply(text=GOOD.replace("the answer ", "")))
    layer = make_layer("openai_compatible", cache=False)
    completion = ask(layer)
    assert completion.parsed.reason == "names the right city"
    body = wire.requests[0].body
    assert "maxLength" not in json.dumps(body)  # neither in response_format nor in the prompt
    assert body["response_format"]["type"] == "json_schema"
    assert usage(layer).repairs == 1 and usage(layer).fallbacks == 0


def test_a_400_to_the_schema_falls_back_to_json_mode_then_to_the_prompt(make_layer, wire):
    wire.enqueue(GRAMMAR_400, GRAMMAR_400, ScriptedReply(text=GOOD))
    layer = make_layer("openai_compatible", cache=False)
    completion = ask(layer)
    assert completion.parsed.verdict == "yes" and completion.requests == 1
    formats = [(r.body or {}).get("response_format") for r in wire.requests]
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", None]
    u = usage(layer)
    assert u.fallbacks == 2 and u.failures == 0 and u.provider_requests == 3
    # The refusals are remembered: the next call starts in the mode that worked.
    wire.enqueue(ScriptedReply(text=GOOD))
    ask(layer, "Is Rome the capital of Italy?")
    assert (wire.requests[-1].body or {}).get("response_format") is None
    assert usage(layer).provider_requests == 4


def test_each_mode_gets_one_repair_and_a_bad_reply_after_it_fails_the_call(make_layer, wire):
    wire.enqueue(
        GRAMMAR_400,  # json_schema refused
        ScriptedReply(text="{not json"),  # json_object: bad reply ...
        ScriptedReply(text='{"verdict": "maybe"}'),  # ... and its one repair: bad too
    )
    layer = make_layer("openai_compatible", cache=False)
    with pytest.raises(StructuredOutputInvalid) as raised:
        ask(layer)
    assert raised.value.kind == "invalid_output"
    u = usage(layer)
    assert (u.fallbacks, u.repairs, u.failures, u.provider_requests) == (1, 1, 1, 3)
    assert u.failures_by_kind == {"invalid_output": 1}


def test_a_400_that_is_not_about_the_schema_still_fails_after_the_last_mode(make_layer, wire):
    wire.enqueue(GRAMMAR_400, GRAMMAR_400, ScriptedReply(status=400, text="context too long"))
    layer = make_layer("openai_compatible", cache=False, max_retries=0)
    with pytest.raises(LLMCallFailed) as raised:
        ask(layer)
    assert raised.value.kind == "client_error"
    assert usage(layer).provider_requests == 3


def test_a_cut_reply_is_repaired_with_a_shorter_ask(make_layer, wire):
    cut = ScriptedReply(
        body={
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "llama3:8b",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": '{"verdict": "yes", "reason": "ab'},
                    "finish_reason": "length",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 16, "total_tokens": 36},
        }
    )
    wire.enqueue(cut, ScriptedReply(text=GOOD))
    layer = make_layer("openai_compatible", cache=False)
    assert ask(layer).parsed.verdict == "yes"
    repair = wire.requests[1].last_user_text
    assert "cut off at the length limit" in repair
    # Usage is the server's own figures, summed over the call's requests.
    assert usage(layer).input_tokens == 20 + 11 and usage(layer).output_tokens == 16 + 7


def test_an_unpriced_model_replayed_from_the_cache_costs_null_not_zero(make_layer, wire, tmp_path):
    cache = tmp_path / "shared.sqlite3"
    wire.enqueue(ScriptedReply(text=GOOD))
    first = make_layer("openai_compatible", cache_path=cache)
    ask(first)
    assert usage(first).cost_usd is None  # unpriced: unknown, even when requests were made
    again = make_layer("openai_compatible", cache_path=cache)
    completion = ask(again)
    assert completion.cached and wire.request_count == 1
    u = usage(again)
    assert u.calls == 1 and u.cache_hits == 1 and u.provider_requests == 0
    assert u.cost_usd is None


def test_a_priced_model_replayed_from_the_cache_costs_zero(make_layer, wire, tmp_path):
    cache = tmp_path / "shared.sqlite3"
    wire.enqueue(ScriptedReply(text=GOOD))
    ask(make_layer("openai", cache_path=cache))
    again = make_layer("openai", cache_path=cache)
    ask(again)
    assert usage(again).provider_requests == 0 and usage(again).cost_usd == 0.0


def test_local_roles_get_cpu_sized_defaults_and_user_settings_win():
    settings = LLMSettings.from_specs(
        {"judge": "local", "reader": "local:smollm2-135m-instruct", "reconciler": "local"},
        role_overrides={
            "judge": {"timeout_s": 300, "concurrency": 2, "structured_output": "json_object"}
        },
    )
    judge, reader, reconciler = (settings.role(r) for r in ("judge", "reader", "reconciler"))
    assert (judge.timeout_s, judge.concurrency, judge.max_tokens) == (300, 2, 512)
    assert judge.structured_output_mode == "json_object"
    assert (reader.timeout_s, reader.concurrency, reader.max_tokens) == (600, 1, 256)
    assert reconciler.max_tokens == 1024 and reconciler.temperature == 0.0
    remote = LLMSettings.from_specs({"judge": "openai:gpt-4o-mini"}).role("judge")
    assert (remote.timeout_s, remote.concurrency, remote.max_tokens) == (60, 8, 1024)


def test_local_specs_are_checked_without_touching_the_weights():
    with pytest.raises(LLMConfigError, match="unknown local model 'nope'"):
        LLMSettings.from_specs({"judge": "local:nope"})
    with pytest.raises(LLMConfigError, match="give no URL"):
        LLMSettings.from_specs({"judge": "local:m@http://127.0.0.1:8080/v1"})
    config = LLMSettings.from_specs({"judge": "local:/models/any.gguf"}).role("judge")
    assert config.spec == "local:/models/any.gguf" and config.endpoint is None
