"""Backend conformance: full-text retrieval and the read-only guard, on every backend.

Runs once per backend of `backend_store` (eval_pipeline_tests/conftest.py): the embedded
ArcadeDB always, a Memgraph server when EVAL_TEST_MEMGRAPH_URI is set.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eval_pipeline.graph.errors import GraphTimeoutError
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.state import graph_state
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.guarded_read import GuardedReader, QueryRejected
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline_tests.retrieve.fixture_graph import HAYSTACKS, QUESTIONS, write_fixtures

pytestmark = pytest.mark.conformance

# A read that runs for minutes unless it is stopped (test_harmful_reads.py's RUNAWAY).
RUNAWAY = "UNWIND range(1,3000000) AS x UNWIND range(1,3000000) AS y RETURN count(*)"


@pytest.fixture
def injected(backend_store: GraphStore, tmp_path: Path) -> GraphStore:
    inject_fixtures(backend_store, write_fixtures(tmp_path / "fixtures.jsonl"))
    return backend_store


def _retrieve(store: GraphStore, backend: str, qid: str, scope: str):
    question, date, _ = QUESTIONS[qid]
    retriever = FulltextRetriever(RetrievalEnv(store=store, backend=backend))
    trace = RetrievalTrace()
    request = RetrievalRequest(
        question_id=qid, question=question, question_date=date, scope=scope, top_k=10
    )
    return retriever.retrieve(request, trace), trace, retriever


@pytest.mark.parametrize("qid", sorted(QUESTIONS))
def test_fulltext_ranks_the_right_turn_first_in_its_haystack(
    injected: GraphStore, backend: str, qid: str
):
    output, trace, retriever = _retrieve(injected, backend, qid, "question")
    assert output.items, trace.queries
    assert output.items[0].turn_ids == [QUESTIONS[qid][2]]
    assert all(set(i.session_ids) <= HAYSTACKS[qid] for i in output.items)
    scores = [i.score for i in output.items]
    assert all(s is not None and s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    assert retriever.pins()["sources"] == ["turn"] and retriever.pins()["discovery_problem"] is None


def test_batch_scope_searches_every_session(injected: GraphStore, backend: str):
    scoped, _, _ = _retrieve(injected, backend, "q_bike", "question")
    batch, _, _ = _retrieve(injected, backend, "q_bike", "batch")
    assert "s_bakery" not in {s for i in scoped.items for s in i.session_ids}
    assert "s_bakery" in {s for i in batch.items for s in i.session_ids}


def test_reads_leave_content_and_schema_unchanged(injected: GraphStore, backend: str):
    before = graph_state(injected)
    _retrieve(injected, backend, "q_dog", "batch")
    GuardedReader(injected).read("MATCH (t:Turn) RETURN t.text AS text LIMIT 3")
    after = graph_state(injected)
    assert (after.fingerprint, after.schema_fingerprint) == (
        before.fingerprint,
        before.schema_fingerprint,
    )


def test_the_guard_refuses_writes_before_the_server_sees_them(injected: GraphStore):
    before = graph_state(injected)
    reader = GuardedReader(injected)
    for statement in (
        "CREATE (:Injected)",
        "MATCH (t:Turn) DETACH DELETE t",
        "MATCH (t:Turn) SET t.text = 'x' RETURN t",
    ):
        with pytest.raises(QueryRejected):
            reader.read(statement)
    assert graph_state(injected).fingerprint == before.fingerprint


def test_a_runaway_read_is_stopped_and_the_server_still_answers(backend_store: GraphStore):
    reader = GuardedReader(backend_store, timeout_s=3)
    started = time.monotonic()
    with pytest.raises(GraphTimeoutError) as info:
        reader.read(RUNAWAY)
    assert time.monotonic() - started < 60
    assert "stopped on the server" in str(info.value), str(info.value)
    assert backend_store.read("RETURN 1 AS ok", timeout_s=10) == [{"ok": 1}]


def test_dense_prepares_and_searches_the_vector_index_on_every_backend(
    injected: GraphStore, backend: str
):
    """The dialect's vector index DDL, listing, exact cosine and index call, with the real
    model (Memgraph's forms read at v3.10.1: graph/dialects/memgraph.py); the preparation is
    the only writer, and a second one writes nothing."""
    from eval_pipeline.retrieve.dense import DenseRetriever

    facts = DenseRetriever.prepare_graph(injected, {"sources": ["turn"]}, lambda _: None)
    assert facts["sources"]["Turn"]["nodes"] == 11
    before = graph_state(injected)
    again = DenseRetriever.prepare_graph(injected, {"sources": ["turn"]}, lambda _: None)
    assert again["sources"]["Turn"]["kept"] == 11
    retriever = DenseRetriever(RetrievalEnv(store=injected, backend=backend), sources=["turn"])
    retriever.check_graph()
    for scope in ("question", "batch"):
        request = RetrievalRequest(
            question_id="q_bike",
            question="What kind of bicycle did I purchase?",
            question_date=QUESTIONS["q_bike"][1],
            scope=scope,
            top_k=3,
        )
        output = retriever.retrieve(request, RetrievalTrace())
        assert output.items[0].turn_ids == ["s_bike#0"], (scope, output.items)
    assert graph_state(injected).fingerprint == before.fingerprint


def test_haystack_documents_are_one_row_of_lists_with_nulls_in_step(injected: GraphStore):
    """Ranking `haystack`'s read on a live server: one row (an aggregate without a grouping
    key), every haystack turn once, each a list of the five fields with a null kept in its
    place (on Memgraph: its collect skips only a null input, a list holding one is kept:
    test_memgraph_statements.py [AG-10]); an unknown question: one row of []."""
    from eval_pipeline.retrieve import fulltext_queries as ftq

    store = injected
    turn = ftq.SOURCE_KINDS[0]
    qid = "q_bike"
    target = QUESTIONS[qid][2]
    store.write("MATCH (t:Turn {turn_id: $id}) SET t.role = null", {"id": target})
    statement = ftq.haystack_documents_statement(turn)
    reader = GuardedReader(store)
    rows = reader.read(statement, {"question_id": qid})
    assert len(rows) == 1
    docs = rows[0]["docs"]
    assert docs and all(len(d) == len(ftq.HAYSTACK_DOC_FIELDS) for d in docs)
    assert len({d[0] for d in docs}) == len(docs)
    assert {d[2] for d in docs} <= HAYSTACKS[qid]
    expected = store.read(
        "MATCH (:Question {question_id: $q})-[:HAYSTACK]->(:Session)-[:HAS_TURN]->(t:Turn) "
        "RETURN count(DISTINCT t) AS n",
        {"q": qid},
    )
    assert len(docs) == expected[0]["n"]
    (mine,) = [d for d in docs if d[0] == target]
    assert mine[1] and mine[2] == target.split("#")[0] and mine[3] is None
    assert reader.read(statement, {"question_id": "no_such_question"}) == [{"docs": []}]
