"""Backend conformance: the store, injection and the wipe, on every backend.

Each test runs once per backend of `backend_store` (eval_pipeline_tests/conftest.py): the
embedded ArcadeDB always, a Memgraph server when EVAL_TEST_MEMGRAPH_URI is set. What a backend
does differently is the dialect's (eval_pipeline.graph.dialects.DIFFERENCES); these tests hold
every backend to the same observable behaviour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.graph import schema
from eval_pipeline.graph.errors import GraphError, GraphRowLimitError
from eval_pipeline.graph.inject import graph_counts, inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.graph.conftest import write_fixtures

pytestmark = pytest.mark.conformance


def test_the_server_is_known_and_supported(backend_store: GraphStore, backend: str):
    version = backend_store.server_version()
    assert version.lower().startswith(backend), version
    if backend == "memgraph":
        dialect = backend_store.dialect
        assert dialect.version is not None and dialect.version >= (3, 5, 0)  # type: ignore[attr-defined]


def test_writes_reads_and_the_row_cap(backend_store: GraphStore):
    store = backend_store
    store.claim()
    store.write("UNWIND range(1, 5) AS i CREATE (:Probe {i: i})")
    rows = store.read("MATCH (p:Probe) RETURN p.i AS i ORDER BY i")
    assert [r["i"] for r in rows] == [1, 2, 3, 4, 5]
    with pytest.raises(GraphRowLimitError):
        store.read("MATCH (p:Probe) RETURN p.i AS i", max_rows=2)


def test_a_failing_write_transaction_leaves_nothing(backend_store: GraphStore):
    store = backend_store
    store.claim()
    with pytest.raises(GraphError):
        store.write_transaction([("CREATE (:Probe {i: 1})", {}), ("THIS IS NOT CYPHER", {})])
    assert store.read("MATCH (p:Probe) RETURN count(p) AS n")[0]["n"] == 0
    store.write_transaction([("CREATE (:Probe {i: 1})", {}), ("CREATE (:Probe {i: 2})", {})])
    assert store.read("MATCH (p:Probe) RETURN count(p) AS n")[0]["n"] == 2


def test_injection_loads_exactly_the_fixtures_and_indexes_turn_text(
    backend_store: GraphStore, tmp_path: Path
):
    store = backend_store
    fixtures = write_fixtures(tmp_path / "fixtures.jsonl")
    report = inject_fixtures(store, fixtures)
    counts, _ = graph_counts(store)
    assert counts == report.counts
    assert store.dialect.name == report.backend
    hits = store.fulltext_search("café", limit=5)
    assert hits and all(h["turn_id"] and h["score"] > 0 for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    names = [i.name for i in store.dialect.text_indexes(store)]
    assert store.dialect.text_index_name(*schema.FULLTEXT_PROPERTY) in names


def test_the_wipe_leaves_an_empty_instance(backend_store: GraphStore, tmp_path: Path):
    store = backend_store
    inject_fixtures(store, write_fixtures(tmp_path / "fixtures.jsonl"))
    assert not store.is_empty()
    store.wipe()
    assert store.foreign_content().is_empty(), store.foreign_content().describe()
    assert store.dialect.text_indexes(store) == []
    # The claim survives the wipe: the instance stays ours.
    assert store.claim_record() is not None


def test_text_indexes_are_created_once_and_dropped(backend_store: GraphStore):
    store = backend_store
    store.claim()
    store.write("CREATE (:Chunk {chunk_id: 'c1', text: 'a red bike in Paris'})")
    dialect = store.dialect
    dialect.create_text_index(store, "Chunk", "text")
    dialect.create_text_index(store, "Chunk", "text")  # exists already: fine
    listed = [i for i in dialect.text_indexes(store) if i.covers("Chunk", "text")]
    assert [i.name for i in listed] == [dialect.text_index_name("Chunk", "text")]
    dialect.drop_text_index(store, "Chunk", "text")
    dialect.drop_text_index(store, "Chunk", "text")  # gone already: fine
    assert not [i for i in dialect.text_indexes(store) if i.covers("Chunk", "text")]
