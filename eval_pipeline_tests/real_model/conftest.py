"""A real model in the loop: one llama.cpp server for the session, a real embedded graph.

The model is `EVAL_TEST_LOCAL_MODEL` (a catalogue name or a .gguf path), by default the small
one `make install` fetches. Its server is started once (the first test that needs it) in the
session's state dir and stopped at the end of the session. Nothing here scripts a reply.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMConfigError, LLMLayer, LLMSettings, local_models, local_server
from eval_pipeline_tests.retrieve.fixture_graph import write_fixtures

MODEL_ENV = "EVAL_TEST_LOCAL_MODEL"
# The plumbing model: 98 MB, the whole module in about 5 min on 2 busy shared cores, and the
# server's grammar keeps it to the schema's shape. Its verdicts are noise
# (docs/local-models.md); `make test-real` runs this module with the 1.5B default instead.
DEFAULT_TEST_MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def local_model() -> local_models.LocalModel:
    spec = os.environ.get(MODEL_ENV) or DEFAULT_TEST_MODEL
    try:
        local_server.check_installed()
        return local_models.resolve(spec)
    except LLMConfigError as exc:
        pytest.fail(f"real-model tests: {exc} (make install builds and fetches both)")


@pytest.fixture(scope="session")
def local_spec(local_model: local_models.LocalModel) -> str:
    return f"local:{local_model.spec or local_models.DEFAULT_MODEL}"


@pytest.fixture(scope="session")
def llama_server(local_model: local_models.LocalModel) -> Iterator[local_server.ServerRecord]:
    """The session's one server, stopped at the end (an orphan stops itself when idle)."""
    previous = os.environ.get("EVAL_LOCAL_IDLE_S")
    os.environ["EVAL_LOCAL_IDLE_S"] = "600"
    try:
        record = local_server.ensure_running(local_model)
    finally:
        if previous is None:
            os.environ.pop("EVAL_LOCAL_IDLE_S", None)
        else:
            os.environ["EVAL_LOCAL_IDLE_S"] = previous
    yield record
    local_server.stop(record)


@pytest.fixture
def make_local_layer(local_spec: str, llama_server, tmp_path: Path):
    """make_local_layer(*roles, cache_path=None) → a layer whose roles use the session's model."""
    layers: list[LLMLayer] = []

    def factory(*roles: str, cache_path: Path | None = None, **overrides) -> LLMLayer:
        settings = LLMSettings.from_specs(
            dict.fromkeys(roles, local_spec),
            role_overrides={role: overrides for role in roles},
            cache_path=cache_path or tmp_path / "llm_cache.sqlite3",
        )
        layer = LLMLayer(settings)
        layers.append(layer)
        return layer

    yield factory
    for layer in layers:
        layer.close()


@pytest.fixture(scope="session")
def real_graph_dir(graph_dir: Path) -> Path:
    return graph_dir  # the session's one server (eval_pipeline_tests/conftest.py)


@pytest.fixture(scope="session")
def fixture_graph(real_graph_dir: Path, tmp_path_factory) -> Iterator[GraphStore]:
    """The retrieval tests' small fixture set in the embedded ArcadeDB (read-only here)."""
    fixtures = write_fixtures(tmp_path_factory.mktemp("real_fixtures") / "fixtures.jsonl")
    store = GraphStore(data_dir=str(real_graph_dir), database="real", heap="512m")
    inject_fixtures(store, fixtures)
    yield store
    store.close()


def server_activity(record: local_server.ServerRecord) -> float | None:
    """When the server last finished a request (its own witness, besides our ledger)."""
    try:
        return local_server.activity_file(record.log).stat().st_mtime_ns
    except OSError:
        return None
