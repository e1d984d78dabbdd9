"""Constants and helpers shared by the LLM layer tests."""

from __future__ import annotations

from eval_pipeline.llm import RetryPolicy
from eval_pipeline_tests.wire_server import WireServer

# Distinctive values so a leak is easy to find with a substring search.
OPENAI_TEST_KEY = "sk-test-openai-LEAKCANARY-0123456789"
ANTHROPIC_TEST_KEY = "sk-ant-test-LEAKCANARY-9876543210"
GATEWAY_TEST_KEY = "gw-LEAKCANARY-gateway-key-55555"
ALL_TEST_KEYS = (OPENAI_TEST_KEY, ANTHROPIC_TEST_KEY, GATEWAY_TEST_KEY)

# Tiny backoff keeps retry tests in milliseconds.
FAST_RETRY = RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01, jitter=True)


def base_url_for(provider: str, server: WireServer) -> str:
    return server.anthropic_base_url if provider == "anthropic" else server.openai_base_url


MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-haiku-4-5",
    "openai_compatible": "llama3:8b",
}
