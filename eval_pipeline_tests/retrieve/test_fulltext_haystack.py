"""Ranking `haystack` (issue 29): BM25 over the question's own haystack, on the real ArcadeDB.

A question's search must stay in its haystack whatever the rest of the graph holds, and its
statistics are the haystack's (N, df, avgdl), so adding other users' sessions changes neither
which items it returns nor their scores.
"""

from __future__ import annotations

import math

import pytest

from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve import haystack_bm25
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline_tests.retrieve.fixture_graph import HAYSTACKS, QUESTIONS


def _retrieve(store: GraphStore, qid: str, k: int = 10, **options):
    question, date, _ = QUESTIONS[qid]
    retriever = FulltextRetriever(RetrievalEnv(store=store, backend="arcadedb"), **options)
    trace = RetrievalTrace()
    request = RetrievalRequest(
        question_id=qid, question=question, question_date=date, scope="question", top_k=k
    )
    return retriever.retrieve(request, trace), trace, retriever


def test_bm25_uses_the_stated_formula_and_the_haystacks_own_statistics():
    docs = [("a", "red bike red"), ("b", "a dog"), ("c", "bike shop in town")]
    picked, stats = haystack_bm25.rank(docs, ["red", "bike"], 10)
    assert (stats.documents, stats.matched) == (3, 2)
    assert stats.avgdl == pytest.approx(9 / 3)

    def term(df: int, tf: int, dl: int) -> float:
        idf = math.log(1 + (3 - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / 3))

    assert [p["id"] for p in picked] == ["a", "c"]
    assert picked[0]["score"] == pytest.approx(term(1, 2, 3) + term(2, 1, 3))
    assert picked[1]["score"] == pytest.approx(term(2, 1, 4))
    assert haystack_bm25.rank([], ["bike"], 5) == ([], haystack_bm25.HaystackStats(0, 0.0, 0))


def test_tokens_are_the_query_tokenizers_own():
    """A text token and a query term compare equal exactly when `terms.words` says so."""
    from eval_pipeline.retrieve.terms import words

    text = "Ça dépend | İstanbul's Road-BIKE, 12.5 km; naïve ΣΊΣΥΦΟΣ don't"
    length, counts = haystack_bm25.token_counts(text)
    assert length == len(words(text)) and counts == __import__("collections").Counter(words(text))


def test_an_unknown_question_is_still_an_error(fixture_store):
    from eval_pipeline.retrieve.protocol import RetrievalError

    retriever = FulltextRetriever(RetrievalEnv(store=fixture_store), ranking="haystack")
    with pytest.raises(RetrievalError, match="no haystack"):
        retriever.retrieve(
            RetrievalRequest(question_id="nope", question="bike?", question_date="d"),
            RetrievalTrace(),
        )


def test_chunks_and_facts_are_ranked_in_the_haystack_and_the_namespace(scratch_store):
    """Chunks of q_music's sessions are ranked and read back with their turns; a fact of
    another user's namespace on a shared session (s_shared) is never returned, one of
    q_music's own or of none is."""
    scratch_store.write(
        "MATCH (s:Session)-[:HAS_TURN]->(t:Turn) WHERE s.session_id IN ['s_violin', 's_bakery'] "
        "CREATE (s)-[:HAS_CHUNK]->(c:Chunk {chunk_id: t.turn_id + '#chunk', "
        "session_id: s.session_id, index: t.index, text: t.text, reconciler: 'test'})"
        "-[:FROM_TURN]->(t)"
    )
    for fact_id, namespace, text in (
        ("f_mine", "user:q_music", "The violin teacher is Anna, says the pasta session."),
        ("f_other", "user:q_bike", "The violin teacher is Boris, says the pasta session."),
    ):
        scratch_store.write(
            "MATCH (s:Session {session_id: 's_shared'})-[:HAS_TURN]->(t:Turn {index: 0}) "
            "CREATE (s)-[:HAS_FACT]->(f:Fact {fact_id: $id, session_id: 's_shared', "
            "namespace: $ns, text: $text, reconciler: 'test'})-[:FROM_TURN]->(t)",
            {"id": fact_id, "ns": namespace, "text": text},
        )
    http = scratch_store.http()  # the sources are the indexed ones, whatever the ranking
    for label in ("Chunk", "Fact"):
        http.sql(scratch_store.database, f"CREATE PROPERTY {label}.text IF NOT EXISTS STRING")
        http.sql(scratch_store.database, f"CREATE INDEX IF NOT EXISTS ON {label} (text) FULL_TEXT")
    output, trace, retriever = _retrieve(
        scratch_store, "q_music", ranking="haystack", sources=["chunk", "fact"]
    )
    kinds = {i.kind for i in output.items}
    assert kinds == {"chunk", "fact"}, output.items
    texts = [i.text for i in output.items]
    assert any("Anna" in t for t in texts if "pasta" in t)
    assert not any("Boris" in t for t in texts), "another user's fact"
    assert {s for i in output.items for s in i.session_ids} <= HAYSTACKS["q_music"]
    chunk = next(i for i in output.items if i.kind == "chunk")
    assert chunk.turn_ids == [chunk.node_ids[0].removesuffix("#chunk")]
    assert not any("db.index.fulltext" in q.query for q in trace.queries)


