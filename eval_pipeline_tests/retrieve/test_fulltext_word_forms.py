"""`fulltext` matches word forms, against the real embedded ArcadeDB (issue 11 §6).

The index analyzer does not stem, so before query-side expansion a question about "marathons"
found nothing in a haystack that says "marathon". A database of its own on the shared server,
injected like the fixture set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import write_jsonl
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline.retrieve.terms import MAX_FORMS_PER_WORD, STEMMER
from eval_pipeline_tests.retrieve.fixture_graph import _session


def _search_query(trace: RetrievalTrace) -> str:
    """The full-text query string of the last engine search (a bounded search is followed by
    the read of its picked rows, issue 18); asked of `ranking="engine"` retrievals."""
    return [q for q in trace.queries if "query" in q.params][-1].params["query"]


QID = "q_forms"

SESSIONS = [
    _session(
        "s_marathon",
        "2023/05/20 (Sat) 10:00",
        "2023-05-20T10:00:00",
        [QID],
        [
            ("user", "I ran my first marathon in May"),
            ("assistant", "Well done, that is a big achievement."),
        ],
    ),
    _session(
        "s_trips",
        "2023/05/21 (Sun) 09:30",
        "2023-05-21T09:30:00",
        [QID],
        [
            ("user", "Last spring I visited the city of Porto with my sister."),
            ("assistant", "Porto is lovely in spring."),
            ("user", "We hiked up the Serra da Estrela too."),
        ],
    ),
    _session(
        "s_other",
        "2023/05/22 (Mon) 18:00",
        "2023-05-22T18:00:00",
        [QID],
        [
            ("user", "Can you suggest a pasta recipe for tonight?"),
            ("assistant", "Try aglio e olio with garlic and parsley."),
            ("user", "Yesterday we toured two museums."),
        ],
    ),
]


@pytest.fixture(scope="module")
def forms_store(
    arcadedb_dir: Path, fixture_store: GraphStore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GraphStore]:
    """Its own database on the session's server (fixture_store has started it)."""
    path = tmp_path_factory.mktemp("word_forms") / "fixtures.jsonl"
    write_jsonl(path, (s.model_dump() for s in SESSIONS))
    store = GraphStore(data_dir=str(arcadedb_dir), database="wordforms", heap="512m")
    inject_fixtures(store, path)
    yield store
    store.close()


def _retrieve(store: GraphStore, question: str, **options):
    retriever = FulltextRetriever(RetrievalEnv(store=store, backend="arcadedb"), **options)
    trace = RetrievalTrace()
    request = RetrievalRequest(
        question_id=QID, question=question, question_date="2023/06/01 (Thu) 12:00", top_k=5
    )
    return retriever.retrieve(request, trace), trace, retriever


def test_marathons_finds_the_turn_that_says_marathon(forms_store):
    output, trace, _ = _retrieve(forms_store, "How many marathons did I run?")
    assert output.items, _search_query(trace)
    assert output.items[0].turn_ids == ["s_marathon#0"]
    assert output.items[0].text == "I ran my first marathon in May"


@pytest.mark.parametrize(
    ("question", "turn"),
    [
        ("Which marathon did I run first?", "s_marathon#0"),  # singular still finds singular
        ("Which museum did I see?", "s_other#2"),  # singular finds plural
        ("Which cities did I visit?", "s_trips#0"),  # -ies finds -y, visit finds visited
        ("Where did I go hiking?", "s_trips#2"),  # -ing finds -ed
    ],
)
def test_other_word_forms_find_their_turn(forms_store, question, turn):
    output, trace, _ = _retrieve(forms_store, question)
    assert output.items, _search_query(trace)
    assert output.items[0].turn_ids == [turn]


def test_without_stemming_the_bare_words_find_nothing_and_the_pins_say_so(forms_store):
    """The version-1 query, kept behind `stemming=False`: the mismatch the expansion fixes."""
    bare, trace, retriever = _retrieve(
        forms_store, "How many marathons did I run?", stemming=False, ranking="engine"
    )
    assert _search_query(trace) == "marathons OR run"
    assert bare.items == []
    assert retriever.pins()["query_expansion"] is None

    _, trace, retriever = _retrieve(forms_store, "How many marathons did I run?", ranking="engine")
    query = _search_query(trace)
    assert query.startswith("marathons OR marathon OR ") and " OR running" in query
    pins = retriever.pins()
    assert pins["version"] == FulltextRetriever.version
    assert pins["query_expansion"]["stemmer"] == STEMMER
    assert pins["query_expansion"]["package"].startswith("snowballstemmer==")
    assert pins["query_expansion"]["max_forms_per_word"] == MAX_FORMS_PER_WORD


def test_max_forms_per_word_bounds_the_query(forms_store):
    _, trace, _ = _retrieve(
        forms_store, "How many marathons did I run?", max_forms_per_word=2, ranking="engine"
    )
    assert _search_query(trace) == "marathons OR marathon OR run OR runs"
    with pytest.raises(ValueError, match="max_forms_per_word"):
        FulltextRetriever(RetrievalEnv(store=forms_store), max_forms_per_word=0)


def test_memgraph_gets_the_same_expanded_disjunction_inside_its_field_query():
    """Dialect-neutral: the expansion is plain terms, so Memgraph's Tantivy query carries the
    same word forms (no server here; the statement form is the dialect's)."""
    from eval_pipeline.retrieve import fulltext_queries as ftq
    from eval_pipeline.retrieve.terms import content_terms, expand_terms, or_query

    query = or_query(expand_terms(content_terms("How many marathons did I run?")))
    dialect = ftq.dialect_for("memgraph")
    params = ftq.search_params(dialect, ftq.turn_source("memgraph"), query, 5, None)
    assert params["query"] == f"data.text:({query})"
    assert "marathon" in params["query"].removeprefix("data.text:(").rstrip(")").split(" OR ")
