"""Reconciliation against a real embedded ArcadeDB: what lands in the graph, statuses, failures,
resuming, redo, shared entities, and the `llm` reconciler end to end."""

from __future__ import annotations

import pytest

from eval_pipeline.graph.checks import evidence_markers
from eval_pipeline.graph.inject import graph_counts
from eval_pipeline.reconcile import load_reconciler, reconcile_pending
from eval_pipeline.reconcile.indexes import drop_fulltext_indexes
from eval_pipeline.reconcile.reader import load_sessions, memory_census, read_statuses

from .graph_fixtures import SESSION_IDS

PLUGINS = "eval_pipeline_tests.reconcile.plugins"
ALL_DONE = {sid: "done" for sid in SESSION_IDS}


def rows(store, query, **params):
    return store.read(query, params, max_rows=100_000)


def one(store, query, **params):
    return rows(store, query, **params)[0]["n"]


def test_extractive_writes_chunks_entities_episodes_linked_to_turns(injected_store):
    store = injected_store
    before, _ = graph_counts(store)
    expected = [
        load_reconciler("extractive").reconcile(s) for s in load_sessions(store, SESSION_IDS)
    ]
    progress = []
    report = reconcile_pending(
        store, load_reconciler("extractive"), concurrency=3, progress=progress.append
    )
    assert report.failures == [] and report.done == len(SESSION_IDS) == report.to_do
    assert report.completeness == 1.0
    assert read_statuses(store) == ALL_DONE
    assert [p.finished for p in progress] == list(range(1, len(SESSION_IDS) + 1))

    chunks = sum(len(m.chunks) for m in expected)
    keys = {e.key for m in expected for e in m.entities}
    assert one(store, "MATCH (c:Chunk) RETURN count(c) AS n") == chunks
    assert one(store, "MATCH (e:Entity) RETURN count(e) AS n") == len(keys)
    assert one(store, "MATCH (x:Episode) RETURN count(x) AS n") == len(SESSION_IDS)
    assert report.graph_nodes == {
        "Chunk": chunks,
        "Entity": len(keys),
        "Fact": 0,
        "Episode": len(SESSION_IDS),
        "MemoryNamespace": 0,  # session-level reconcilers have no namespaces
    }
    # Every chunk comes from exactly one turn of its own session.
    links = rows(
        store,
        "MATCH (s:Session)-[:HAS_CHUNK]->(c:Chunk)-[:FROM_TURN]->(t:Turn) "
        "RETURN s.session_id AS s, c.chunk_id AS c, t.session_id AS ts, c.text AS text, "
        "t.text AS turn_text",
    )
    assert len(links) == chunks
    assert all(r["s"] == r["ts"] and r["text"] in r["turn_text"] for r in links)
    # Mentions as the reconciler produced them; a shared entity is one node.
    mentions = sum(len(c.entity_keys) for m in expected for c in m.chunks)
    assert one(store, "MATCH (:Chunk)-[r:MENTIONS]->(:Entity) RETURN count(r) AS n") == mentions
    ana = rows(
        store,
        "MATCH (s:Session)-[:HAS_CHUNK]->(:Chunk)-[:MENTIONS]->(e:Entity {key: 'person:ana'}) "
        "RETURN DISTINCT s.session_id AS s",
    )
    assert sorted(r["s"] for r in ana) == ["s_ana_again", "s_trip"]
    # Episodes cover every turn of their session.
    covers = rows(
        store,
        "MATCH (s:Session)-[:HAS_EPISODE]->(x:Episode)-[:COVERS]->(t:Turn) "
        "RETURN s.session_id AS s, count(t) AS n, x.reconciler AS r",
    )
    turns = {s.session_id: len(s.turns) for s in load_sessions(store, SESSION_IDS)}
    assert {r["s"]: r["n"] for r in covers} == {k: v for k, v in turns.items() if v}
    assert {r["r"] for r in covers} == {"extractive"}
    sessions = rows(
        store,
        "MATCH (s:Session) RETURN s.reconciler AS r, s.reconciler_version AS v, "
        "s.reconcile_schema AS schema, s.reconcile_error AS e",
    )
    assert all(r == {"r": "extractive", "v": "1", "schema": 2, "e": None} for r in sessions)
    # The injected layer is untouched, and nothing names the evidence.
    after, _ = graph_counts(store)
    assert after == before
    assert evidence_markers(store) == []
    # Retrieval can search the distilled text.
    hits = rows(
        store,
        "CALL db.index.fulltext.queryNodes('Chunk[text]', 'Lisbon') YIELD node, score "
        "RETURN node.chunk_id AS c",
    )
    assert {h["c"].split("#")[0] for h in hits} == {"s_trip", "s_ana_again"}


