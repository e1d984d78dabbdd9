"""The content fingerprint covers the schema too (issue 13): a type or an index created during
retrieval is a write, and reading leaves the fingerprint as it was."""

from __future__ import annotations

from typing import Any

from eval_pipeline.graph.dialects.memgraph import MemgraphDialect
from eval_pipeline.graph.state import graph_state, schema_state
from eval_pipeline.graph.store import GraphStore


def _http(store: GraphStore):
    http = store.http()
    assert http is not None, "the embedded server has an HTTP API"
    return http


def test_reads_leave_the_fingerprint_unchanged(scratch_store: GraphStore):
    before = graph_state(scratch_store)
    scratch_store.read("MATCH (t:Turn) RETURN t.text AS text LIMIT 5")
    scratch_store.read("SHOW INDEXES")
    scratch_store.fulltext_search("bike", limit=3)
    _http(scratch_store).sql(scratch_store.database, "SELECT FROM schema:types")
    after = graph_state(scratch_store)
    assert after.fingerprint == before.fingerprint
    assert after.schema_fingerprint == before.schema_fingerprint


def test_an_index_created_between_two_fingerprints_changes_it(scratch_store: GraphStore):
    before = graph_state(scratch_store)
    scratch_store.autocommit("CREATE INDEX IF NOT EXISTS FOR (n:Session) ON (n.date)")
    after = graph_state(scratch_store)
    assert after.fingerprint != before.fingerprint
    assert after.schema_fingerprint != before.schema_fingerprint
    assert (after.nodes, after.relationships) == (before.nodes, before.relationships)


def test_a_document_type_created_between_two_fingerprints_changes_it(scratch_store: GraphStore):
    """Document types (and their records) are invisible to Cypher: SQL over HTTP sees them."""
    http = _http(scratch_store)
    db = scratch_store.database
    states = [graph_state(scratch_store)]
    for command in (
        "CREATE DOCUMENT TYPE Invoice",
        "CREATE PROPERTY Invoice.n INTEGER",
        "CREATE INDEX ON Invoice (n) NOTUNIQUE",
        "ALTER PROPERTY Invoice.n MANDATORY true",
        "INSERT INTO Invoice SET n = 1",
        "CREATE VERTEX TYPE Empty",
        "CREATE EDGE TYPE NEVER_USED",
    ):
        http.sql(db, command)
        states.append(graph_state(scratch_store))
        assert states[-1].fingerprint != states[-2].fingerprint, command
    assert {(s.nodes, s.relationships) for s in states} == {
        (states[0].nodes, states[0].relationships)
    }
    assert any(t["name"] == "Invoice" for t in schema_state(scratch_store)["types"])


class _NoHttp:
    """The store as an ArcadeDB reader without an HTTP API (an external server, no URL)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.dialect = store.dialect
        self.database = store.database

    def http(self) -> None:
        return None

    def read(self, query: str, params: Any = None, **kwargs: Any) -> list[dict]:
        return self.store.read(query, params, **kwargs)


def test_without_http_cypher_still_sees_indexes_and_types(scratch_store: GraphStore):
    reader = _NoHttp(scratch_store)
    before = graph_state(reader)  # type: ignore[arg-type]
    scratch_store.read("SHOW INDEXES")
    assert graph_state(reader).fingerprint == before.fingerprint  # type: ignore[arg-type]
    assert "indexes" in schema_state(reader) and "types" not in schema_state(reader)
    scratch_store.autocommit("CREATE INDEX IF NOT EXISTS FOR (n:Question) ON (n.kind)")
    after = graph_state(reader)  # type: ignore[arg-type]
    assert after.schema_fingerprint != before.schema_fingerprint
    _http(scratch_store).sql(scratch_store.database, "CREATE VERTEX TYPE Unused")
    assert graph_state(reader).fingerprint != after.fingerprint  # type: ignore[arg-type]


def test_a_schema_source_can_be_given(scratch_store: GraphStore):
    one = graph_state(scratch_store, schema=lambda: {"indexes": ["a"]})
    two = graph_state(scratch_store, schema=lambda: {"indexes": ["a", "b"]})
    assert one.fingerprint != two.fingerprint
    assert one.schema_fingerprint != two.schema_fingerprint


class _MemgraphLike:
    """Content reads answer nothing; SHOW ... INFO answers `rows` (auto-commit only). The
    SHOW INDEX INFO row is one of Memgraph's own e2e test rows (memgraph/memgraph
    tests/e2e/durability/durability_with_text_index.py: header `index type, label, property,
    count`; see eval_pipeline_tests/graph/test_memgraph_statements.py [IDX])."""

    dialect = MemgraphDialect((3, 10, 1))

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {
            "SHOW INDEX INFO": [
                {
                    "index type": "label_text (name: document_index)",
                    "label": "Document",
                    "property": [],
                    "count": 2,
                }
            ],
            "SHOW CONSTRAINT INFO": [],
            "SHOW TRIGGERS": [],
        }

    def read(self, query: str, params: Any = None, **kwargs: Any) -> list[dict]:
        assert not query.startswith("SHOW"), "Memgraph runs SHOW only in auto-commit"
        return []

    def autocommit(self, query: str, params: Any = None) -> list[dict]:
        return [dict(r) for r in self.rows[query]]


def test_memgraph_schema_leaves_out_counts_and_sees_triggers():
    store = _MemgraphLike()
    base = graph_state(store)  # type: ignore[arg-type]
    store.rows["SHOW INDEX INFO"][0]["count"] = 4  # a write to content, not to the schema
    assert graph_state(store).schema_fingerprint == base.schema_fingerprint  # type: ignore[arg-type]
    # SHOW TRIGGERS columns: memgraph/memgraph src/query/interpreter.cpp (ShowTriggers).
    store.rows["SHOW TRIGGERS"].append(
        {
            "trigger name": "t",
            "statement": "UNWIND createdVertices AS v SET v.seen = true",
            "event type": "() CREATE",
            "phase": "AFTER COMMIT",
            "owner": None,
        }
    )
    assert graph_state(store).fingerprint != base.fingerprint  # type: ignore[arg-type]
