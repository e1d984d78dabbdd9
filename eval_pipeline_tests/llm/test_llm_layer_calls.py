"""Calls through the real SDKs against the local wire-format server: success, retries, failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from eval_pipeline.llm import LLMCallFailed, LLMLayer, OfflineRoleError
from eval_pipeline_tests.wire_server import ANTHROPIC_PATH, OPENAI_PATH, ScriptedReply, WireServer

from .conftest import MakeLayer
from .support import ANTHROPIC_TEST_KEY, GATEWAY_TEST_KEY, OPENAI_TEST_KEY

BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def call(layer: LLMLayer, *args: Any, role: str = "judge", **kwargs: Any) -> Any:
    async def go() -> Any:
        async with layer:  # closes this loop's SDK clients
            return await layer.role(role).complete(*args, **kwargs)

    return asyncio.run(go())


def usage(layer: LLMLayer, role: str = "judge") -> Any:
    return layer.snapshot().roles[role]


@BOTH
def test_success_reports_text_tokens_and_cost(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(text="hello there", input_tokens=1000, output_tokens=500))
    layer = make_layer(provider)
    completion = call(layer, "Say hello.", system="Be brief.")

    assert completion.text == "hello there"
    assert not completion.cached
    assert (completion.input_tokens, completion.output_tokens) == (1000, 500)
    role = usage(layer)
    assert (role.calls, role.provider_requests, role.failures) == (1, 1, 0)
    assert (role.input_tokens, role.output_tokens) == (1000, 500)
    # gpt-4o-mini: $0.15 / $0.60 per Mtok; claude-haiku-4-5: $1 / $5 per Mtok.
    expected = {"openai": 0.00015 + 0.0003, "anthropic": 0.001 + 0.0025}[provider]
    assert role.cost_usd == pytest.approx(expected)
    assert role.latency.count == 1

    (request,) = wire.requests
    body = request.body or {}
    if provider == "openai":
        assert request.path == OPENAI_PATH
        assert request.headers["authorization"] == f"Bearer {OPENAI_TEST_KEY}"
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert body["max_completion_tokens"] == 1024 and body["temperature"] == 0.0
    else:
        assert request.path == ANTHROPIC_PATH
        sent_key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        assert ANTHROPIC_TEST_KEY in sent_key
        assert body["system"] == "Be brief."
        assert body["messages"] == [{"role": "user", "content": "Say hello."}]
        assert "temperature" not in body  # the current Anthropic API rejects it


@BOTH
def test_rate_limit_then_success_is_retried(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(
        ScriptedReply(status=429, text="slow down", headers={"retry-after": "0"}),
        ScriptedReply(text="fine"),
    )
    layer = make_layer(provider)
    assert call(layer, "hi").text == "fine"
    role = usage(layer)
    assert (role.provider_requests, role.retries, role.failures) == (2, 1, 0)
    assert wire.request_count == 2


@BOTH
@pytest.mark.parametrize("status", [500, 503, 529])
def test_server_errors_exhaust_retries_and_are_counted(
    provider: str, status: int, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(*[ScriptedReply(status=status, text="boom")] * 3)
    layer = make_layer(provider, max_retries=2)
    with pytest.raises(LLMCallFailed) as info:
        call(layer, "hi")
    assert (info.value.kind, info.value.attempts, info.value.role) == ("server_error", 3, "judge")
    assert f"HTTP {status}" in str(info.value)
    assert info.value.__cause__ is None  # SDK exceptions are not chained (they may echo keys)
    role = usage(layer)
    assert (role.failures, role.failures_by_kind, role.retries) == (1, {"server_error": 1}, 2)
    assert wire.request_count == 3


@BOTH
def test_client_errors_are_not_retried(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(status=400, text="bad request"))
    layer = make_layer(provider)
    with pytest.raises(LLMCallFailed) as info:
        call(layer, "hi")
    assert (info.value.kind, info.value.attempts) == ("client_error", 1)
    assert wire.request_count == 1


@BOTH
def test_timeout_is_retried_then_recorded(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    # The server sleeps far longer than the per-call timeout.
    wire.enqueue(ScriptedReply(delay_s=2.0), ScriptedReply(delay_s=2.0))
    layer = make_layer(provider, timeout_s=0.2, max_retries=1)
    started = time.perf_counter()
    with pytest.raises(LLMCallFailed) as info:
        call(layer, "hi")
    assert time.perf_counter() - started < 1.5
    assert (info.value.kind, info.value.attempts) == ("timeout", 2)
    assert usage(layer).failures_by_kind == {"timeout": 1}


def test_timeout_then_success(make_layer: MakeLayer, wire: WireServer) -> None:
    wire.enqueue(ScriptedReply(delay_s=2.0), ScriptedReply(text="second try"))
    layer = make_layer("openai", timeout_s=0.2, max_retries=1)
    assert call(layer, "hi").text == "second try"
    assert usage(layer).retries == 1


@BOTH
def test_malformed_response_body_is_retried(
    provider: str, make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(ScriptedReply(raw=b'{"id": "cut off'), ScriptedReply(text="whole"))
    layer = make_layer(provider)
    assert call(layer, "hi").text == "whole"
    assert usage(layer).retries == 1


def test_malformed_body_every_time_is_a_recorded_failure(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    wire.enqueue(*[ScriptedReply(raw=b"<html>bad gateway</html>")] * 2)
    layer = make_layer("openai", max_retries=1)
    with pytest.raises(LLMCallFailed) as info:
        call(layer, "hi")
    assert info.value.kind == "bad_response"
    assert usage(layer).failures_by_kind == {"bad_response": 1}


def test_openai_compatible_sends_max_tokens_and_the_named_key(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    layer = make_layer("openai_compatible", api_key_env="GATEWAY_KEY_FOR_TESTS", max_tokens=77)
    call(layer, "hi")
    (request,) = wire.requests
    assert request.headers["authorization"] == f"Bearer {GATEWAY_TEST_KEY}"
    assert (request.body or {})["max_tokens"] == 77
    assert (request.body or {})["model"] == "llama3:8b"


def test_openai_compatible_needs_no_key(
    make_layer: MakeLayer, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    layer = make_layer("openai_compatible")
    assert call(layer, "hi").text == "ok"


def test_unpriced_model_has_unknown_cost_not_zero(make_layer: MakeLayer) -> None:
    layer = make_layer("openai_compatible")
    call(layer, "hi")
    snapshot = layer.snapshot()
    assert snapshot.roles["judge"].cost_usd is None
    assert snapshot.total_cost_usd is None
    assert snapshot.roles["reader"].cost_usd == 0.0  # offline, nothing sent


def test_price_override_prices_a_local_model(make_layer: MakeLayer, wire: WireServer) -> None:
    wire.enqueue(ScriptedReply(input_tokens=2_000_000, output_tokens=1_000_000))
    layer = make_layer("openai_compatible", input_usd_per_mtok=0.5, output_usd_per_mtok=1.5)
    call(layer, "hi")
    assert layer.snapshot().total_cost_usd == pytest.approx(2.5)


def test_missing_usage_makes_cost_unknown(make_layer: MakeLayer, wire: WireServer) -> None:
    wire.enqueue(ScriptedReply(input_tokens=None, output_tokens=None))
    layer = make_layer("openai")
    completion = call(layer, "hi")
    assert completion.input_tokens is None
    role = usage(layer)
    assert (role.requests_without_usage, role.cost_usd) == (1, None)


def test_offline_role_refuses_to_answer(wire: WireServer) -> None:
    layer = LLMLayer()
    judge = layer.role("judge")
    assert judge.is_offline
    with pytest.raises(OfflineRoleError, match="unscored"):
        asyncio.run(judge.complete("Is this right?"))
    assert wire.request_count == 0
    assert layer.snapshot().roles["judge"].calls == 0


def test_concurrency_limit_per_role_is_respected(make_layer: MakeLayer, wire: WireServer) -> None:
    wire.responder = lambda request: ScriptedReply(text=request.last_user_text, delay_s=0.05)
    layer = make_layer("openai", concurrency=3, cache=False)

    async def many() -> list[str]:
        async with layer:
            judge = layer.role("judge")
            return await asyncio.gather(*(judge.complete_text(f"q{i}") for i in range(12)))

    answers = asyncio.run(many())
    assert answers == [f"q{i}" for i in range(12)]
    assert wire.max_in_flight == 3


def test_provider_limit_is_shared_by_roles(wire: WireServer, tmp_path: Any) -> None:
    from eval_pipeline.llm import LLMSettings, RoleConfig

    from .support import FAST_RETRY

    role = RoleConfig(
        provider="openai",
        model="gpt-4o-mini",
        base_url=wire.openai_base_url,
        concurrency=4,
        cache=False,
    )
    layer = LLMLayer(
        LLMSettings(
            roles={"judge": role, "reader": role},
            cache_path=tmp_path / "c.sqlite3",
            retry=FAST_RETRY,
            provider_concurrency={"openai": 2},
        )
    )
    wire.responder = lambda request: ScriptedReply(delay_s=0.05)

    async def many() -> None:
        async with layer:
            calls = [
                layer.role(r).complete(f"{r}{i}") for r in ("judge", "reader") for i in range(6)
            ]
            await asyncio.gather(*calls)

    asyncio.run(many())
    assert wire.max_in_flight == 2
    assert wire.request_count == 12


def test_sync_api_works_inside_and_outside_an_event_loop(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    layer = make_layer("openai", cache=False)
    judge = layer.role("judge")
    assert judge.complete_sync("outside").text == "ok"

    async def inside() -> str:
        return judge.complete_sync("inside").text  # a loop is running in this thread

    assert asyncio.run(inside()) == "ok"
    assert wire.request_count == 2


def test_sync_calls_from_many_threads_share_the_role_limit(
    make_layer: MakeLayer, wire: WireServer
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    wire.responder = lambda request: ScriptedReply(text=request.last_user_text, delay_s=0.05)
    layer = make_layer("openai", concurrency=2, cache=False)
    judge = layer.role("judge")
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda i: judge.complete_sync(f"t{i}").text, range(8)))
    assert answers == [f"t{i}" for i in range(8)]
    assert wire.max_in_flight == 2
    layer.close()
    layer.close()  # idempotent
