"""Live-server fixtures for the retrieval tests.

One embedded ArcadeDB (a separate JVM, as in production) for the whole session, with the small
fixture set of `fixture_graph` injected into database `retrieval`, which read-only tests share.
Tests that write get `scratch_store`: a fresh database on the same server, injected the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.retrieve.fixture_graph import write_fixtures

_scratch_ids = itertools.count()


@pytest.fixture(scope="session")
def arcadedb_dir(graph_dir: Path) -> Path:
    return graph_dir  # the session's one server (eval_pipeline_tests/conftest.py)


@pytest.fixture(scope="session")
def fixtures_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fixtures(tmp_path_factory.mktemp("fixtures") / "fixtures.jsonl")


@pytest.fixture(scope="session")
def fixture_store(arcadedb_dir: Path, fixtures_file: Path) -> Iterator[GraphStore]:
    """The fixture set, injected once. Tests must not write to it."""
    store = GraphStore(data_dir=str(arcadedb_dir), database="retrieval", heap="512m")
    inject_fixtures(store, fixtures_file)
    yield store
    store.close()


@pytest.fixture
def scratch_store(
    arcadedb_dir: Path, fixtures_file: Path, fixture_store: GraphStore
) -> Iterator[GraphStore]:
    """A throwaway database with the fixture set, free to be written."""
    store = GraphStore(
        data_dir=str(arcadedb_dir), database=f"scratch{next(_scratch_ids)}", heap="512m"
    )
    inject_fixtures(store, fixtures_file)
    yield store
    store.close()
