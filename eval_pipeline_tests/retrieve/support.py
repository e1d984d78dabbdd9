"""Helpers shared by the retrieval tests: an LLM layer aimed at the local wire server."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy, RoleConfig
from eval_pipeline_tests.wire_server import WireServer

TEST_KEY = "sk-test-retrieval-0123456789"
FAST_RETRY = RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01, jitter=False)


def wire_layer(wire: WireServer, tmp_path: Path, *roles: str) -> LLMLayer:
    """An LLMLayer whose `roles` talk OpenAI's wire format to `wire` (no cache: scripts run
    in order, a cached reply would skip one)."""
    config = RoleConfig(
        provider="openai",
        model="gpt-4o-mini",
        base_url=wire.openai_base_url,
        timeout_s=5.0,
        max_retries=0,
        cache=False,
    )
    return LLMLayer(
        LLMSettings(
            roles={role: config for role in roles},
            cache_path=tmp_path / "llm_cache.sqlite3",
            retry=FAST_RETRY,
        )
    )
