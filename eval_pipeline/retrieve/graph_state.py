"""A fingerprint of what the graph holds *now*: proof that retrieval wrote nothing.

The graph stage's fingerprint (`eval_pipeline.graph.fingerprint`) names the fixtures a graph
was built from and is stored in the graph: a write by a retrieval agent would leave it intact.
This one hashes the content itself: every node (internal id, labels, properties) and every
relationship (endpoints, type, properties). Any created, deleted or modified node, label,
property or relationship changes it; so does deleting a node and recreating it identically
(its internal id changes), which is still a write.

The schema is part of it too (issue 13): a type, index or constraint created or dropped
during retrieval is a write. `schema_state` describes it, leaving out what a read changes
(index read counters, sizes, compaction state):
- ArcadeDB: through the HTTP API, every type with its kind, properties (constraints are
  property attributes there) and indexes (`SELECT FROM schema:types`): the only place
  document types, and the record counts of document types, show (Cypher never sees
  documents). Without an HTTP API, what Cypher lists: vertex and edge types (`db.labels()`,
  `db.relationshipTypes()`), indexes (`SHOW INDEXES`) and constraints (`SHOW CONSTRAINTS`);
- Memgraph: SHOW INDEX INFO (without its changing `count`), SHOW CONSTRAINT INFO and SHOW
  TRIGGERS, which run only in auto-commit transactions (`store.autocommit`);
- any other reader: nothing beyond the content. `graph_state(schema=...)` takes another source.

Each element is hashed on its own and the digests are sorted, so the order a server returns
rows in does not matter. Read label by label and type by type to bound each result set.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from eval_pipeline.graph.dialects.base import quote_name
from eval_pipeline.graph.errors import GraphQueryError
from eval_pipeline.graph.schema import LEASE
from eval_pipeline.retrieve.protocol import GraphReader

_DOMAIN = b"eval_pipeline/graph-state/v2\n"  # v2: the schema too
READ_TIMEOUT_S = 900.0
MAX_ROWS = 50_000_000


# A JSON-able description of the schema (types, indexes, constraints ...), hashed as is.
SchemaSource = Callable[[], Any]

# Fields of a listed index or constraint that change without any write.
_VOLATILE = frozenset(
    {"id", "state", "populationPercent", "lastRead", "readCount", "count", "size", "compacting"}
)
# ArcadeDB `SELECT FROM schema:types`: record counts of vertex and edge types are content
# (hashed node by node above; the lease's changes by design); a document type's are not.
_ARCADEDB_TYPES_SQL = "SELECT FROM schema:types"


class GraphState(BaseModel):
    fingerprint: str
    nodes: int
    relationships: int
    seconds: float
    # The two parts `fingerprint` covers, each alone: nodes and relationships, and the schema.
    content_fingerprint: str = ""
    schema_fingerprint: str = ""


def _digest(obj: Any) -> bytes:
    line = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(line.encode("utf-8")).digest()


def _read(store: GraphReader, query: str) -> list[dict]:
    return store.read(query, {}, timeout_s=READ_TIMEOUT_S, max_rows=MAX_ROWS)


def _stable(row: Any) -> Any:
    if isinstance(row, dict):
        return {k: _stable(v) for k, v in sorted(row.items()) if k not in _VOLATILE}
    if isinstance(row, list):
        return [_stable(v) for v in row]
    return row


def _sorted_rows(rows: list[dict]) -> list[Any]:
    stable = [_stable(r) for r in rows]
    return sorted(stable, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _listing(run: Callable[[str], list[dict]], statement: str) -> Any:
    # A statement this server refuses is refused every time: say so, deterministically.
    try:
        return _sorted_rows(run(statement))
    except GraphQueryError as exc:
        return {"refused": statement, "by": type(exc).__name__}


def arcadedb_schema(store: Any) -> dict[str, Any]:
    """ArcadeDB's schema: with an HTTP API, every type (vertex, edge, document) with its
    properties (their constraints included) and indexes, from SQL; without one, what Cypher
    lists: vertex and edge types, indexes and constraints, but no document type."""
    http_of = getattr(store, "http", None)
    http = http_of() if callable(http_of) else None
    if http is not None:
        types = []
        for row in http.sql(store.database, _ARCADEDB_TYPES_SQL):
            row = dict(row)
            if row.get("type") in ("vertex", "edge"):
                row.pop("records", None)
            types.append(row)
        return {"types": _sorted_rows(types)}

    def run(statement: str) -> list[dict]:
        return _read(store, statement)

    return {
        "labels": _listing(run, "CALL db.labels() YIELD label RETURN label"),
        "relationship_types": _listing(
            run, "CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType"
        ),
        "indexes": _listing(run, "SHOW INDEXES"),
        "constraints": _listing(run, "SHOW CONSTRAINTS"),
    }


def memgraph_schema(store: Any) -> dict[str, Any]:
    """Memgraph's indexes, constraints and triggers (SHOW ... INFO: auto-commit only)."""
    autocommit = getattr(store, "autocommit", None)
    if not callable(autocommit):
        return {}
    return {
        "indexes": _listing(autocommit, "SHOW INDEX INFO"),
        "constraints": _listing(autocommit, "SHOW CONSTRAINT INFO"),
        "triggers": _listing(autocommit, "SHOW TRIGGERS"),
    }


