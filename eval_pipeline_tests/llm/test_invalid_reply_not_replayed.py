"""A reply that failed validation, repair or the caller's own check is never replayed from the
cache: a re-run in a new layer (what `eval-pipeline run` again, or `--resume`, does) asks the
server again and gets the good reply (issue 27)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from eval_pipeline.llm import LLMLayer, StructuredOutputInvalid
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

from .conftest import MakeLayer

GOOD = '{"verdict": "yes", "reason": "the session says so"}'


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]
    reason: str


def call(layer: LLMLayer, **kwargs: Any) -> Any:
    async def go() -> Any:
        async with layer:
            return await layer.role("judge").complete("Was the answer right?", **kwargs)

    return asyncio.run(go())


def test_garbage_then_a_good_reply_on_the_rerun(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    cache = tmp_path / "shared.sqlite3"
    # The first run: garbage, and garbage again to the repair.
    wire.enqueue(ScriptedReply(text="{not json"), ScriptedReply(text="still {not json"))
    with pytest.raises(StructuredOutputInvalid):
        call(make_layer("openai", cache_path=cache), schema=Verdict)
    assert wire.request_count == 2
    # The re-run, a new layer on the same cache file: asked again, not replayed.
    wire.enqueue(ScriptedReply(text=GOOD))
    again = call(make_layer("openai", cache_path=cache), schema=Verdict)
    assert wire.request_count == 3 and not again.cached
    assert again.parsed == Verdict(verdict="yes", reason="the session says so")
    # Only now is there something to replay.
    third = call(make_layer("openai", cache_path=cache), schema=Verdict)
    assert third.cached and wire.request_count == 3


def test_a_reply_the_caller_refuses_is_not_cached(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    cache = tmp_path / "shared.sqlite3"

    def accept(completion: Any) -> str | None:
        return None if completion.parsed.verdict == "yes" else "only yes will do here"

    wire.enqueue(ScriptedReply(text='{"verdict": "no", "reason": "x"}'))
    layer = make_layer("openai", cache_path=cache)
    with pytest.raises(StructuredOutputInvalid, match="only yes will do here"):
        call(layer, schema=Verdict, accept=accept)
    assert layer.snapshot().roles["judge"].failures_by_kind == {"invalid_output": 1}
    wire.enqueue(ScriptedReply(text=GOOD))
    again = call(make_layer("openai", cache_path=cache), schema=Verdict, accept=accept)
    assert not again.cached and again.parsed.verdict == "yes"
    assert wire.request_count == 2


def test_a_cached_reply_the_caller_now_refuses_is_asked_again(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    # Cached by a run without the check (an older cache file): the check refuses the replay.
    cache = tmp_path / "shared.sqlite3"
    wire.enqueue(ScriptedReply(text=""), ScriptedReply(text="a real summary"))
    assert call(make_layer("openai", cache_path=cache)).text == ""
    checked = call(
        make_layer("openai", cache_path=cache),
        accept=lambda c: None if c.text.strip() else "empty",
    )
    assert checked.text == "a real summary" and not checked.cached
    assert wire.request_count == 2
