"""Dialect statements, checked without a server.

Memgraph: no Memgraph server runs here (no Docker engine), so these tests pin the statements
we send and our parsing of what Memgraph returns (SHOW INDEX INFO / SHOW CONSTRAINT INFO /
SHOW TRIGGERS / SHOW SCHEMA INFO rows in the shape its source and docs give). Whether a given
Memgraph release accepts each statement is NOT verified here: that needs a run against
`memgraph/memgraph-mage`.
"""

from __future__ import annotations

import json

import neo4j.exceptions as nx
import pytest

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects import get_dialect
from eval_pipeline.graph.dialects import memgraph as mg
from eval_pipeline.graph.dialects.arcadedb import (
    create_fulltext_sql,
    drop_type_sql,
    inventory_from_types,
)
from eval_pipeline.graph.dialects.base import KEPT_LABELS, Inventory
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


# --- inventories: what "empty" and "written since" compare --------------------------------

# Rows in the shapes Memgraph returns them, as read from its source (src/query/interpreter.cpp:
# SHOW INDEX INFO `index type, label, property, count`; SHOW CONSTRAINT INFO `constraint
# type, label, properties, data_type`; SHOW TRIGGERS `trigger name, statement, event type,
# phase, owner`) and its e2e tests. NOT checked against a running Memgraph here.
MG_INDEX_ROWS = [
    {"index type": "edge-property", "label": None, "property": "weight", "count": 1},
    {"index type": "edge-type", "label": "NEXT", "property": None, "count": 8},
    {"index type": "edge-type+property", "label": "REL", "property": "w", "count": 1},
    {
        "index type": "edge-type_text (name: relation_index)",
        "label": "RELATES_TO",
        "property": ["title", "content"],
        "count": 1,
    },
    {"index type": "label", "label": "Entity", "property": None, "count": 3},
    {"index type": "label+property", "label": "Turn", "property": ["turn_id"], "count": 9},
    {"index type": "label+property", "label": "Pair", "property": ["a", "b"], "count": 2},
    {"index type": "label+property_vector", "label": "Doc", "property": "emb", "count": 0},
    {"index type": "label_text (name: turn_text)", "label": "Turn", "property": [], "count": 9},
    {"index type": "point", "label": "Place", "property": "loc", "count": 1},
]
MG_CONSTRAINT_ROWS = [
    {"constraint type": "exists", "label": "Session", "properties": "session_id", "data_type": ""},
    {"constraint type": "unique", "label": "Entity", "properties": ["key"], "data_type": ""},
    {
        "constraint type": "data_type",
        "label": "Turn",
        "properties": "index",
        "data_type": "INTEGER",
    },
]
MG_TRIGGER_ROWS = [
    {
        "trigger name": "audit",
        "statement": "UNWIND createdVertices AS v CREATE (:Log)",
        "event type": "() CREATE",
        "phase": "AFTER COMMIT",
        "owner": None,
    }
]


def test_memgraph_drops_current_index_shapes() -> None:
    assert mg.drop_index_statements(MG_INDEX_ROWS) == [
        "DROP GLOBAL EDGE INDEX ON :(`weight`)",
        "DROP EDGE INDEX ON :`NEXT`",
        "DROP EDGE INDEX ON :`REL`(`w`)",
        "DROP TEXT INDEX `relation_index`",
        "DROP INDEX ON :`Entity`",
        "DROP INDEX ON :`Turn`(`turn_id`)",
        "DROP INDEX ON :`Pair`(`a`, `b`)",
        # the vector row carries no name: left out (the pipeline creates none)
        "DROP TEXT INDEX `turn_text`",
        "DROP POINT INDEX ON :`Place`(`loc`)",
    ]
    assert mg.drop_trigger_statements(MG_TRIGGER_ROWS) == ["DROP TRIGGER `audit`"]


def test_memgraph_inventory_names_every_index_constraint_and_trigger() -> None:
    counted = Inventory(complete=False, nodes=2, labels={"Customer": 2})
    inv = mg.inventory_from_rows(counted, MG_INDEX_ROWS, MG_CONSTRAINT_ROWS, MG_TRIGGER_ROWS)
    assert inv.complete and inv.nodes == 2
    assert "label_text (name: turn_text) :Turn" in inv.indexes
    assert "label+property :Pair(a, b)" in inv.indexes
    assert "edge-property (weight)" in inv.indexes
    assert len(inv.indexes) == len(MG_INDEX_ROWS)
    assert inv.constraints == [
        "data_type :Turn(index) INTEGER",
        "exists :Session(session_id)",
        "unique :Entity(key)",
    ]
    assert inv.triggers == ["audit"]
    # A changing index count is not a new index.
    recounted = [{**r, "count": 99} for r in MG_INDEX_ROWS]
    again = mg.inventory_from_rows(counted, recounted, MG_CONSTRAINT_ROWS, MG_TRIGGER_ROWS)
    assert again.added_since(inv).is_empty()


