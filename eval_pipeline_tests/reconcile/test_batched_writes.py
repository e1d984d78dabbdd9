"""Many pending sessions in one write transaction (issue 29), on the real ArcadeDB: the graph
is the same as with one transaction per session, and a session the graph lacks fails alone."""

from __future__ import annotations

import time
from pathlib import Path

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile import reconcile_pending
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.indexes import ensure_reconcile_schema
from eval_pipeline.reconcile.reader import load_sessions, read_statuses
from eval_pipeline.reconcile.session_graph import StoreSessionGraph
from eval_pipeline.reconcile.writer import write_sessions_memory

from .graph_fixtures import SESSION_IDS

# Every node a reconciler writes and every edge from one, by stable ids and properties.
DUMP = {
    "chunks": "MATCH (s:Session)-[:HAS_CHUNK]->(c:Chunk) RETURN s.session_id AS s, "
    "c.chunk_id AS id, c.index AS i, c.text AS text, c.reconciler AS r ORDER BY id",
    "chunk_turns": "MATCH (c:Chunk)-[:FROM_TURN]->(t:Turn) RETURN c.chunk_id AS c, "
    "t.turn_id AS t ORDER BY c, t",
    "mentions": "MATCH (c:Chunk)-[:MENTIONS]->(e:Entity) RETURN c.chunk_id AS c, e.key AS e "
    "ORDER BY c, e",
    "entities": "MATCH (e:Entity) RETURN e.key AS k, e.name AS n, e.type AS t ORDER BY k",
    "facts": "MATCH (s:Session)-[:HAS_FACT]->(f:Fact) RETURN s.session_id AS s, f.fact_id AS id, "
    "f.text AS text, f.valid_at AS v ORDER BY id",
    "episodes": "MATCH (s:Session)-[:HAS_EPISODE]->(x:Episode)-[:COVERS]->(t:Turn) "
    "RETURN x.episode_id AS id, x.summary AS sm, x.started_at AS at, t.turn_id AS t "
    "ORDER BY id, t",
    "sessions": "MATCH (s:Session) RETURN s.session_id AS s, s.reconcile_status AS st, "
    "s.reconciler AS r, s.reconciler_version AS v, s.reconcile_pins AS p, "
    "s.reconcile_schema AS sc ORDER BY s",
}


def dump(store: GraphStore) -> dict[str, list[dict]]:
    return {name: store.read(q, max_rows=100_000) for name, q in DUMP.items()}


def fresh(graph_dir: Path, fixtures: Path, name: str) -> GraphStore:
    store = GraphStore(data_dir=str(graph_dir), database=name, heap="512m")
    inject_fixtures(store, fixtures)
    return store


def test_batched_writes_make_the_same_graph_as_one_transaction_each(
    graph_dir, reconcile_fixtures_file, monkeypatch
):
    """The first write is held back for a moment so every other result is waiting: the
    writer then sends them in one transaction (seen by the spy on the real function)."""
    batches: list[int] = []
    written: list[str] = []
    batched_run: list[bool] = []
    real_many = StoreSessionGraph.write_many
    real_one = StoreSessionGraph.write

    def many(self, memories, **kw):
        batches.append(len(memories))
        written.extend(m.session_id for m in memories)
        return real_many(self, memories, **kw)

    def one(self, memory, **kw):
        if not batches and memory.session_id == SESSION_IDS[0]:
            time.sleep(0.5)
        if kw.get("version") == "1" and batched_run:
            written.append(memory.session_id)
        return real_one(self, memory, **kw)

    monkeypatch.setattr(StoreSessionGraph, "write_many", many)
    monkeypatch.setattr(StoreSessionGraph, "write", one)
    each = fresh(graph_dir, reconcile_fixtures_file, "batched_writes_each")
    batched = fresh(graph_dir, reconcile_fixtures_file, "batched_writes_many")
    try:
        r1 = reconcile_pending(each, ExtractiveReconciler(), concurrency=1, write_batch=1)
        assert batches == [], "write_batch=1 writes one session per transaction"
        batched_run.append(True)
        r2 = reconcile_pending(batched, ExtractiveReconciler(), concurrency=2)
        assert batches and max(batches) >= 2, batches
        assert len(written) == len(SESSION_IDS), "each session written once, batched or not"
        assert r1.done == r2.done == len(SESSION_IDS) and not r1.failures and not r2.failures
        assert r1.nodes_written == r2.nodes_written
        a, b = dump(each), dump(batched)
        assert a["chunks"] and a["entities"] and a["episodes"]
        assert a == b
    finally:
        each.close()
        batched.close()


def test_a_session_missing_from_the_graph_is_named_and_the_others_land(injected_store):
    store = injected_store
    ensure_reconcile_schema(store)
    sessions = load_sessions(store, SESSION_IDS[:2])
    memories = [ExtractiveReconciler().reconcile(s) for s in sessions]
    gone = memories[1].model_copy(update={"session_id": "not_in_graph"})
    missing = write_sessions_memory(store, [memories[0], gone], version="1", pins_key="k")
    assert missing == {"not_in_graph"}
    statuses = read_statuses(store)
    assert statuses[SESSION_IDS[0]] == "done" and statuses[SESSION_IDS[1]] == "pending"
