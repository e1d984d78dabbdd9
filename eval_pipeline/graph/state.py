"""A fingerprint of what the graph holds *now*: proof that retrieval wrote nothing, and that
nobody else edited the pipeline's graph between two of its write phases (`ownership.py`).

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

Where the server can hash (`apoc.util.sha256` and `apoc.convert.toJson`, as ArcadeDB's Cypher
offers), the elements are hashed there instead (issue 18): each query returns one row, the
count and a digest of its elements' digests in id order, and nothing but those rows crosses the
wire. On the full S graph (~600k nodes, ~2M relationships) the client-side scan decoded every
property of every element through the Bolt driver, twice per retrieval stage. The element
digest covers the same parts (id, labels and properties; type, endpoints and properties), so
any write still changes it; a large label or type is hashed in id-modulo slices of at most
`SLICE_ELEMENTS` so one aggregate stays small in the server's heap. The two paths give
different fingerprints (their own domains), and one graph's state is only ever compared with
a state taken the same way (`GraphState.method`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from eval_pipeline.graph.dialects.base import quote_name
from eval_pipeline.graph.dialects.store_protocol import DialectStore as GraphReader
from eval_pipeline.graph.schema import LEASE

_DOMAIN = b"eval_pipeline/graph-state/v2\n"  # v2: the schema too
_SERVER_DOMAIN = b"eval_pipeline/graph-state/v3-server\n"  # v3: element digests server-side
READ_TIMEOUT_S = 900.0
MAX_ROWS = 50_000_000
# Elements hashed in one server-side aggregate: its digests (~100 bytes each in a JVM) and the
# sort by id stay a few tens of MB.
SLICE_ELEMENTS = 200_000


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
    # "client": every element read and hashed here; "server": hashed by the server.
    method: str = "client"


def _digest(obj: Any) -> bytes:
    line = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(line.encode("utf-8")).digest()


def _read(store: GraphReader, query: str) -> list[dict]:
    return store.read(query, {}, timeout_s=READ_TIMEOUT_S, max_rows=MAX_ROWS)


def schema_state(store: Any) -> Any:
    """The schema description of `store`'s backend (None for a reader without a dialect)."""
    describe = getattr(getattr(store, "dialect", None), "schema_state", None)
    return describe(store) if callable(describe) else None


def server_hashes(store: GraphReader) -> bool:
    """Whether the server hashes in Cypher (`apoc.util.sha256`, `apoc.convert.toJson`)."""
    try:
        rows = _read(store, "RETURN apoc.util.sha256([apoc.convert.toJson({a: 1})]) AS h")
    except Exception:  # an unknown function is a query error on every backend
        return False
    return len(rows) == 1 and isinstance(rows[0].get("h"), str) and len(rows[0]["h"]) == 64


def graph_state(
    store: GraphReader,
    *,
    schema: SchemaSource | None = None,
    server_side: bool | None = None,
    skip: tuple[str, ...] = (LEASE,),
) -> GraphState:
    """Hash every node and relationship currently in the graph, and its schema.

    `schema` returns the schema description to hash; by default `schema_state(store)`.
    `server_side`: hash on the server (default: when it can, see `server_hashes`).
    `skip`: labels whose nodes are left out (the lease, renewed by the chain's heartbeat;
    the ownership also leaves out its claim, which records this very digest).
    """
    started = time.perf_counter()
    described = schema() if schema is not None else schema_state(store)
    schema_digest = _digest(["schema", described])
    if server_side is None:
        server_side = server_hashes(store)
    if server_side:
        digests, nodes, relationships = _server_content(store, skip)
        domain = _SERVER_DOMAIN
    else:
        digests, nodes, relationships = _client_content(store, skip)
        domain = _DOMAIN
    return GraphState(
        fingerprint=_combine([*digests, schema_digest], domain),
        nodes=nodes,
        relationships=relationships,
        seconds=round(time.perf_counter() - started, 3),
        content_fingerprint=_combine(digests, domain),
        schema_fingerprint="sha256:" + schema_digest.hex(),
        method="server" if server_side else "client",
    )


def _labels(store: GraphReader, *, listed: bool = False) -> list[str]:
    """Labels in use; with `listed`, the dialect's listing instead (no scan; it may name
    empty labels too, which add no content)."""
    listing = getattr(getattr(store, "dialect", None), "labels", None)
    if listed and callable(listing):
        return sorted(listing(store))
    rows = _read(store, "MATCH (n) UNWIND labels(n) AS label RETURN DISTINCT label")
    return sorted(r["label"] for r in rows)


def _types(store: GraphReader, *, listed: bool = False) -> list[str]:
    """Relationship types in use; with `listed`, the dialect's listing instead (no scan; it may
    name empty types too, which add no content)."""
    listing = getattr(getattr(store, "dialect", None), "relationship_types", None)
    if listed and callable(listing):
        return sorted(listing(store))
    rows = _read(store, "MATCH ()-[r]->() RETURN DISTINCT type(r) AS type")
    return sorted(r["type"] for r in rows)


