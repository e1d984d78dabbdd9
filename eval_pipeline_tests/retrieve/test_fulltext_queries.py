"""Full-text statements per backend, checked without a server (no Memgraph here: the Memgraph
forms follow its documented `text_search.search` and the graph dialect's index name)."""

from __future__ import annotations

import pytest

from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.readonly_guard import check_read_only

TURN, CHUNK, FACT, EPISODE = ftq.SOURCE_KINDS


@pytest.mark.parametrize("backend", ftq.BACKENDS)
@pytest.mark.parametrize("source", ftq.SOURCE_KINDS, ids=ftq.KINDS)
@pytest.mark.parametrize("scoped", [True, False])
def test_every_search_statement_passes_the_read_only_guard(backend, source, scoped):
    statement = ftq.search_statement(backend, source, scoped=scoped)
    check_read_only(statement)
    assert ("$haystack" in statement) is scoped
    assert "LIMIT $k" in statement


def test_arcadedb_statement_and_params():
    statement = ftq.search_statement("arcadedb", TURN, scoped=True)
    assert statement.startswith("CALL db.index.fulltext.queryNodes($index, $query)")
    params = ftq.search_params("arcadedb", ftq.turn_source("arcadedb"), "red OR bike", 5, ["s1"])
    assert params == {"index": "Turn[text]", "query": "red OR bike", "k": 5, "haystack": ["s1"]}


def test_memgraph_statement_and_params():
    statement = ftq.search_statement("memgraph", EPISODE, scoped=False)
    assert "text_search.search($index, $query, {limit: $fetch})" in statement
    assert "[:COVERS]" in statement and "node.summary AS text" in statement
    source = ftq.FulltextSource(EPISODE, "episode_summary")
    params = ftq.search_params("memgraph", source, "red OR bike", 5, None)
    assert params["query"] == "data.summary:(red OR bike)"
    assert params["index"] == "episode_summary" and params["fetch"] == ftq.MEMGRAPH_FETCH_LIMIT
    assert ftq.turn_source("memgraph").index == "turn_text"


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="no full-text query for backend 'neo5'"):
        ftq.search_statement("neo5", TURN, scoped=False)


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
    found = ftq.sources_from_arcadedb(rows)
    assert [(s.source.kind, s.index) for s in found] == [
        ("turn", "Turn[text]"),
        ("chunk", "Chunk[text]"),
        ("episode", "Episode[summary]"),
    ]


def test_memgraph_index_discovery_from_show_index_info():
    rows = [
        {"index type": "label+property", "label": "Turn", "property": ["turn_id"], "count": 9},
        {"index type": "text (name: turn_text)", "label": "Turn", "property": ["text"]},
        {"index type": "text (name: facts)", "label": "Fact", "property": None},
    ]
    found = ftq.sources_from_memgraph(rows)
    assert [(s.source.kind, s.index) for s in found] == [("turn", "turn_text"), ("fact", "facts")]
