"""Structured output with one repair, and the response cache (re-runs make no provider call)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from eval_pipeline.llm import LLMCallFailed, LLMLayer, StructuredOutputInvalid
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

from .conftest import MakeLayer

BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])
GOOD = '{"verdict": "yes", "reason": "the session says so"}'


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]
    reason: str


def call(layer: LLMLayer, *args: Any, role: str = "judge", **kwargs: Any) -> Any:
    async def go() -> Any:
        async with layer:
            return await layer.role(role).complete(*args, **kwargs)

    return asyncio.run(go())


@BOTH
def test_valid_structured_output_is_parsed(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(text=GOOD))
    layer = make_layer(provider)
    completion = call(layer, "Was the answer right?", schema=Verdict)
    assert completion.parsed == Verdict(verdict="yes", reason="the session says so")

    body = wire.requests[0].body or {}
    if provider == "openai":
        # Native JSON-schema mode for OpenAI, plus the schema in the prompt.
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "Verdict"
        assert '"verdict"' in body["messages"][0]["content"]
    else:
        # Anthropic defaults to the portable prompt mode: schema in `system`, no output_config.
        assert "output_config" not in body
        assert '"verdict"' in body["system"]


def test_anthropic_json_schema_mode_sends_output_config(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(text=GOOD))
    layer = make_layer("anthropic", structured_output="json_schema")
    call(layer, "Was the answer right?", schema=Verdict)
    output_config = (wire.requests[0].body or {})["output_config"]
    assert output_config["format"]["type"] == "json_schema"
    assert output_config["format"]["schema"]["title"] == "Verdict"


@BOTH
def test_invalid_output_is_repaired_once(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(
        ScriptedReply(text='{"verdict": "maybe", "reason": 3'),  # malformed JSON, bad enum
        ScriptedReply(text=f"```json\n{GOOD}\n```"),  # fenced, but valid
    )
    layer = make_layer(provider)
    completion = call(layer, "Was the answer right?", schema=Verdict)
    assert completion.parsed.verdict == "yes"
    assert completion.requests == 2
    role = layer.snapshot().roles["judge"]
    assert (role.repairs, role.failures, role.provider_requests) == (1, 0, 2)

    repair = wire.requests[1].messages
    assert repair[-2] == {"role": "assistant", "content": '{"verdict": "maybe", "reason": 3'}
    assert "did not validate" in repair[-1]["content"]


@BOTH
def test_invalid_twice_is_a_recorded_failure(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(text="I think yes."), ScriptedReply(text='{"verdict": "perhaps"}'))
    layer = make_layer(provider)
    with pytest.raises(StructuredOutputInvalid) as info:
        call(layer, "Was the answer right?", schema=Verdict)
    assert isinstance(info.value, LLMCallFailed)  # one except clause catches every failure
    assert info.value.kind == "invalid_output" and info.value.attempts == 2
    assert "Verdict" in str(info.value) and "verdict" in str(info.value)
    role = layer.snapshot().roles["judge"]
    assert (role.failures_by_kind, role.repairs) == ({"invalid_output": 1}, 1)
    assert wire.request_count == 2
    # A failure is not cached: the next identical call asks again.
    wire.enqueue(ScriptedReply(text=GOOD))
    assert call(layer, "Was the answer right?", schema=Verdict).parsed.verdict == "yes"
    assert wire.request_count == 3


@BOTH
def test_second_identical_call_is_a_cache_hit(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(text=GOOD, input_tokens=40, output_tokens=9))
    layer = make_layer(provider)
    first = call(layer, "Was the answer right?", schema=Verdict)
    second = call(layer, "Was the answer right?", schema=Verdict)
    assert wire.request_count == 1
    assert second.cached and not first.cached
    assert (second.text, second.parsed) == (first.text, first.parsed)
    role = layer.snapshot().roles["judge"]
    assert (role.calls, role.cache_hits, role.provider_requests) == (2, 1, 1)
    assert role.input_tokens == 40  # a hit spends nothing


def test_a_rerun_in_a_new_layer_makes_no_provider_call(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    cache_path = tmp_path / "shared.sqlite3"
    wire.responder = lambda request: ScriptedReply(text=f"answer to {request.last_user_text}")
    prompts = [f"question {i}" for i in range(5)]

    def run_batch() -> list[str]:
        layer = make_layer("openai", cache_path=cache_path)

        async def go() -> list[str]:
            async with layer:
                judge = layer.role("judge")
                return await asyncio.gather(*(judge.complete_text(p) for p in prompts))

        return asyncio.run(go())

    first = run_batch()
    assert wire.request_count == 5
    again = run_batch()
    assert again == first
    assert wire.request_count == 5


def test_the_repaired_answer_is_what_gets_cached(make_layer: MakeLayer, wire: WireServer) -> None:
    wire.enqueue(ScriptedReply(text="nope"), ScriptedReply(text=GOOD))
    layer = make_layer("openai")
    first = call(layer, "q", schema=Verdict)
    second = call(layer, "q", schema=Verdict)
    assert second.cached and second.parsed == first.parsed
    assert wire.request_count == 2


@pytest.mark.parametrize(
    ("change", "value"),
    [("max_tokens", 99), ("model", "gpt-4.1-mini"), ("temperature", 0.7)],
)
def test_answer_deciding_parameters_change_the_key(
    change: str, value: Any, make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    cache_path = tmp_path / "k.sqlite3"
    call(make_layer("openai", cache_path=cache_path), "same prompt")
    call(make_layer("openai", cache_path=cache_path, **{change: value}), "same prompt")
    assert wire.request_count == 2


def test_operational_knobs_do_not_change_the_key(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    cache_path = tmp_path / "k.sqlite3"
    call(make_layer("openai", cache_path=cache_path), "same prompt")
    call(
        make_layer("openai", cache_path=cache_path, timeout_s=9, max_retries=0, concurrency=2),
        "same prompt",
    )
    assert wire.request_count == 1


def test_schema_and_messages_change_the_key(make_layer: MakeLayer, wire: WireServer) -> None:
    wire.responder = lambda request: ScriptedReply(text=GOOD)
    layer = make_layer("openai")
    call(layer, "same prompt")
    call(layer, "same prompt", schema=Verdict)
    call(layer, "same prompt", system="different system")
    assert wire.request_count == 3


def test_cache_can_be_switched_off_per_role(make_layer: MakeLayer, wire: WireServer) -> None:
    layer = make_layer("openai", cache=False)
    call(layer, "q")
    call(layer, "q")
    assert wire.request_count == 2
    assert layer.snapshot().roles["judge"].cache_hits == 0
    assert not layer.settings.cache_path.exists()  # never opened


def test_cache_is_sqlite_in_wal_mode(make_layer: MakeLayer, tmp_path: Path) -> None:
    import sqlite3

    layer = make_layer("openai")
    call(layer, "q")
    with sqlite3.connect(layer.settings.cache_path) as conn:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        (body,) = conn.execute("SELECT body FROM responses").fetchone()
    assert mode == "wal"
    assert json.loads(body)["text"] == "ok"
