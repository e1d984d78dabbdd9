"""Backend dialects: what differs between graph servers, one small module each.

`DIFFERENCES` is the one table of every difference between the backends: each line names the
concern, the `Dialect` method that decides it, and what each backend does. Code outside
`dialects/` asks the dialect; it never branches on a backend's name. docs/graph-backends.md
shows the same table (a test keeps them equal).
"""

from __future__ import annotations

from typing import NamedTuple

from eval_pipeline.graph.dialects.arcadedb import ArcadeDBDialect
from eval_pipeline.graph.dialects.base import Dialect, TextIndex, VectorIndex
from eval_pipeline.graph.dialects.memgraph import MemgraphDialect
from eval_pipeline.graph.errors import GraphError

DIALECTS: dict[str, type[Dialect]] = {"arcadedb": ArcadeDBDialect, "memgraph": MemgraphDialect}


class Difference(NamedTuple):
    concern: str
    method: str  # the Dialect method that decides it
    arcadedb: str
    memgraph: str


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "server version",
        "on_connect",
        "not read (the embedded wheel is pinned)",
        "SHOW VERSION once per server; < 3.5 refused with one line",
    ),
    Difference(
        "database name",
        "session_database",
        "sent as is (one database per name)",
        "not sent for eval/memgraph (multi-database is Enterprise-only)",
    ),
    Difference(
        "atomic writes",
        "require_transactions",
        "always transactional",
        "SHOW STORAGE INFO: injection (before the wipe) and reconcile refused in "
        "IN_MEMORY_ANALYTICAL",
    ),
    Difference(
        "id indexes",
        "create_index_statements",
        "CREATE INDEX IF NOT EXISTS FOR (n:L) ON (n.p)",
        "CREATE INDEX ON :L(p)",
    ),
    Difference(
        "reconciler indexes and unique keys",
        "reconcile_index_statements",
        "CREATE CONSTRAINT name IF NOT EXISTS FOR (n:L) REQUIRE n.p IS UNIQUE",
        "CREATE INDEX ON :L(p) + CREATE CONSTRAINT ON (n:L) ASSERT n.p IS UNIQUE",
    ),
    Difference(
        "full-text index DDL",
        "create_text_index / drop_text_index",
        "SQL over HTTP: CREATE INDEX ... FULL_TEXT; name L[p]",
        "CREATE TEXT INDEX l_p ON :L(p) (3.5: ON :L), then listed (a taken name is only a "
        "notification); DROP TEXT INDEX",
    ),
    Difference(
        "full-text index discovery",
        "text_indexes",
        "SHOW INDEXES, type FULLTEXT",
        "SHOW INDEX INFO, label_text (name: x) (3.5: text (name: x))",
    ),
    Difference(
        "full-text search call",
        "fulltext_call / fulltext_params",
        "db.index.fulltext.queryNodes($index, $query), Lucene syntax",
        "text_search.search($index, 'data.p:(...)', limit): 3.5 two arguments and no score, "
        "3.6-3.10 Int limit, 3.11+ {limit: n}; Tantivy syntax",
    ),
    Difference(
        "vector index DDL",
        "create_vector_index",
        "SQL over HTTP: CREATE PROPERTY L.p ARRAY_OF_FLOATS, CREATE INDEX ... LSM_VECTOR "
        "METADATA {dimensions, similarity: COSINE}; name L[p]",
        "CREATE VECTOR INDEX l_p ON :L(p) WITH CONFIG {dimension, capacity, metric: cos} "
        "(dimension 1 to 65535: the server casts it to uint16), then listed (a failure is only "
        "a notification)",
    ),
    Difference(
        "vector index discovery",
        "vector_indexes",
        "SHOW INDEXES, type VECTOR",
        "SHOW VECTOR INDEX INFO, index_type label+property_vector",
    ),
    Difference(
        "vector search call",
        "vector_call",
        "db.index.vector.queryNodes($index, $k, $vector) YIELD node, score",
        "vector_search.search($index, $k, $vector) YIELD node, similarity",
    ),
    Difference(
        "exact cosine similarity",
        "vector_similarity",
        "vector.similarity.cosine(a, b)",
        "vector_search.cosine_similarity(a, b)",
    ),
    Difference(
        "wipe",
        "wipe",
        "triggers and materialized views, then DROP TYPE ... UNSAFE per type over HTTP "
        "(batched DETACH DELETE without it)",
        "triggers, batched DETACH DELETE, then every constraint and index listed (typed "
        "constraints by the grammar's keyword, vector indexes by name from SHOW VECTOR INDEX "
        "INFO)",
    ),
    Difference(
        "what 'empty' lists",
        "inventory",
        "schema:types and schema:triggers over HTTP: types, documents, indexes, constrained "
        "properties, triggers",
        "scans + SHOW INDEX INFO / SHOW CONSTRAINT INFO / SHOW TRIGGERS",
    ),
    Difference(
        "schema in the read fingerprint",
        "schema_state",
        "SELECT FROM schema:types and schema:triggers (Cypher SHOW INDEXES/CONSTRAINTS "
        "without HTTP)",
        "SHOW INDEX INFO (no count), SHOW CONSTRAINT INFO, SHOW TRIGGERS",
    ),
    Difference(
        "memory bound of an agent read",
        "bound_read",
        "server heap guards (server.py); statement unchanged",
        "QUERY MEMORY LIMIT 1024 MB ends it (a read's own clause replaced, a tighter one "
        "kept); --memory-limit on the server",
    ),
    Difference(
        "naming an agent read",
        "mark_read",
        "leading comment /* eval_pipeline read <id> */ (list queries shows only the text)",
        "transaction metadata eval_pipeline_read (SHOW TRANSACTIONS lists it); text unchanged",
    ),
    Difference(
        "stopping a read at its timeout",
        "cancel_query",
        "list queries, the text starting with the read's mark + terminate query over HTTP;"
        " arcadedb.command.timeout backstop",
        "SHOW TRANSACTIONS, the row whose metadata has the read's id + TERMINATE TRANSACTIONS"
        " 'id', the kill checked by listing again; --query-execution-timeout-sec",
    ),
    Difference(
        "map-valued properties",
        "encode_value",
        "refused: JSON-encoded",
        "stored as maps",
    ),
    Difference(
        "labels, types and keys",
        "labels / relationship_types / property_keys",
        "db.labels(), db.relationshipTypes() (empty types too)",
        "SHOW SCHEMA INFO (auto-commit) when enabled, else scans",
    ),
)


def get_dialect(backend: str) -> Dialect:
    try:
        return DIALECTS[backend.lower()]()
    except KeyError:
        raise GraphError(
            f"unknown graph backend {backend!r}: expected one of {', '.join(DIALECTS)}"
        ) from None


__all__ = [
    "DIALECTS",
    "DIFFERENCES",
    "Dialect",
    "Difference",
    "TextIndex",
    "VectorIndex",
    "get_dialect",
]
