"""ArcadeDB over Bolt: the embedded default and the server the tests run against.

Quirks handled here (probed on 26.10.x, DESIGN.md section 5):
- full-text indexes cannot be created in Cypher: SQL on the server's HTTP API creates them,
  Bolt queries them with `db.index.fulltext.queryNodes('Turn[text]', ...)` (Lucene syntax);
- the fastest complete wipe is `DROP TYPE ... UNSAFE` per type, again SQL over HTTP; it takes
  the type's indexes with it, but waits while a new full-text index is still being compacted
  in the background (HTTP 503). Without an HTTP URL we fall back to batched Cypher deletes;
- map-valued properties are refused (InvalidPropertyType): JSON-encode them;
- `db.labels()` lists every vertex type, empty ones included; counts come from SQL's
  `schema:types` record counts (one call) and leave out empty types;
- "empty" is more than "no vertex": document types hold records Cypher never sees, and a type
  or an index may exist with no record at all. The inventory (one `SELECT ... FROM
  schema:types` over HTTP: every type with its kind, record count and indexes) sees them all;
  a fresh database lists no type and no index (probed on 26.10.x, whether created at server
  start or over HTTP). Without the HTTP API the inventory is Cypher's partial view;
- read transactions do not reject writes, and the transaction timeout is ignored (the store
  enforces its own timeout client-side).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects.base import (
    KEPT_LABELS,
    Dialect,
    Inventory,
    counts_dict,
    delete_all_batched,
    json_encode_maps,
    quote_name,
)
from eval_pipeline.graph.errors import GraphError, GraphQueryError

if TYPE_CHECKING:
    from eval_pipeline.graph.store import GraphStore

_TYPE_DROP_ORDER = {"edge": 0, "vertex": 1, "document": 2}


def _sql_name(name: str) -> str:
    return "`" + name.replace("`", "") + "`"


def fulltext_index_name(label: str, prop: str) -> str:
    return f"{label}[{prop}]"  # ArcadeDB names automatic indexes <type>[<property>]


def create_index_statements(
    pairs: Iterable[tuple[str, str]] = schema.PROPERTY_INDEXES,
) -> list[str]:
    return [
        f"CREATE INDEX IF NOT EXISTS FOR (n:{quote_name(label)}) ON (n.{quote_name(prop)})"
        for label, prop in pairs
    ]


def create_fulltext_sql() -> list[str]:
    label, prop = schema.FULLTEXT_PROPERTY
    return [
        f"CREATE VERTEX TYPE {label} IF NOT EXISTS",
        f"CREATE PROPERTY {label}.{prop} IF NOT EXISTS STRING",
        f"CREATE INDEX IF NOT EXISTS ON {label} ({prop}) FULL_TEXT",
    ]


INVENTORY_SQL = "SELECT name, type, records, indexes FROM schema:types"


def drop_type_sql(types: list[dict[str, Any]]) -> list[str]:
    """DROP TYPE statements, edges before vertices, for rows of `SELECT ... schema:types`.
    The lease and claim types stay: the lease says which chain holds the instance (the wiping
    one), and the claim keeps a wipe cut short from leaving an unclaimed instance behind.
    Indexes on those kept types are dropped one by one."""
    dropped = [t for t in types if t["name"] not in KEPT_LABELS]
    ordered = sorted(
        dropped, key=lambda t: (_TYPE_DROP_ORDER.get(str(t.get("type")), 3), t["name"])
    )
    out = [f"DROP TYPE {_sql_name(t['name'])} IF EXISTS UNSAFE" for t in ordered]
    for t in types:
        if t["name"] in KEPT_LABELS:
            out += [f"DROP INDEX {_sql_name(i['name'])} IF EXISTS" for i in t.get("indexes") or []]
    return out


def inventory_from_types(rows: list[dict[str, Any]]) -> Inventory:
    """The inventory from the rows of INVENTORY_SQL (one per type: vertex, edge, document)."""
    inv = Inventory()
    for row in rows:
        name = str(row["name"])
        records = int(row.get("records") or 0)
        kind = str(row.get("type") or "document")
        inv.types.append(name)
        if kind == "vertex":
            inv.labels[name] = records
            inv.nodes += records
        elif kind == "edge":
            inv.relationship_types[name] = records
            inv.relationships += records
        else:
            inv.documents[name] = records
        inv.indexes += [str(i["name"]) for i in row.get("indexes") or [] if i.get("name")]
    inv.types.sort()
    inv.indexes.sort()
    return inv


def _retry_while_busy(call: Callable[[], object], timeout_s: float = 600.0) -> None:
    # After a full-text index build, ArcadeDB compacts it in the background and refuses to
    # drop it meanwhile ("underlying files are not available", HTTP 503): wait it out.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            call()
            return
        except GraphQueryError as exc:
            if "not available" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class ArcadeDBDialect(Dialect):
    name = "arcadedb"
    fulltext_index_name = fulltext_index_name(*schema.FULLTEXT_PROPERTY)

    def wipe(self, store: GraphStore) -> None:
        http = store.http()
        if http is None:
            delete_all_batched(store)
            for row in store.read("SHOW INDEXES YIELD name RETURN name", timeout_s=60):
                store.autocommit(f"DROP INDEX `{row['name']}`")
            return
        types = http.sql(store.database, INVENTORY_SQL)
        for stmt in drop_type_sql(types):
            _retry_while_busy(lambda stmt=stmt: http.sql(store.database, stmt))

    def inventory(self, store: GraphStore) -> Inventory:
        http = store.http()
        if http is not None:
            return inventory_from_types(http.sql(store.database, INVENTORY_SQL))
        # Cypher alone: vertex types (empty ones too), edges and indexes, no documents.
        inv = Inventory(complete=False)
        for label in self.labels(store):
            q = f"MATCH (n:{quote_name(label)}) RETURN count(n) AS n"
            inv.labels[label] = int(store.read(q, timeout_s=600)[0]["n"])
            inv.types.append(label)
        inv.nodes = sum(inv.labels.values())
        for rel in self.relationship_types(store):
            q = f"MATCH ()-[r:{quote_name(rel)}]->() RETURN count(r) AS n"
            inv.relationship_types[rel] = int(store.read(q, timeout_s=600)[0]["n"])
            inv.types.append(rel)
        inv.relationships = sum(inv.relationship_types.values())
        rows = store.read("SHOW INDEXES YIELD name RETURN name", timeout_s=60)
        inv.indexes = sorted(str(r["name"]) for r in rows)
        inv.types.sort()
        return inv

    def create_index_statements(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        return create_index_statements(pairs)

    def create_fulltext_index(self, store: GraphStore) -> None:
        http = store.http()
        if http is None:
            raise GraphError(
                "ArcadeDB creates full-text indexes only through its HTTP API: set the "
                "server's HTTP URL (http_url) next to --graph-uri"
            )
        for stmt in create_fulltext_sql():
            http.sql(store.database, stmt)

    def fulltext_search(self, query: str, limit: int) -> tuple[str, dict[str, Any]]:
        cypher = (
            "CALL db.index.fulltext.queryNodes($index, $query) YIELD node, score "
            "RETURN node.turn_id AS turn_id, score ORDER BY score DESC LIMIT $limit"
        )
        return cypher, {"index": self.fulltext_index_name, "query": query, "limit": limit}

    def labels(self, store: GraphStore) -> list[str]:
        # The schema's vertex types: cheap, and a superset (empty types included).
        return sorted(r["label"] for r in store.read("CALL db.labels() YIELD label RETURN label"))

    def relationship_types(self, store: GraphStore) -> list[str]:
        rows = store.read("CALL db.relationshipTypes() YIELD relationshipType RETURN *")
        return sorted(r["relationshipType"] for r in rows)

    def counts(self, store: GraphStore) -> dict[str, Any]:
        # One SQL call answers every type's record count from the buckets (~0.1 s for the
        # full corpus, against ~3 s for a Cypher count per relationship type).
        http = store.http()
        if http is None:
            return super().counts(store)
        rows = http.sql(store.database, "SELECT name, type, records FROM schema:types")
        labels = {r["name"]: int(r["records"]) for r in rows if r["type"] == "vertex"}
        types = {r["name"]: int(r["records"]) for r in rows if r["type"] == "edge"}
        return counts_dict(
            sum(labels.values()),
            {k: v for k, v in labels.items() if v},
            {k: v for k, v in types.items() if v},
        )

    def server_version(self, store: GraphStore) -> str:
        agent = store.driver_agent()
        match = re.search(r"ArcadeDB ([\w.\-]+)", agent)
        return f"ArcadeDB {match.group(1)}" if match else agent

    def encode_value(self, value: Any) -> Any:
        return json_encode_maps(value)

    def map_error(self, exc: Exception, where: str) -> GraphError:
        mapped = super().map_error(exc, where)
        text = str(exc)
        if "InvalidPropertyType" in text:
            return GraphQueryError(
                f"ArcadeDB at {where} refuses map-valued properties: JSON-encode them "
                "(store.encode_value) or set them key by key"
            )
        if "Unknown procedure" in text and "fulltext" in text:
            return GraphQueryError(f"ArcadeDB at {where}: full-text search unavailable ({text})")
        return mapped
