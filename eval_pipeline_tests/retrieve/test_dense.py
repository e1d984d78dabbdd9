"""`dense` and `hybrid` against the real embedded ArcadeDB and the real bundled e5 model.

Tiny graphs (the fixture set: 11 turns), so the model's ~50-250 ms a passage stays a few
seconds. The preparation step (`graph/vectors.py`) is the only writer; retrieval itself must
leave the graph's read fingerprint as it was.
"""

from __future__ import annotations

import pytest

from eval_pipeline import embed
from eval_pipeline.graph.state import graph_state
from eval_pipeline.graph.vectors import VectorSource, prepare_vectors
from eval_pipeline.retrieve.dense import DenseIndexMissing, DenseRetriever, HybridRetriever
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.fusion import reciprocal_rank_fusion
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline_tests.retrieve.fixture_graph import HAYSTACKS, QUESTIONS

# No word in common with "I finally bought a road bike in Paris, a red Trek Domane." (nor
# with any of their word forms): only meaning connects them.
PARAPHRASE = "What kind of bicycle did I purchase?"
TURNS = [VectorSource("Turn", "text", "turn_id")]


def _request(qid: str, question: str, scope: str = "question", k: int = 3) -> RetrievalRequest:
    return RetrievalRequest(
        question_id=qid,
        question=question,
        question_date=QUESTIONS[qid][1],
        scope=scope,
        top_k=k,
    )


def _turns(retriever, request: RetrievalRequest) -> list[str]:
    output = retriever.retrieve(request, RetrievalTrace())
    return [t for item in output.items for t in item.turn_ids]


@pytest.fixture
def prepared(scratch_store):
    """The fixture set with its turns embedded and indexed (what the retrieval stage does)."""
    facts = DenseRetriever.prepare_graph(scratch_store, {}, lambda _: None)
    assert facts["sources"]["Turn"]["nodes"] == 11
    return scratch_store


def test_dense_finds_a_paraphrase_fulltext_misses_and_writes_nothing(prepared):
    env = RetrievalEnv(store=prepared, backend="arcadedb")
    before = graph_state(prepared)
    lexical = _turns(FulltextRetriever(env), _request("q_bike", PARAPHRASE))
    dense = _turns(DenseRetriever(env), _request("q_bike", PARAPHRASE))
    assert "s_bike#0" not in lexical
    assert dense[0] == "s_bike#0"
    assert {t.split("#")[0] for t in dense} <= HAYSTACKS["q_bike"]
    assert graph_state(prepared).fingerprint == before.fingerprint


def test_batch_scope_asks_the_vector_index_and_sees_other_haystacks(prepared):
    env = RetrievalEnv(store=prepared, backend="arcadedb")
    retriever = DenseRetriever(env)
    trace = RetrievalTrace()
    output = retriever.retrieve(_request("q_bike", PARAPHRASE, scope="batch", k=5), trace)
    turns = [t for item in output.items for t in item.turn_ids]
    assert turns[0] == "s_bike#0"
    assert "s_bakery#0" in turns, "the bakery ride is outside q_bike's haystack, not the batch's"
    (query,) = trace.queries
    assert "db.index.vector.queryNodes" in query.query
    # The record names the vector, it does not carry its 384 floats.
    assert query.params["vector"] == "query embedding (384 dims)"
    pins = retriever.pins()
    assert pins["embedder"]["sha256"] == embed.identity()["sha256"]
    assert pins["sources"] == ["turn"]


def test_hybrid_ranks_by_reciprocal_rank_fusion_of_the_two(prepared):
    env = RetrievalEnv(store=prepared, backend="arcadedb")
    question = QUESTIONS["q_bike"][0]
    request = _request("q_bike", question, k=4)
    deep = _request("q_bike", question, k=50)
    lexical = _turns(FulltextRetriever(env), deep)
    dense = _turns(DenseRetriever(env), deep)
    expected = [t for t, _ in reciprocal_rank_fusion([lexical, dense], key=str, k=60)][:4]
    hybrid = HybridRetriever(env)
    assert _turns(hybrid, request) == expected
    # Where lexical search finds nothing, the fusion is the dense ranking.
    assert _turns(hybrid, _request("q_bike", PARAPHRASE)) == _turns(
        DenseRetriever(env), _request("q_bike", PARAPHRASE)
    )
    assert hybrid.pins()["fusion"] == {"method": "reciprocal rank fusion", "k": 60, "depth": 50}


def test_dense_refuses_a_graph_without_its_index_in_one_line(fixture_store):
    env = RetrievalEnv(store=fixture_store, backend="arcadedb")
    retriever = DenseRetriever(env)  # building it touches no graph (the preflight does this)
    with pytest.raises(DenseIndexMissing) as err:
        retriever.check_graph()
    message = str(err.value)
    assert "\n" not in message
    assert "Turn.embedding" in message and "no vector index" in message
    with pytest.raises(DenseIndexMissing):
        HybridRetriever(env).check_graph()


def test_preparation_embeds_each_text_once_then_keeps_or_reuses_it(scratch_store, tmp_path):
    seen: list[str] = []

    def counting(texts: list[str]):
        seen.extend(texts)
        return embed.embed_passages(texts)

    cache = embed.PassageCache(tmp_path / "cache.sqlite")
    first = prepare_vectors(scratch_store, TURNS, cache=cache, embedder=counting)
    assert first["sources"]["Turn"]["embedded"] == 11 and len(seen) == 11
    again = prepare_vectors(scratch_store, TURNS, cache=cache, embedder=counting)
    assert again["sources"]["Turn"] == {**again["sources"]["Turn"], "kept": 11, "embedded": 0}
    assert len(seen) == 11, "a current embedding is kept, not recomputed"
    # Keys gone (as in a graph rebuilt from the same fixtures): the cache answers.
    scratch_store.write("MATCH (t:Turn) REMOVE t.embedding_key")
    rebuilt = prepare_vectors(scratch_store, TURNS, cache=cache, embedder=counting)
    assert rebuilt["sources"]["Turn"]["from_cache"] == 11 and len(seen) == 11
    # A changed text is embedded again.
    scratch_store.write("MATCH (t:Turn {turn_id: 's_bike#0'}) SET t.text = 'I sold my bike.'")
    changed = prepare_vectors(scratch_store, TURNS, cache=cache, embedder=counting)
    assert changed["sources"]["Turn"]["embedded"] == 1 and seen[-1] == "I sold my bike."
    cache.close()


def test_fusion_order_on_a_hand_made_case():
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63.
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], key=str, k=60)
    assert [x for x, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    # Equal fused scores: the better best rank, then the earlier ranking, decides.
    assert [x for x, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]], key=str)] == [
        "x",
        "y",
    ]
    # One listed twice in a ranking counts once, at its better rank.
    twice = dict(reciprocal_rank_fusion([["a", "a", "b"]], key=str, k=0))
    assert twice == {"a": 1.0, "b": 0.5}
