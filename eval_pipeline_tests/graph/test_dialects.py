"""Dialect statements, checked without a server.

Memgraph: no Memgraph server runs here (no Docker engine), so these tests pin the statements
we send and our parsing of what Memgraph returns (SHOW INDEX INFO / SHOW CONSTRAINT INFO /
SHOW SCHEMA INFO rows in their documented shape). Whether a given Memgraph release accepts
each statement is NOT verified here: that needs a run against `memgraph/memgraph-mage`.
"""

from __future__ import annotations

import json

import neo4j.exceptions as nx
import pytest

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects import get_dialect
from eval_pipeline.graph.dialects import memgraph as mg
from eval_pipeline.graph.dialects.arcadedb import create_fulltext_sql, drop_type_sql
from eval_pipeline.graph.errors import GraphError, GraphQueryError, GraphUnavailableError


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(GraphError, match="unknown graph backend 'falkordb'"):
        get_dialect("falkordb")


def test_memgraph_index_statements() -> None:
    assert mg.create_index_statements() == [
        "CREATE INDEX ON :`Session`(`session_id`)",
        "CREATE INDEX ON :`Turn`(`turn_id`)",
        "CREATE INDEX ON :`Question`(`question_id`)",
    ]
    assert mg.create_text_index_statement() == "CREATE TEXT INDEX `turn_text` ON :`Turn`(`text`)"


def test_memgraph_drops_every_listed_index() -> None:
    rows = [
        {"index type": "label", "label": "Entity", "property": None, "count": 3},
        {"index type": "label+property", "label": "Turn", "property": "turn_id", "count": 9},
        {"index type": "label+property", "label": "Fact", "property": ["a", "b"], "count": 1},
        {"index type": "edge-type", "label": "NEXT", "property": None, "count": 8},
        {"index type": "edge-type+property", "label": "REL", "property": "w", "count": 1},
        {"index type": "text (name: turn_text)", "label": "Turn", "property": None, "count": 9},
        {"index type": "point", "label": "Place", "property": "loc", "count": 1},
    ]
    assert mg.drop_index_statements(rows) == [
        "DROP INDEX ON :`Entity`",
        "DROP INDEX ON :`Turn`(`turn_id`)",
        "DROP INDEX ON :`Fact`(`a`, `b`)",
        "DROP EDGE INDEX ON :`NEXT`",
        "DROP EDGE INDEX ON :`REL`(`w`)",
        "DROP TEXT INDEX `turn_text`",
        "DROP POINT INDEX ON :`Place`(`loc`)",
    ]


def test_memgraph_drops_every_listed_constraint() -> None:
    rows = [
        {"constraint type": "exists", "label": "Session", "properties": "session_id"},
        {"constraint type": "unique", "label": "Turn", "properties": ["turn_id"]},
        {"constraint type": "unique", "label": "Pair", "properties": ["a", "b"]},
        {
            "constraint type": "data_type",
            "label": "Turn",
            "properties": "index",
            "data_type": "INTEGER",
        },
    ]
    assert mg.drop_constraint_statements(rows) == [
        "DROP CONSTRAINT ON (n:`Session`) ASSERT EXISTS (n.`session_id`)",
        "DROP CONSTRAINT ON (n:`Turn`) ASSERT n.`turn_id` IS UNIQUE",
        "DROP CONSTRAINT ON (n:`Pair`) ASSERT n.`a`, n.`b` IS UNIQUE",
        "DROP CONSTRAINT ON (n:`Turn`) ASSERT n.`index` IS TYPED INTEGER",
    ]


def test_memgraph_text_search_escapes_operators() -> None:
    cypher, params = mg.MemgraphDialect().fulltext_search('pizza (Rome) "cheap":', 5)
    assert cypher.startswith("CALL text_search.search($index, $query, {limit: $limit})")
    assert params == {
        "index": "turn_text",
        "query": 'data.text:(pizza \\(Rome\\) \\"cheap\\"\\:)',
        "limit": 5,
    }


