"""Fixtures for the LLM layer tests: a local wire-format server, fake keys, a layer factory.

No SDK is mocked: the real `openai` and `anthropic` clients talk HTTP to the local server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.llm import LLMLayer, LLMSettings, RoleConfig
from eval_pipeline_tests.wire_server import WireServer

from .support import (
    ANTHROPIC_TEST_KEY,
    FAST_RETRY,
    GATEWAY_TEST_KEY,
    MODELS,
    OPENAI_TEST_KEY,
    base_url_for,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONFIDENT_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_TEST_KEY)
    monkeypatch.setenv("GATEWAY_KEY_FOR_TESTS", GATEWAY_TEST_KEY)


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


MakeLayer = Callable[..., LLMLayer]


@pytest.fixture
def make_layer(wire: WireServer, tmp_path: Path) -> Iterator[MakeLayer]:
    """make_layer(provider, role="judge", **role_fields) → an LLMLayer aimed at `wire`."""
    layers: list[LLMLayer] = []

    def factory(
        provider: str = "openai",
        *,
        role: str = "judge",
        cache_path: Path | None = None,
        settings: dict[str, Any] | None = None,
        **fields: Any,
    ) -> LLMLayer:
        role_fields: dict[str, Any] = {
            "provider": provider,
            "model": MODELS[provider],
            "base_url": base_url_for(provider, wire),
            "timeout_s": 5.0,
            "max_retries": 2,
        }
        role_fields.update(fields)
        layer = LLMLayer(
            LLMSettings(
                roles={role: RoleConfig(**role_fields)},
                cache_path=cache_path or tmp_path / "llm_cache.sqlite3",
                retry=FAST_RETRY,
                **(settings or {}),
            )
        )
        layers.append(layer)
        return layer

    yield factory
    for layer in layers:
        layer.close()