def schema_state(store: Any) -> Any:
    """The schema description of `store`'s backend (None for a reader of unknown kind)."""
    backend = getattr(getattr(store, "dialect", None), "name", None)
    if backend == "arcadedb":
        return arcadedb_schema(store)
    if backend == "memgraph":
        return memgraph_schema(store)
    return None


def graph_state(store: GraphReader, *, schema: SchemaSource | None = None) -> GraphState:
    """Hash every node and relationship currently in the graph, and its schema.

    `schema` returns the schema description to hash; by default `schema_state(store)`.
    """
    started = time.perf_counter()
    digests: list[bytes] = []
    described = schema() if schema is not None else schema_state(store)
    schema_digest = _digest(["schema", described])
    labels = [
        r["label"]
        for r in _read(store, "MATCH (n) UNWIND labels(n) AS label RETURN DISTINCT label")
    ]
    nodes = 0
    # A node with several labels is read once per label: same digest, so dedupe by id.
    seen_ids: set[Any] = set()
    for label in sorted(labels):
        if label == LEASE:  # renewed by the chain's heartbeat while retrieval runs
            continue
        for row in _read(
            store,
            f"MATCH (n:{quote_name(label)}) "
            "RETURN id(n) AS id, labels(n) AS labels, properties(n) AS props",
        ):
            if row["id"] in seen_ids:
                continue
            seen_ids.add(row["id"])
            nodes += 1
            digests.append(_digest(["n", row["id"], sorted(row["labels"]), row["props"]]))
    # Unlabelled nodes, if a server allows them.
    for row in _read(
        store,
        "MATCH (n) WHERE size(labels(n)) = 0 RETURN id(n) AS id, properties(n) AS props",
    ):
        nodes += 1
        digests.append(_digest(["n", row["id"], [], row["props"]]))

    types = [r["type"] for r in _read(store, "MATCH ()-[r]->() RETURN DISTINCT type(r) AS type")]
    relationships = 0
    for rel in sorted(types):
        for row in _read(
            store,
            f"MATCH (a)-[r:{quote_name(rel)}]->(b) "
            "RETURN id(a) AS a, id(r) AS id, id(b) AS b, properties(r) AS props",
        ):
            relationships += 1
            digests.append(_digest(["r", rel, row["a"], row["id"], row["b"], row["props"]]))

    content = _combine(digests)
    return GraphState(
        fingerprint=_combine([*digests, schema_digest]),
        nodes=nodes,
        relationships=relationships,
        seconds=round(time.perf_counter() - started, 3),
        content_fingerprint=content,
        schema_fingerprint="sha256:" + schema_digest.hex(),
    )


def _combine(digests: list[bytes]) -> str:
    h = hashlib.sha256(_DOMAIN)
    for d in sorted(digests):
        h.update(d)
    return "sha256:" + h.hexdigest()