def test_memgraph_schema_info_parsing() -> None:
    raw = json.dumps(
        {
            "nodes": [
                {
                    "labels": ["Turn"],
                    "count": 2,
                    "properties": [
                        {"key": "text", "types": []},
                        {"key": "has_answer", "types": []},
                    ],
                },
                {"labels": ["Session"], "count": 1, "properties": [{"key": "session_id"}]},
            ],
            "edges": [{"type": "NEXT", "properties": [{"key": "holds_evidence"}]}],
        }
    )
    assert mg.parse_schema_info(raw) == {
        "labels": ["Session", "Turn"],
        "relationship_types": ["NEXT"],
        "node_keys": ["has_answer", "session_id", "text"],
        "relationship_keys": ["holds_evidence"],
    }


def test_memgraph_default_database_is_not_sent() -> None:
    d = mg.MemgraphDialect()
    assert d.session_database("eval") is None
    assert d.session_database("memgraph") is None
    assert d.session_database("tenant_a") == "tenant_a"  # Enterprise multi-tenancy


def test_memgraph_error_mapping() -> None:
    d = mg.MemgraphDialect()
    enterprise = nx.ClientError("Multi-tenancy is only available in the enterprise edition")
    assert "Enterprise-only" in str(d.map_error(enterprise, "bolt://m:7687"))
    down = d.map_error(nx.ServiceUnavailable("Couldn't connect"), "bolt://m:7687")
    assert isinstance(down, GraphUnavailableError) and "bolt://m:7687" in str(down)
    assert isinstance(d.map_error(nx.CypherSyntaxError("bad"), "x"), GraphQueryError)


def test_memgraph_keeps_maps_arcadedb_encodes_them() -> None:
    assert mg.MemgraphDialect().encode_value({"a": 1}) == {"a": 1}
    arcade = get_dialect("arcadedb")
    assert arcade.encode_value({"b": 1, "a": [1]}) == '{"a": [1], "b": 1}'
    assert arcade.encode_value([1, 2]) == [1, 2]
    assert arcade.encode_value([{"a": 1}]) == '[{"a": 1}]'


def test_arcadedb_sql() -> None:
    assert create_fulltext_sql() == [
        "CREATE VERTEX TYPE Turn IF NOT EXISTS",
        "CREATE PROPERTY Turn.text IF NOT EXISTS STRING",
        "CREATE INDEX IF NOT EXISTS ON Turn (text) FULL_TEXT",
    ]
    types = [
        {"name": "Turn", "type": "vertex"},
        {"name": "NEXT", "type": "edge"},
        {"name": "Meta", "type": "document"},
    ]
    assert drop_type_sql(types) == [
        "DROP TYPE `NEXT` IF EXISTS UNSAFE",
        "DROP TYPE `Turn` IF EXISTS UNSAFE",
        "DROP TYPE `Meta` IF EXISTS UNSAFE",
    ]


def test_session_statement_shape() -> None:
    stmt = schema.create_sessions_statement(3)
    assert stmt.count(":HAS_TURN") == 3 and stmt.count(":NEXT") == 2
    assert "has_answer" not in stmt and "holds_evidence" not in stmt
    long = schema.create_sessions_statement(schema.MAX_PATTERN_TURNS + 1)
    assert long == schema.create_sessions_generic() and "FOREACH" in long


@pytest.mark.parametrize(
    ("name", "label", "flagged"),
    [
        ("has_answer", False, True),
        ("hasAnswer", False, True),
        ("HOLDS_EVIDENCE", False, True),
        ("answer_session_ids", False, True),
        ("evidence_turn_ids", False, True),
        ("Evidence", True, True),
        ("EVIDENCE", False, False),  # a reconciler may link facts to their evidence turns
        ("text", False, False),
        ("question_id", False, False),
    ],
)
def test_evidence_names(name: str, label: bool, flagged: bool) -> None:
    assert schema.is_evidence_name(name, label=label) is flagged
