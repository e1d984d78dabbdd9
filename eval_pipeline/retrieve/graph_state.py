"""A fingerprint of what the graph holds *now*: proof that retrieval wrote nothing.

The graph stage's fingerprint (`eval_pipeline.graph.fingerprint`) names the fixtures a graph
was built from and is stored in the graph: a write by a retrieval agent would leave it intact.
This one hashes the content itself: every node (internal id, labels, properties) and every
relationship (endpoints, type, properties). Any created, deleted or modified node, label,
property or relationship changes it; so does deleting a node and recreating it identically
(its internal id changes), which is still a write.

The schema is part of it too (issue 13): a type, index or constraint created or dropped
during retrieval is a write. What "the schema" is, is the dialect's (`Dialect.schema_state`:
ArcadeDB's `SELECT FROM schema:types` over HTTP or Cypher's listings without it, Memgraph's
SHOW INDEX INFO / SHOW CONSTRAINT INFO / SHOW TRIGGERS), leaving out what a read changes
(index read counters, sizes, compaction state). A reader without a dialect hashes content
only; `graph_state(schema=...)` takes another source.

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
from eval_pipeline.graph.schema import LEASE
from eval_pipeline.retrieve.protocol import GraphReader

_DOMAIN = b"eval_pipeline/graph-state/v2\n"  # v2: the schema too
READ_TIMEOUT_S = 900.0
MAX_ROWS = 50_000_000


# A JSON-able description of the schema (types, indexes, constraints ...), hashed as is.
SchemaSource = Callable[[], Any]


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


def schema_state(store: Any) -> Any:
    """The schema description of `store`'s backend (None for a reader without a dialect)."""
    describe = getattr(getattr(store, "dialect", None), "schema_state", None)
    return describe(store) if callable(describe) else None


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
