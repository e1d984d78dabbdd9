"""`fulltext` against the real embedded ArcadeDB: right turns, well-formed ids, scopes."""

from __future__ import annotations

import re

import pytest

from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline_tests.retrieve.fixture_graph import HAYSTACKS, QUESTIONS

TURN_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}#\d+$")


def _retrieve(store: GraphStore, qid: str, scope: str, k: int = 10, **options):
    question, date, _ = QUESTIONS[qid]
    retriever = FulltextRetriever(RetrievalEnv(store=store, backend="arcadedb"), **options)
    trace = RetrievalTrace()
    request = RetrievalRequest(
        question_id=qid, question=question, question_date=date, scope=scope, top_k=k
    )
    return retriever.retrieve(request, trace), trace, retriever


@pytest.mark.parametrize("qid", sorted(QUESTIONS))
def test_question_scope_ranks_the_right_turn_first_and_stays_in_the_haystack(fixture_store, qid):
    output, trace, _ = _retrieve(fixture_store, qid, "question")
    assert output.items, trace.queries
    assert output.items[0].turn_ids == [QUESTIONS[qid][2]]
    for item in output.items:
        assert item.kind == "turn" and len(item.turn_ids) == 1 and TURN_ID.match(item.turn_ids[0])
        assert item.session_ids == [item.turn_ids[0].split("#")[0]]
        assert set(item.session_ids) <= HAYSTACKS[qid]
        assert item.score is not None and item.score > 0
    scores = [i.score for i in output.items]
    assert scores == sorted(scores, reverse=True)
    assert all(q.error is None and q.latency_ms is not None for q in trace.queries)


def test_item_text_is_the_turn_text_and_context_carries_date_and_speaker(fixture_store):
    output, _, _ = _retrieve(fixture_store, "q_music", "question")
    assert output.items[0].text == "I started violin lessons; my teacher is called Anna Kowalski."
    assert output.context[0] == (
        "[2023-05-24 20:00, user] I started violin lessons; my teacher is called Anna Kowalski."
    )
    bare, _, _ = _retrieve(fixture_store, "q_music", "question", context_format="text")
    assert bare.context[0] == bare.items[0].text


def test_question_scope_excludes_other_haystacks_batch_scope_does_not(fixture_store):
    scoped, _, _ = _retrieve(fixture_store, "q_bike", "question")
    batch, _, _ = _retrieve(fixture_store, "q_bike", "batch")
    scoped_sessions = {s for i in scoped.items for s in i.session_ids}
    batch_sessions = {s for i in batch.items for s in i.session_ids}
    assert "s_bakery" not in scoped_sessions, "s_bakery is outside q_bike's haystack"
    assert "s_bakery" in batch_sessions, "batch scope searches every session"
    assert batch.items[0].turn_ids == ["s_bike#0"]


def test_top_k_caps_the_items(fixture_store):
    output, _, _ = _retrieve(fixture_store, "q_bike", "batch", k=2)
    assert len(output.items) == 2 == len(output.context)


def test_queries_are_recorded_with_rows(fixture_store):
    _, trace, retriever = _retrieve(fixture_store, "q_dog", "question", ranking="engine")
    # The search is bounded (issue 18): the best hits' ids and scores, then their rows.
    haystack, search, rows = trace.queries
    assert "HAYSTACK" in haystack.query and haystack.rows == len(HAYSTACKS["q_dog"])
    assert "db.index.fulltext.queryNodes" in search.query and "$fetch" in search.query
    assert "UNWIND $picked" in rows.query and rows.rows and rows.rows > 0
    assert search.params["query"].startswith("name OR names OR ")
    assert " OR golden OR " in search.params["query"]
    assert search.params["query"].split(" OR ")[-1].startswith("retriev")
    assert search.rows and search.rows > 0
    assert retriever.pins()["sources"] == ["turn"]


def test_unknown_question_is_an_error_and_stopword_question_is_empty(fixture_store):
    from eval_pipeline.retrieve.protocol import RetrievalError

    retriever = FulltextRetriever(RetrievalEnv(store=fixture_store))
    with pytest.raises(RetrievalError, match="no haystack"):
        retriever.retrieve(
            RetrievalRequest(question_id="nope", question="bike?", question_date="d"),
            RetrievalTrace(),
        )
    trace = RetrievalTrace()
    out = retriever.retrieve(
        RetrievalRequest(question_id="q_bike", question="What was it?", question_date="d"), trace
    )
    assert out.items == [] and trace.notes and not trace.queries


def test_indexed_chunks_and_episodes_are_searched_too(scratch_store):
    """A reconciler's chunks and episodes, once full-text indexed, join the ranking; a chunk of
    an already retrieved turn is not repeated."""
    scratch_store.write(
        "MATCH (s:Session {session_id: 's_violin'})-[:HAS_TURN]->(t:Turn) "
        "WITH s, t ORDER BY t.index "
        "CREATE (s)-[:HAS_CHUNK]->(c:Chunk {chunk_id: 's_violin#chunk' + toString(t.index), "
        "session_id: 's_violin', index: t.index, text: t.text, reconciler: 'test'})"
        "-[:FROM_TURN]->(t)"
    )
    scratch_store.write(
        "MATCH (s:Session {session_id: 's_violin'}) "
        "CREATE (s)-[:HAS_EPISODE]->(e:Episode {episode_id: 's_violin#episode', "
        "session_id: 's_violin', summary: 'The user takes violin lessons from a teacher.', "
        "started_at: s.started_at, reconciler: 'test'}) "
        "WITH e MATCH (s:Session {session_id: 's_violin'})-[:HAS_TURN]->(t:Turn) "
        "CREATE (e)-[:COVERS]->(t)"
    )
    http = scratch_store.http()
    for label, prop in (("Chunk", "text"), ("Episode", "summary")):
        http.sql(scratch_store.database, f"CREATE PROPERTY {label}.{prop} IF NOT EXISTS STRING")
        http.sql(
            scratch_store.database, f"CREATE INDEX IF NOT EXISTS ON {label} ({prop}) FULL_TEXT"
        )

    output, trace, retriever = _retrieve(scratch_store, "q_music", "question", ranking="engine")
    assert retriever.pins()["sources"] == ["turn", "chunk", "episode"]
    # The haystack, then per source one bounded full-text search (issue 18), followed by
    # the picked rows when it found any.
    searches = [q for q in trace.queries if "db.index.fulltext.queryNodes" in q.query]
    assert len(searches) == 3 and "HAYSTACK" in trace.queries[0].query
    kinds = [i.kind for i in output.items]
    assert "episode" in kinds
    episode = output.items[kinds.index("episode")]
    assert episode.turn_ids == ["s_violin#0", "s_violin#1"] and episode.session_ids == ["s_violin"]
    first_turns = [tuple(i.turn_ids) for i in output.items if i.kind != "episode"]
    assert len(first_turns) == len(set(first_turns)), "a chunk repeating its turn is dropped"
    assert output.items[0].turn_ids == ["s_violin#0"]

    only_turns, _, retriever = _retrieve(scratch_store, "q_music", "question", sources=["turn"])
    assert {i.kind for i in only_turns.items} == {"turn"}