@pytest.mark.parametrize("qid", sorted(QUESTIONS))
def test_haystack_ranking_finds_the_right_turn_and_never_leaves_the_haystack(fixture_store, qid):
    output, trace, retriever = _retrieve(fixture_store, qid, ranking="haystack")
    assert output.items[0].turn_ids == [QUESTIONS[qid][2]]
    assert {s for i in output.items for s in i.session_ids} <= HAYSTACKS[qid]
    assert not any("db.index.fulltext" in q.query for q in trace.queries), "engine not asked"
    assert retriever.pins()["ranking"] == haystack_bm25.PINS


def test_haystack_is_the_default_ranking_and_engine_the_pinned_option(fixture_store):
    _, trace, retriever = _retrieve(fixture_store, "q_bike")
    assert not any("db.index.fulltext" in q.query for q in trace.queries)
    assert retriever.pins()["ranking"] == haystack_bm25.PINS
    _, trace, retriever = _retrieve(fixture_store, "q_bike", ranking="engine")
    assert any("db.index.fulltext" in q.query for q in trace.queries)
    assert retriever.pins()["ranking"] == {"ranking": "engine"}
    with pytest.raises(ValueError, match="fulltext ranking must be one of"):
        FulltextRetriever(RetrievalEnv(store=fixture_store), ranking="global")


def test_other_users_sessions_change_neither_items_nor_scores(fixture_store, scratch_store):
    """`s_bakery` (outside q_bike's haystack) and a flood of bike turns in a new session of
    q_dog's leave q_bike's ranking exactly as it was; the engine's global statistics move."""
    before, _, _ = _retrieve(fixture_store, "q_bike", ranking="haystack")
    engine_before, _, _ = _retrieve(fixture_store, "q_bike", ranking="engine")
    scratch_store.write(
        "MATCH (q:Question {question_id: 'q_dog'}) "
        "CREATE (q)-[:HAYSTACK]->(s:Session {session_id: 's_flood', "
        "started_at: '2023-05-25T08:00:00'}) "
        "WITH s UNWIND range(0, 39) AS i "
        "CREATE (s)-[:HAS_TURN]->(:Turn {turn_id: 's_flood#' + toString(i), session_id: "
        "'s_flood', role: 'user', index: i, timestamp: '2023-05-25T08:00:00', "
        "text: 'road bike Paris bought road bike brand ' + toString(i)})"
    )
    after, trace, _ = _retrieve(scratch_store, "q_bike", ranking="haystack")
    engine_after, _, _ = _retrieve(scratch_store, "q_bike", ranking="engine")
    pairs = [(i.turn_ids, i.score) for i in after.items]
    assert pairs == [(i.turn_ids, i.score) for i in before.items]
    assert not any("s_flood" in s for i in after.items for s in i.session_ids)
    documents = trace.queries[0]
    assert "collect([node.turn_id, node.text" in documents.query
    docs = scratch_store.read(documents.query, documents.params)[0]["docs"]
    assert len(docs) == 7, "N: the turns of q_bike's three sessions, no more"
    # The contrast that makes the test mean something: the engine's scores did move.
    assert [i.score for i in engine_after.items] != [i.score for i in engine_before.items]
