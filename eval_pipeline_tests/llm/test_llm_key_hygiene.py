"""End to end: the API key reaches the server and nothing else (logs, errors, cache, metadata)."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from pathlib import Path

import pytest
from pydantic import BaseModel

from eval_pipeline.llm import LLMCallFailed
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

from .conftest import MakeLayer
from .support import ANTHROPIC_TEST_KEY, OPENAI_TEST_KEY


class Answer(BaseModel):
    answer: str


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_key_never_leaves_the_request_headers(
    provider: str,
    make_layer: MakeLayer,
    wire: WireServer,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    key = {"openai": OPENAI_TEST_KEY, "anthropic": ANTHROPIC_TEST_KEY}[provider]
    caplog.set_level(logging.DEBUG)  # SDK and HTTP-client debug logs included
    wire.enqueue(
        # A server (or proxy) that echoes the key in its error, as real APIs partly do.
        ScriptedReply(status=401, text=f"Incorrect API key provided: {key}"),
        ScriptedReply(text='{"answer": "42"}'),
        *[ScriptedReply(status=500, text=f"upstream failed for key {key}")] * 3,
    )
    layer = make_layer(provider, max_retries=2)
    errors: list[LLMCallFailed] = []

    async def go() -> None:
        async with layer:
            judge = layer.role("judge")
            for prompt, schema in (("first", None), ("second", Answer), ("third", None)):
                try:
                    await judge.complete(prompt, schema=schema)
                except LLMCallFailed as exc:
                    errors.append(exc)
                    logging.getLogger("caller").error("call failed", exc_info=exc)

    asyncio.run(go())
    assert [e.kind for e in errors] == ["client_error", "server_error"]
    # The test means something only if the key really was sent.
    assert any(key in " ".join(r.headers.values()) for r in wire.requests)

    cache_files = [p for p in tmp_path.iterdir() if p.name.startswith("llm_cache.sqlite3")]
    assert cache_files and layer.cache is not None and len(layer.cache) == 1
    snapshot = layer.snapshot()
    texts = {
        "logs": caplog.text,
        "log messages": "\n".join(r.getMessage() for r in caplog.records),
        "errors": "\n".join(str(e) + repr(e) for e in errors),
        "tracebacks": "\n".join("".join(traceback.format_exception(e)) for e in errors),
        "reprs": repr(layer) + repr(layer.role("judge")) + repr(layer.settings),
        "snapshot": snapshot.model_dump_json(),
        "metadata": json.dumps(snapshot.to_metadata()),
        "pins": json.dumps(layer.pins()),
    }
    for path in cache_files:
        texts[f"file {path.name}"] = path.read_bytes().decode("latin-1")
    for where, text in texts.items():
        assert key not in text, f"key leaked into {where}"
    assert "[REDACTED]" in texts["errors"]  # the echo was there, and was blanked