def test_a_failing_session_ends_failed_and_the_rest_done_then_a_rerun_resumes(injected_store):
    store = injected_store
    failing = load_reconciler(f"{PLUGINS}:FailingReconciler", {"fail": ["s_cafe"]})
    report = reconcile_pending(store, failing, concurrency=4)
    assert [f.session_id for f in report.failures] == ["s_cafe"]
    assert "RuntimeError: cannot make sense of s_cafe | on purpose" in report.failures[0].reason
    assert report.done == len(SESSION_IDS) - 1
    assert report.completeness == pytest.approx((len(SESSION_IDS) - 1) / len(SESSION_IDS))
    assert read_statuses(store) == {**ALL_DONE, "s_cafe": "failed"}
    cafe = rows(
        store,
        "MATCH (s:Session {session_id: 's_cafe'}) OPTIONAL MATCH (s)-[:HAS_CHUNK]->(c) "
        "RETURN s.reconcile_error AS e, count(c) AS n",
    )
    assert cafe == [{"e": report.failures[0].reason, "n": 0}]
    chunks_before = one(store, "MATCH (c:Chunk) RETURN count(c) AS n")

    # Re-materializing the same configuration resumes: only the failed session is attempted.
    healed = load_reconciler(f"{PLUGINS}:FailingReconciler", {})
    resumed = reconcile_pending(store, healed, concurrency=4)
    assert (resumed.to_do, resumed.done, resumed.skipped_done) == (1, 1, len(SESSION_IDS) - 1)
    assert resumed.completeness == 1.0 and read_statuses(store) == ALL_DONE
    cafe_chunks = one(
        store, "MATCH (:Session {session_id: 's_cafe'})-[:HAS_CHUNK]->(c) RETURN count(c) AS n"
    )
    chunks = one(store, "MATCH (c:Chunk) RETURN count(c) AS n")
    assert chunks == chunks_before + cafe_chunks
    assert reconcile_pending(store, healed, concurrency=4).to_do == 0

    # Another reconciler redoes every session: its memory replaces the other's, no
    # duplicate, and the graph records which configuration made what is there.
    other = reconcile_pending(store, load_reconciler("extractive"), concurrency=4)
    assert (other.to_do, other.redone_foreign) == (len(SESSION_IDS), len(SESSION_IDS))
    assert one(store, "MATCH (c:Chunk) RETURN count(c) AS n") == chunks
    census = memory_census(store)
    assert [c["pins"]["name"] for c in census["configurations"]] == ["extractive"]
    assert census["configurations"][0]["done"] == len(SESSION_IDS) and census["pending"] == 0


def test_redo_replaces_earlier_output_without_duplicates(injected_store):
    store = injected_store
    reconcile_pending(store, load_reconciler(f"{PLUGINS}:EchoReconciler"), concurrency=4)
    assert one(store, "MATCH (e:Entity) RETURN count(e) AS n") == 1  # shared by every session
    report = reconcile_pending(store, load_reconciler("extractive"), concurrency=4, redo=True)
    assert report.to_do == len(SESSION_IDS) and report.skipped_done == 0
    # The echo output is gone, including its now-unused entity.
    assert one(store, "MATCH (n) WHERE n.reconciler = 'echo' RETURN count(n) AS n") == 0
    counts = report.graph_nodes
    again = reconcile_pending(store, load_reconciler("extractive"), concurrency=4, redo=True)
    assert again.graph_nodes == counts
    dupes = rows(store, "MATCH (e:Entity) WITH e.key AS k, count(*) AS c WHERE c > 1 RETURN k")
    assert dupes == []


def test_a_bulk_run_rebuilds_the_full_text_indexes_it_dropped(injected_store, monkeypatch):
    store = injected_store
    reconcile_pending(store, load_reconciler("extractive"), concurrency=2)
    monkeypatch.setattr("eval_pipeline.reconcile.runner.BULK_MIN_SESSIONS", 1)
    dropped = []

    def spy(s):
        dropped.append(sorted(r["name"] for r in s.autocommit("SHOW INDEXES")))
        return drop_fulltext_indexes(s)

    monkeypatch.setattr("eval_pipeline.reconcile.session_graph.drop_fulltext_indexes", spy)
    report = reconcile_pending(store, load_reconciler("extractive"), concurrency=2, redo=True)
    assert report.index_problems == [] and "Chunk[text]" in dropped[0]
    names = {r["name"] for r in store.autocommit("SHOW INDEXES")}
    assert {"Chunk[text]", "Episode[summary]"} <= names
    hits = rows(
        store,
        "CALL db.index.fulltext.queryNodes('Episode[summary]', 'Lisbon') YIELD node "
        "RETURN node.episode_id AS e",
    )
    assert hits


