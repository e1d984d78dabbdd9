"""Bounded full-text search (issue 18): the same rows as the unbounded statement, whether the
first fetch decides the top k, a wider one does, or the search falls back to the unbounded
statement; on the embedded ArcadeDB, over a reconciled graph (turns, chunks, episodes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile import reconcile_pending
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv
from eval_pipeline.retrieve.readonly_guard import check_read_only
from eval_pipeline.retrieve.terms import or_query
from eval_pipeline_tests.conftest import HEAP, fresh_database

QUERIES = [
    "bike",
    "road OR bike OR trek",
    "golden OR retriever OR walks OR park",
    "pasta OR garlic OR bike OR dog OR golden OR the",
    "nothingmatchesthis",
]


@pytest.fixture(scope="module")
def reconciled(arcadedb_dir: Path, fixtures_file: Path) -> Iterator[GraphStore]:
    """The fixture set injected and reconciled once, in a database of this module's own on
    the session's server: the tests only read it."""
    store = GraphStore(data_dir=str(arcadedb_dir), database=fresh_database("bounded"), heap=HEAP)
    inject_fixtures(store, fixtures_file)
    report = reconcile_pending(store, ExtractiveReconciler(), concurrency=1)
    assert report.done > 0
    yield store
    store.close()


def _read(store: GraphStore, log: list[str]):
    def read(statement: str, params: dict, max_rows: int) -> list[dict]:
        log.append(statement)
        return store.read(statement, params, max_rows=max_rows)

    return read


@pytest.mark.parametrize(("first", "growth"), [(1, 2), (2, 3), (ftq.FIRST_FETCH, 4)])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_bounded_search_gives_the_unbounded_rows(
    reconciled: GraphStore, monkeypatch: pytest.MonkeyPatch, first: int, growth: int, k: int
):
    monkeypatch.setattr(ftq, "FIRST_FETCH", first)
    monkeypatch.setattr(ftq, "FETCH_GROWTH", growth)
    # Turns asked for by name: extractive memory does not declare the transcript searchable.
    retriever = FulltextRetriever(
        RetrievalEnv(store=reconciled, backend="arcadedb"), sources=["turn", "chunk", "episode"]
    )
    sources = retriever.sources()
    assert {s.source.kind for s in sources} >= {"turn", "chunk"}
    haystack = retriever.haystack("q_bike", None)
    log: list[str] = []
    nonempty = 0
    for source in sources:
        for query in QUERIES:
            for scope in (haystack, None):
                scoped = scope is not None
                params = ftq.search_params(reconciled.dialect, source, query, k, scope)
                expected = reconciled.read(
                    ftq.search_statement(reconciled.dialect, source.source, scoped=scoped),
                    params,
                    max_rows=k,
                )
                got = ftq.search(
                    _read(reconciled, log), reconciled.dialect, source, query, k, scope
                )
                assert got == expected, (source.source.kind, query, scoped)
                nonempty += bool(got)
    assert nonempty > 0
    # Small fetches must have widened and, past the cap, fallen back at least once, or
    # decided from the first fetch: every path was taken by some case.
    bounded = sum("{limit: $fetch}" in s for s in log)
    assert bounded > 0


def test_exact_top_decides_only_when_no_unfetched_hit_can_matter():
    row = {"fetched": 3, "floor": 1.0, "inside": [["b", 2.0], ["a", 2.0], ["c", 1.0]]}
    # Fewer hits than asked for: every hit was seen.
    assert ftq.exact_top(row, 2, fetch=4) == [{"id": "a", "score": 2.0}, {"id": "b", "score": 2.0}]
    # All fetched: the 2nd in scope (2.0) is above the floor (1.0), so decided.
    assert ftq.exact_top(row, 2, fetch=3) is not None
    # The 3rd in scope sits on the floor: an unfetched hit could tie with it.
    assert ftq.exact_top(row, 3, fetch=3) is None
    # Not enough hits in scope among those fetched.
    assert ftq.exact_top({**row, "inside": [["a", 2.0]]}, 2, fetch=3) is None


@pytest.mark.parametrize("source", ftq.SOURCE_KINDS, ids=ftq.KINDS)
@pytest.mark.parametrize("scoped", [True, False])
def test_bounded_statements_pass_the_read_only_guard(source, scoped):
    from eval_pipeline.graph.dialects import get_dialect

    dialect = get_dialect("arcadedb")
    statement = ftq.candidates_statement(dialect, source, scoped=scoped)
    assert statement is not None and "{limit: $fetch}" in statement
    check_read_only(statement)
    check_read_only(ftq.picked_statement(source))
    # Memgraph has no bounded call here: its searches stay unbounded.
    assert ftq.candidates_statement(get_dialect("memgraph"), source, scoped=scoped) is None
    assert or_query(["a"]) == "a"
