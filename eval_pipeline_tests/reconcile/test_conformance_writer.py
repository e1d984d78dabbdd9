"""Backend conformance: the reconcile writer and its indexes, on every backend.

Runs once per backend of `backend_store` (eval_pipeline_tests/conftest.py): the embedded
ArcadeDB always, a Memgraph server when EVAL_TEST_MEMGRAPH_URI is set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile import load_reconciler, reconcile_pending
from eval_pipeline.reconcile.indexes import (
    drop_fulltext_indexes,
    ensure_fulltext_indexes,
    ensure_reconcile_schema,
)
from eval_pipeline.reconcile.reader import load_sessions, read_statuses
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv

from .graph_fixtures import SESSION_IDS, write_fixtures

pytestmark = pytest.mark.conformance


@pytest.fixture
def injected(backend_store: GraphStore, tmp_path: Path) -> GraphStore:
    inject_fixtures(backend_store, write_fixtures(tmp_path / "fixtures.jsonl"))
    return backend_store


def _count(store: GraphStore, label: str) -> int:
    return int(store.read(f"MATCH (n:{label}) RETURN count(n) AS n")[0]["n"])


def test_the_extractive_reconciler_writes_every_session_once(injected: GraphStore):
    store = injected
    expected = [
        load_reconciler("extractive").reconcile(s) for s in load_sessions(store, SESSION_IDS)
    ]
    report = reconcile_pending(store, load_reconciler("extractive"), concurrency=2)
    assert report.failures == [] and report.done == len(SESSION_IDS)
    assert set(read_statuses(store).values()) == {"done"}
    assert _count(store, "Chunk") == sum(len(m.chunks) for m in expected)
    assert _count(store, "Entity") == len({e.key for m in expected for e in m.entities})
    assert _count(store, "Episode") == len(SESSION_IDS)
    # Re-running changes nothing: every session is done under these pins.
    again = reconcile_pending(store, load_reconciler("extractive"), concurrency=2)
    assert again.to_do == 0 and _count(store, "Chunk") == sum(len(m.chunks) for m in expected)


def test_reconciler_indexes_are_idempotent_and_searchable(injected: GraphStore, backend: str):
    store = injected
    reconcile_pending(store, load_reconciler("extractive"), concurrency=2)
    assert ensure_reconcile_schema(store) == []
    assert ensure_reconcile_schema(store) == []  # again: already there
    labels = {"Chunk", "Episode"}
    assert ensure_fulltext_indexes(store, labels) == []
    assert ensure_fulltext_indexes(store, labels) == []
    retriever = FulltextRetriever(RetrievalEnv(store=store, backend=backend))
    # Extractive memory declares its chunks, facts and episodes searchable, not the transcript.
    assert {s.source.kind for s in retriever.sources()} == {"chunk", "episode"}
    assert drop_fulltext_indexes(store) == []
    remaining = [i for i in store.dialect.text_indexes(store) if i.label in labels]
    assert remaining == []


def test_one_batched_transaction_keeps_an_empty_session_and_names_a_missing_one(
    injected: GraphStore,
):
    """The batched statement's unit subqueries on a live server: a session with nothing to
    write is still marked done, the links are made to nodes created earlier in the same
    statement, and a session the graph lacks is named, with nothing written for it
    (test_memgraph_statements.py [SQ-10] for what Memgraph's planner does)."""
    from eval_pipeline.reconcile.models import SessionMemory
    from eval_pipeline.reconcile.writer import write_sessions_memory

    store = injected
    ensure_reconcile_schema(store)
    first, second = load_sessions(store, SESSION_IDS[:2])
    full = load_reconciler("extractive").reconcile(first)
    assert full.chunks and full.entities
    empty = SessionMemory(session_id=second.session_id, reconciler=full.reconciler)
    gone = full.model_copy(update={"session_id": "not_in_graph"})
    missing = write_sessions_memory(store, [full, empty, gone], version="1", pins_key="k")
    assert missing == {"not_in_graph"}
    statuses = read_statuses(store)
    assert statuses[first.session_id] == statuses[second.session_id] == "done"
    assert _count(store, "Chunk") == len(full.chunks)
    assert _count(store, "Fact") == len(full.facts)
    links = store.read(
        "MATCH (c:Chunk)-[r:FROM_TURN]->(:Turn) RETURN count(r) AS n",
    )[0]["n"]
    assert links == sum(len(c.turn_ids) for c in full.chunks)
    mentions = store.read("MATCH (:Chunk)-[r:MENTIONS]->(:Entity) RETURN count(r) AS n")[0]["n"]
    assert mentions == sum(len(c.entity_keys) for c in full.chunks)
    owned = store.read(
        "MATCH (s:Session {session_id: $s})-[:HAS_CHUNK|HAS_FACT|HAS_EPISODE]->(n) "
        "RETURN count(n) AS n",
        {"s": second.session_id},
    )
    assert owned[0]["n"] == 0
