"""Dialect statements, checked without a server: ArcadeDB's SQL and inventories, the
portable parts, and the one table of differences. Memgraph's statements and the shapes of its
answers, each quoted with its source, are in test_memgraph_statements.py."""

from __future__ import annotations

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


def test_every_difference_is_a_dialect_method() -> None:
    """One table (dialects.DIFFERENCES) names each difference and the method that decides it;
    both backends answer each of them."""
    from eval_pipeline.graph.dialects import DIALECTS, DIFFERENCES, Dialect

    assert len({d.concern for d in DIFFERENCES}) == len(DIFFERENCES)
    for difference in DIFFERENCES:
        for method in (m.strip() for m in difference.method.split("/")):
            assert callable(getattr(Dialect, method, None)), method
            for cls in DIALECTS.values():
                assert callable(getattr(cls, method, None)), (cls.__name__, method)


def test_the_docs_table_is_the_differences_table() -> None:
    from pathlib import Path

    from eval_pipeline.graph.dialects import DIFFERENCES

    doc = Path(__file__).resolve().parents[2] / "docs" / "graph-backends.md"
    text = doc.read_text(encoding="utf-8")
    for d in DIFFERENCES:
        row = f"| {d.concern} | `{d.method}` | {d.arcadedb} | {d.memgraph} |"
        assert row in text, row


def test_arcadedb_wipe_sql_for_triggers_views_and_constrained_properties() -> None:
    # Rows as 26.10.x returns them (probed): `SELECT FROM schema:triggers`,
    # `SELECT name FROM schema:materializedViews`, a type's `properties`.
    from eval_pipeline.graph.dialects.arcadedb import drop_trigger_sql, drop_view_sql

    triggers = [
        {"name": "audit_t", "typeName": "Audit", "timing": "AFTER", "event": "CREATE"},
        {"name": "we ird", "typeName": "AuditLog", "timing": "AFTER", "event": "CREATE"},
    ]
    assert drop_trigger_sql(triggers) == [
        "DROP TRIGGER IF EXISTS `audit_t`",
        "DROP TRIGGER IF EXISTS `we ird`",
    ]
    assert drop_view_sql([{"name": "mv"}]) == ["DROP MATERIALIZED VIEW IF EXISTS `mv`"]
    rows = [
        {
            "name": "Strict",
            "type": "vertex",
            "records": 0,
            "indexes": [],
            "properties": [
                {"id": 6, "name": "p", "type": "STRING", "mandatory": True, "custom": {}},
                {"id": 7, "name": "q", "type": "STRING", "custom": {}},
            ],
        }
    ]
    assert inventory_from_types(rows).constraints == ["Strict.p mandatory"]