def _client_content(store: GraphReader, skip: tuple[str, ...]) -> tuple[list[bytes], int, int]:
    """(element digests, nodes, relationships), every element read and hashed here."""
    digests: list[bytes] = []
    nodes = 0
    # A node with several labels is read once per label: same digest, so dedupe by id.
    seen_ids: set[Any] = set()
    for label in _labels(store):
        if label in skip:
            continue
        for row in _read(
            store,
            f"MATCH (n:{quote_name(label)}) "
            "RETURN id(n) AS id, labels(n) AS labels, properties(n) AS props",
        ):
            if row["id"] in seen_ids or set(row["labels"]) & set(skip):
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

    relationships = 0
    for rel in _types(store):
        for row in _read(
            store,
            f"MATCH (a)-[r:{quote_name(rel)}]->(b) "
            "RETURN id(a) AS a, id(r) AS id, id(b) AS b, properties(r) AS props",
        ):
            relationships += 1
            digests.append(_digest(["r", rel, row["a"], row["id"], row["b"], row["props"]]))
    return digests, nodes, relationships


# Server-side: each label's nodes (a node with several labels under the least of them, so
# once), then each relationship type, in slices `id % $slices = $slice`; the element digests
# of a slice are hashed in id order (within one label ArcadeDB scans in id order, so that
# sort is nearly free; across labels it tripled the cost).
_NODE_FILTER = (
    "WHERE all(x IN labels(n) WHERE x >= $label) AND none(x IN labels(n) WHERE x IN $skip)"
)
_NODE_DIGEST = (
    "WITH apoc.util.sha256([toString(id(n)), apoc.convert.toJson(labels(n)), "
    "apoc.convert.toJson(properties(n))]) AS h "
    "RETURN count(h) AS n, apoc.util.sha256(collect(h)) AS digest"
)
_UNLABELLED_FILTER = "WHERE size(labels(n)) = 0"


def _node_count(label: str | None) -> str:
    if label is None:
        return f"MATCH (n) {_UNLABELLED_FILTER} RETURN count(n) AS n"
    return f"MATCH (n:{quote_name(label)}) {_NODE_FILTER} RETURN count(n) AS n"


def _node_slice(label: str | None) -> str:
    match = "MATCH (n)" if label is None else f"MATCH (n:{quote_name(label)})"
    where = _UNLABELLED_FILTER if label is None else _NODE_FILTER
    return f"{match} {where} AND id(n) % $slices = $slice WITH n ORDER BY id(n) {_NODE_DIGEST}"


def _rel_count(rel: str) -> str:
    return f"MATCH ()-[r:{quote_name(rel)}]->() RETURN count(r) AS n"


def _rel_slice(rel: str) -> str:
    return (
        f"MATCH (a)-[r:{quote_name(rel)}]->(b) WHERE id(r) % $slices = $slice "
        "WITH a, r, b ORDER BY id(r) "
        "WITH apoc.util.sha256([toString(id(a)), toString(id(r)), toString(id(b)), "
        "apoc.convert.toJson(properties(r))]) AS h "
        "RETURN count(h) AS n, apoc.util.sha256(collect(h)) AS digest"
    )


def _slices(
    store: GraphReader,
    what: str,
    count_query: str,
    slice_query: str,
    label: str | None = None,
    skip: tuple[str, ...] = (LEASE,),
) -> tuple[list[bytes], int]:
    params: dict[str, Any] = {"skip": list(skip), "label": label}
    total = int(store.read(count_query, params, timeout_s=READ_TIMEOUT_S)[0]["n"])
    if total == 0:  # an empty type is no content (the schema covers that it exists)
        return [], 0
    slices = max(1, -(-total // SLICE_ELEMENTS))
    digests: list[bytes] = []
    counted = 0
    for i in range(slices):
        row = store.read(
            slice_query, {**params, "slices": slices, "slice": i}, timeout_s=READ_TIMEOUT_S
        )[0]
        counted += int(row["n"])
        digests.append(_digest([what, slices, i, int(row["n"]), row["digest"]]))
    return digests, counted


def _server_content(store: GraphReader, skip: tuple[str, ...]) -> tuple[list[bytes], int, int]:
    """(slice digests, nodes, relationships), the elements hashed by the server."""
    digests: list[bytes] = []
    nodes = 0
    for label in [*_labels(store, listed=True), None]:
        if label in skip:
            continue
        found, count = _slices(
            store, f"n:{label or ''}", _node_count(label), _node_slice(label), label, skip
        )
        digests += found
        nodes += count
    relationships = 0
    for rel in _types(store, listed=True):
        found, count = _slices(store, f"r:{rel}", _rel_count(rel), _rel_slice(rel))
        digests += found
        relationships += count
    return digests, nodes, relationships


def _combine(digests: list[bytes], domain: bytes = _DOMAIN) -> str:
    h = hashlib.sha256(domain)
    for d in sorted(digests):
        h.update(d)
    return "sha256:" + h.hexdigest()
