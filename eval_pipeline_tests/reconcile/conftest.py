"""Fixtures for the reconciliation tests: an LLM layer aimed at a local wire-format server,
and a real embedded ArcadeDB with a small fixture set injected by the graph stage's own code."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy, RoleConfig
from eval_pipeline_tests.wire_server import WireServer

from .fake_model import respond
from .graph_fixtures import write_fixtures

FAST_RETRY = RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01, jitter=False)


@pytest.fixture
def fake_model() -> Iterator[WireServer]:
    with WireServer(respond) as server:
        yield server


MakeLayer = Callable[..., LLMLayer]


@pytest.fixture
def make_llm(fake_model: WireServer, tmp_path: Path) -> Iterator[MakeLayer]:
    """make_llm(cache_path=None, **role_fields) → a layer whose reconciler role is the fake."""
    layers: list[LLMLayer] = []

    def factory(cache_path: Path | None = None, **fields: object) -> LLMLayer:
        role = {
            "provider": "openai_compatible",
            "model": "fake-memory-model",
            "base_url": fake_model.openai_base_url,
            "timeout_s": 10.0,
            "max_retries": 1,
            **fields,
        }
        layer = LLMLayer(
            LLMSettings(
                roles={"reconciler": RoleConfig(**role)},  # type: ignore[arg-type]
                cache_path=cache_path or tmp_path / "llm_cache.sqlite3",
                retry=FAST_RETRY,
            )
        )
        layers.append(layer)
        return layer

    yield factory
    for layer in layers:
        layer.close()


# ---- a real embedded ArcadeDB ------------------------------------------------------------

_databases = itertools.count()


@pytest.fixture(scope="session")
def reconcile_fixtures_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fixtures(tmp_path_factory.mktemp("reconcile_fixtures") / "fixtures.jsonl")


@pytest.fixture
def injected_store(graph_dir: Path, reconcile_fixtures_file: Path) -> Iterator[GraphStore]:
    """A fresh database on the shared server, with the fixture set injected, every session
    pending: each test writes its own graph."""
    store = GraphStore(
        data_dir=str(graph_dir), database=f"reconcile{next(_databases)}", heap="512m"
    )
    inject_fixtures(store, reconcile_fixtures_file)
    yield store
    store.close()
