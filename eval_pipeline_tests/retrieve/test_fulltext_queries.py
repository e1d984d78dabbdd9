"""Full-text retrieval statements per backend, checked without a server.

The backend-specific part of each statement (the CALL clause, its parameters, index names and
discovery) is the graph dialect's; Memgraph's forms and the output rows they read are checked,
with their sources quoted, in eval_pipeline_tests/graph/test_memgraph_statements.py. ArcadeDB's
rows here are those of its Cypher `SHOW INDEXES` on 26.10.x (probed; the conformance suite
runs the same statements against the embedded server)."""

from __future__ import annotations

import pytest

from eval_pipeline.graph.dialects import get_dialect
from eval_pipeline.graph.dialects.arcadedb import text_indexes_from_rows
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.readonly_guard import check_read_only

TURN, CHUNK, FACT, EPISODE = ftq.SOURCE_KINDS


@pytest.mark.parametrize("backend", ftq.BACKENDS)
@pytest.mark.parametrize("source", ftq.SOURCE_KINDS, ids=ftq.KINDS)
@pytest.mark.parametrize("scoped", [True, False])
def test_every_search_statement_passes_the_read_only_guard(backend, source, scoped):
    statement = ftq.search_statement(get_dialect(backend), source, scoped=scoped)
    check_read_only(statement)
    assert ("$haystack" in statement) is scoped
    assert "LIMIT $k" in statement


def test_arcadedb_statement_and_params():
    dialect = get_dialect("arcadedb")
    statement = ftq.search_statement(dialect, TURN, scoped=True)
    assert statement.startswith("CALL db.index.fulltext.queryNodes($index, $query)")
    params = ftq.search_params(dialect, ftq.turn_source("arcadedb"), "red OR bike", 5, ["s1"])
    assert params == {"index": "Turn[text]", "query": "red OR bike", "k": 5, "haystack": ["s1"]}


def test_memgraph_statement_and_params_at_the_pinned_release():
    dialect = get_dialect("memgraph")
    statement = ftq.search_statement(dialect, EPISODE, scoped=False)
    assert "text_search.search($index, $query, $fetch) YIELD node, score" in statement
    assert "[:COVERS]" in statement and "node.summary AS text" in statement
    source = ftq.FulltextSource(EPISODE, "episode_summary")
    params = ftq.search_params(dialect, source, "red OR bike", 5, None)
    assert params == {
        "index": "episode_summary",
        "query": "data.summary:(red OR bike)",
        "fetch": ftq.FETCH_LIMIT,
        "k": 5,
    }
    assert ftq.turn_source("memgraph").index == "turn_text"


def test_the_store_dialect_is_used_when_it_is_of_the_backend():
    from eval_pipeline.graph.dialects.memgraph import MemgraphDialect

    class Store:
        dialect = MemgraphDialect((3, 5, 0))

    assert ftq.dialect_for("memgraph", Store()) is Store.dialect
    assert ftq.dialect_for("arcadedb", Store()).name == "arcadedb"


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="no full-text query for backend 'neo5'"):
        ftq.dialect_for("neo5")


def test_arcadedb_index_discovery_from_show_indexes():
    rows = [
        {
            "name": "Turn[text]",
            "type": "FULLTEXT",
            "labelsOrTypes": ["Turn"],
            "properties": ["text"],
        },
        {
            "name": "Turn[turn_id]",
            "type": "LSM_TREE",
            "labelsOrTypes": ["Turn"],
            "properties": ["turn_id"],
        },
        {
            "name": "Chunk[text]",
            "type": "FULL_TEXT",
            "labelsOrTypes": ["Chunk"],
            "properties": ["text"],
        },
        {
            "name": "Episode[summary]",
            "type": "FULLTEXT",
            "labelsOrTypes": ["Episode"],
            "properties": ["summary"],
        },
    ]
    found = ftq.sources_from_indexes(text_indexes_from_rows(rows))
    assert [(s.source.kind, s.index) for s in found] == [
        ("turn", "Turn[text]"),
        ("chunk", "Chunk[text]"),
        ("episode", "Episode[summary]"),
    ]