def test_concurrent_sessions_share_one_entity_node(injected_store):
    store = injected_store
    report = reconcile_pending(
        store, load_reconciler(f"{PLUGINS}:EchoReconciler", {"label": "shared"}), concurrency=8
    )
    assert report.failures == []
    assert rows(store, "MATCH (e:Entity) RETURN e.key AS k, e.name AS name") == [
        {"k": "other:shared", "name": "shared"}
    ]
    turns = one(store, "MATCH (t:Turn) RETURN count(t) AS n")
    assert one(store, "MATCH (:Chunk)-[r:MENTIONS]->(:Entity) RETURN count(r) AS n") == turns


def test_output_citing_foreign_turns_is_refused(injected_store):
    report = reconcile_pending(
        injected_store, load_reconciler(f"{PLUGINS}:ForeignTurnsReconciler"), concurrency=2
    )
    assert report.done == 0 and len(report.failures) == len(SESSION_IDS)
    assert all("not in the session" in f.reason for f in report.failures)
    assert one(injected_store, "MATCH (c:Chunk) RETURN count(c) AS n") == 0


def test_a_write_the_server_refuses_fails_only_that_session_and_leaves_nothing(injected_store):
    """Colliding chunk ids break the unique constraint: the later sessions fail whole."""
    store = injected_store
    report = reconcile_pending(
        store, load_reconciler(f"{PLUGINS}:FixedIdReconciler"), concurrency=1
    )
    assert report.done == 1 and len(report.failures) == len(SESSION_IDS) - 1
    assert all("graph write failed" in f.reason for f in report.failures)
    assert one(store, "MATCH (c:Chunk) RETURN count(c) AS n") == 1
    assert one(store, "MATCH (e:Entity) RETURN count(e) AS n") == 1  # no partial writes


def test_none_marks_every_session_done_and_writes_nothing(injected_store):
    report = reconcile_pending(injected_store, load_reconciler("none"), concurrency=2)
    assert report.completeness == 1.0 and read_statuses(injected_store) == ALL_DONE
    assert report.graph_nodes == {
        "Chunk": 0,
        "Entity": 0,
        "Fact": 0,
        "Episode": 0,
        "MemoryNamespace": 0,
    }


def test_llm_reconciler_end_to_end_with_one_bad_session(injected_store, make_llm, fake_model):
    store = injected_store
    reconciler = load_reconciler("llm", llm=make_llm())
    report = reconcile_pending(store, reconciler, concurrency=4)
    assert [f.session_id for f in report.failures] == ["s_llm_bad"]
    assert "did not fit ExtractedMemory" in report.failures[0].reason
    assert report.llm_usage is not None and report.llm_usage["calls"] == 2 * len(SESSION_IDS)
    facts = rows(
        store,
        "MATCH (s:Session)-[:HAS_FACT]->(f:Fact)-[:FROM_TURN]->(t:Turn) "
        "RETURN s.session_id AS s, s.started_at AS started, f.valid_at AS valid_at, "
        "f.fact_type AS type, t.role AS role, t.session_id AS ts",
    )
    assert facts and all(
        r["valid_at"] == r["started"]
        and r["type"] == "event"
        and r["role"] == "user"
        and r["s"] == r["ts"]
        for r in facts
    )
    about = rows(
        store,
        "MATCH (f:Fact)-[:ABOUT]->(e:Entity {key: 'place:lisbon'}) RETURN f.fact_id AS f",
    )
    assert {r["f"].split("#")[0] for r in about} == {"s_trip", "s_ana_again"}
    episodes = one(store, "MATCH (x:Episode) RETURN count(x) AS n")
    assert episodes == len(SESSION_IDS) - 1
    # Re-running makes no new model call for finished sessions; the bad one is retried.
    calls_before = fake_model.request_count
    again = reconcile_pending(store, load_reconciler("llm", llm=make_llm()), concurrency=4)
    assert again.to_do == 1 and len(again.failures) == 1
    # The bad session's extraction and its repair are asked again (failures are never cached);
    # its summary, which had succeeded, comes from the cache.
    assert fake_model.request_count - calls_before == 2