class FakeMemgraph:
    """Answers the dialect's statements with canned rows and records what it was sent."""

    def __init__(self, nodes: dict[str, int], triggers: list[dict] | None = None) -> None:
        self.nodes = nodes
        self.triggers = triggers or []
        self.sent: list[str] = []

    def read(self, query: str, params=None, **kw) -> list[dict]:
        if "UNWIND labels(n)" in query:
            return [{"label": k, "n": v} for k, v in self.nodes.items()]
        if "MATCH (n) RETURN count(n)" in query:
            return [{"n": sum(self.nodes.values())}]
        return []  # no relationships

    def autocommit(self, query: str, params=None) -> list[dict]:
        self.sent.append(query)
        return {
            "SHOW INDEX INFO": [],
            "SHOW CONSTRAINT INFO": [],
            "SHOW TRIGGERS": self.triggers,
        }.get(query, [])

    def write(self, query: str, params=None) -> list[dict]:
        self.sent.append(query)
        return [{"deleted": 0}]


def test_memgraph_emptiness_ignores_only_our_lease_and_claim() -> None:
    d = mg.MemgraphDialect()
    ours = FakeMemgraph({schema.LEASE: 1, schema.CLAIM: 1})
    assert d.inventory(ours).without(KEPT_LABELS).is_empty()
    only_a_trigger = FakeMemgraph({schema.LEASE: 1}, triggers=MG_TRIGGER_ROWS)
    found = d.inventory(only_a_trigger).without(KEPT_LABELS)
    assert not found.is_empty() and found.describe() == "1 trigger (audit)"


def test_memgraph_wipe_drops_triggers_first_and_keeps_lease_and_claim() -> None:
    fake = FakeMemgraph({}, triggers=MG_TRIGGER_ROWS)
    mg.MemgraphDialect().wipe(fake)  # type: ignore[arg-type]
    assert fake.sent[:2] == ["SHOW TRIGGERS", "DROP TRIGGER `audit`"]
    delete = next(q for q in fake.sent if "DETACH DELETE" in q)
    assert f"NOT n:`{schema.LEASE}`" in delete and f"NOT n:`{schema.CLAIM}`" in delete
    assert fake.sent.index(delete) < fake.sent.index("SHOW INDEX INFO")


def test_arcadedb_inventory_from_schema_types() -> None:
    # Rows as `SELECT name, type, records, indexes FROM schema:types` returns them (26.10.x).
    rows = [
        {"name": "Invoice", "type": "document", "records": 3, "indexes": []},
        {
            "name": "Turn",
            "type": "vertex",
            "records": 4,
            "indexes": [{"name": "Turn[turn_id]", "typeName": "Turn", "unique": False}],
        },
        {"name": "NEXT", "type": "edge", "records": 2, "indexes": []},
        {"name": "Empty", "type": "vertex", "records": 0, "indexes": []},
        {"name": schema.LEASE, "type": "vertex", "records": 1, "indexes": []},
    ]
    inv = inventory_from_types(rows)
    assert (inv.nodes, inv.relationships, inv.documents) == (5, 2, {"Invoice": 3})
    assert inv.indexes == ["Turn[turn_id]"]
    ours = inv.without(KEPT_LABELS)
    assert ours.nodes == 4 and schema.LEASE not in ours.types
    assert ours.describe() == (
        "4 nodes of type Turn, 2 relationships of type NEXT, 3 document records of type "
        "Invoice, 1 type (Empty) and 1 index (Turn[turn_id])"
    )


def test_arcadedb_wipe_keeps_lease_and_claim_types_but_not_their_indexes() -> None:
    types = [
        {"name": "Turn", "type": "vertex"},
        {"name": schema.CLAIM, "type": "vertex", "indexes": [{"name": f"{schema.CLAIM}[x]"}]},
        {"name": schema.LEASE, "type": "vertex", "indexes": []},
    ]
    assert drop_type_sql(types) == [
        "DROP TYPE `Turn` IF EXISTS UNSAFE",
        f"DROP INDEX `{schema.CLAIM}[x]` IF EXISTS",
    ]


def test_inventory_growth_and_what_counts_as_empty() -> None:
    before = Inventory(nodes=10, labels={"Turn": 10}, indexes=["Turn[turn_id]"], types=["Turn"])
    now = Inventory(
        nodes=9,  # one of ours deleted: not someone else's data
        labels={"Turn": 6, "Customer": 3},
        relationships=1,
        relationship_types={"OWNS": 1},
        indexes=["Customer[id]", "Turn[turn_id]"],
        types=["Customer", "OWNS", "Turn"],
    )
    added = now.added_since(before)
    assert added.nodes == 3 and added.labels == {"Customer": 3}
    assert added.describe() == (
        "3 nodes of type Customer, 1 relationship of type OWNS and 1 index (Customer[id])"
    )
    assert added.items() == 5
    assert now.added_since(now).is_empty()
    # Our bookkeeping types, empty, do not make an unclaimed instance someone's data...
    idle = Inventory(types=[schema.FINGERPRINT, schema.MEMORY], labels={schema.MEMORY: 0})
    assert idle.without((), empty_types=schema.BOOKKEEPING_LABELS).is_empty()
    # ...but a record in them does.
    held = Inventory(nodes=1, labels={schema.MEMORY: 1}, types=[schema.MEMORY])
    assert not held.without((), empty_types=schema.BOOKKEEPING_LABELS).is_empty()
