"""Memgraph over Bolt: production (`memgraph/memgraph-mage`, DESIGN.md section 5).

Differences from ArcadeDB handled here:
- one database per instance on community (multi-database is Enterprise-only), so the
  project's default database name maps to Memgraph's default and is not sent;
- wipe = batched DETACH DELETE (DROP GRAPH needs IN_MEMORY_ANALYTICAL mode), then every
  index, constraint and trigger listed by SHOW INDEX INFO / SHOW CONSTRAINT INFO / SHOW
  TRIGGERS is dropped;
- "empty" = no node, relationship, index, constraint or trigger: the inventory counts nodes
  and relationships by scanning, and names every row of those three SHOW queries. Their
  columns, read from Memgraph's source (`src/query/interpreter.cpp`, not run here: no Memgraph
  on our machines): SHOW INDEX INFO `index type, label, property, count` (`property` a list
  since composite indexes, NULL for label and edge-type indexes; text indexes
  `label_text (name: x)` / `edge-type_text (name: x)` since 3.6, `text (name: x)` before;
  vector indexes `label+property_vector`; global edge indexes `edge-property` with a NULL
  label), SHOW CONSTRAINT INFO `constraint type, label, properties, data_type` (`exists`,
  `unique` with a list of properties, `data_type`), SHOW TRIGGERS `trigger name, statement,
  event type, phase, owner`;
- `CREATE INDEX ON :Label(prop)` (works on every version) and `CREATE TEXT INDEX name ON
  :Turn(text)`, searched with `text_search.search` (Tantivy syntax, `data.` prefix);
- SHOW SCHEMA INFO (needs --schema-info-enabled=True) runs only in an auto-commit
  transaction; without it we fall back to the portable scans;
- maps and nested lists are valid property values: no encoding needed.

The statement builders are plain functions so they can be tested without a server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects.base import Dialect, Inventory, quote_name
from eval_pipeline.graph.errors import GraphError, GraphQueryError

if TYPE_CHECKING:
    from eval_pipeline.graph.store import GraphStore

TEXT_INDEX_NAME = "turn_text"
# Names that mean "the default database" here: community edition has no other.
DEFAULT_DATABASE_NAMES = frozenset({"", "eval", "memgraph"})
_TANTIVY_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def _props(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def create_index_statements(
    pairs: Iterable[tuple[str, str]] = schema.PROPERTY_INDEXES,
) -> list[str]:
    return [f"CREATE INDEX ON :{quote_name(label)}({quote_name(prop)})" for label, prop in pairs]


def create_text_index_statement(name: str = TEXT_INDEX_NAME) -> str:
    label, prop = schema.FULLTEXT_PROPERTY
    return f"CREATE TEXT INDEX {quote_name(name)} ON :{quote_name(label)}({quote_name(prop)})"


_NAMED_INDEX = re.compile(r"^(?P<kind>[\w+\-]+)\s*\(name:\s*(?P<name>[^)]+?)\s*\)")


def _index_kind(row: dict[str, Any]) -> tuple[str, str | None]:
    """(kind, name) of a SHOW INDEX INFO row: `label_text (name: x)` -> ("label_text", "x");
    `label+property (DESC)` -> ("label+property", None)."""
    kind = str(row.get("index type", "")).strip()
    named = _NAMED_INDEX.match(kind)
    if named:
        return named.group("kind"), named.group("name")
    return re.sub(r"\s*\(.*\)$", "", kind), None


def drop_index_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW INDEX INFO (columns `index type`, `label`,
    `property`; text indexes name themselves: `label_text (name: x)` since 3.6, `text (name:
    x)` before). A vector index row without a name cannot be dropped from here and is left
    out (the pipeline never creates one)."""
    out: list[str] = []
    for row in rows:
        kind, name = _index_kind(row)
        label = row.get("label")
        props = _props(row.get("property"))
        cols = f"({', '.join(quote_name(p) for p in props)})" if props else ""
        if name and kind in {"text", "label_text", "edge-type_text"}:
            out.append(f"DROP TEXT INDEX {quote_name(name)}")
        elif name and "vector" in kind:
            out.append(f"DROP VECTOR INDEX {quote_name(name)}")
        elif "vector" in kind:
            continue
        elif kind == "edge-property" and props:
            out.append(f"DROP GLOBAL EDGE INDEX ON :({quote_name(props[0])})")
        elif kind.startswith("edge-type") and label:
            out.append(f"DROP EDGE INDEX ON :{quote_name(str(label))}{cols}")
        elif kind.startswith("label") and label:
            out.append(f"DROP INDEX ON :{quote_name(str(label))}{cols}")
        elif kind == "point" and label and props:
            out.append(f"DROP POINT INDEX ON :{quote_name(str(label))}({quote_name(props[0])})")
    return out


def drop_trigger_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW TRIGGERS."""
    return [f"DROP TRIGGER {quote_name(name)}" for name in trigger_names(rows)]


def index_names(rows: list[dict[str, Any]]) -> list[str]:
    """One stable name per SHOW INDEX INFO row (its changing `count` left out)."""
    names = []
    for row in rows:
        kind = str(row.get("index type", "")).strip()
        label = row.get("label")
        props = ", ".join(_props(row.get("property")))
        on = f":{label}" if label else ""
        names.append(f"{kind} {on}({props})" if props else f"{kind} {on}".strip())
    return sorted(names)


def constraint_names(rows: list[dict[str, Any]]) -> list[str]:
    """One stable name per SHOW CONSTRAINT INFO row."""
    names = []
    for row in rows:
        kind = str(row.get("constraint type", "")).strip()
        props = ", ".join(_props(row.get("properties")))
        typed = f" {row['data_type']}" if row.get("data_type") else ""
        names.append(f"{kind} :{row.get('label')}({props}){typed}")
    return sorted(names)


def trigger_names(rows: list[dict[str, Any]]) -> list[str]:
    """The names in SHOW TRIGGERS rows (column `trigger name`)."""
    return sorted(str(r["trigger name"]) for r in rows if r.get("trigger name"))


def drop_constraint_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW CONSTRAINT INFO."""
    out: list[str] = []
    for row in rows:
        kind = str(row.get("constraint type", "")).lower()
        label = quote_name(str(row.get("label")))
        props = _props(row.get("properties"))
        if not props:
            continue
        if kind == "exists":
            out.append(f"DROP CONSTRAINT ON (n:{label}) ASSERT EXISTS (n.{quote_name(props[0])})")
        elif kind == "unique":
            cols = ", ".join(f"n.{quote_name(p)}" for p in props)
            out.append(f"DROP CONSTRAINT ON (n:{label}) ASSERT {cols} IS UNIQUE")
        elif kind in {"data_type", "data type"} and row.get("data_type"):
            out.append(
                f"DROP CONSTRAINT ON (n:{label}) ASSERT n.{quote_name(props[0])} "
                f"IS TYPED {row['data_type']}"
            )
    return out


def inventory_from_rows(
    counted: Inventory,
    indexes: list[dict[str, Any]],
    constraints: list[dict[str, Any]],
    triggers: list[dict[str, Any]],
) -> Inventory:
    """`counted` (nodes and relationships) completed with the rows of SHOW INDEX INFO, SHOW
    CONSTRAINT INFO and SHOW TRIGGERS: then nothing Memgraph holds is left out."""
    return counted.model_copy(
        update={
            "complete": True,
            "indexes": index_names(indexes),
            "constraints": constraint_names(constraints),
            "triggers": trigger_names(triggers),
        }
    )


def tantivy_query(text: str) -> str:
    """A plain keyword query on Turn.text, Tantivy operators escaped."""
    _, prop = schema.FULLTEXT_PROPERTY
    escaped = _TANTIVY_SPECIAL.sub(r"\\\1", text)
    return f"data.{prop}:({escaped})"


def parse_schema_info(raw: str | dict[str, Any]) -> dict[str, list[str]]:
    """Labels, relationship types and property keys from SHOW SCHEMA INFO's JSON."""
    info = json.loads(raw) if isinstance(raw, str) else raw
    labels: set[str] = set()
    types: set[str] = set()
    node_keys: set[str] = set()
    rel_keys: set[str] = set()
    for node in info.get("nodes", []):
        labels.update(node.get("labels", []))
        node_keys.update(p["key"] for p in node.get("properties", []))
    for edge in info.get("edges", []):
        types.add(edge.get("type", ""))
        rel_keys.update(p["key"] for p in edge.get("properties", []))
    return {
        "labels": sorted(labels),
        "relationship_types": sorted(t for t in types if t),
        "node_keys": sorted(node_keys),
        "relationship_keys": sorted(rel_keys),
    }


class MemgraphDialect(Dialect):
    name = "memgraph"
    fulltext_index_name = TEXT_INDEX_NAME

    def session_database(self, database: str | None) -> str | None:
        return None if (database or "") in DEFAULT_DATABASE_NAMES else database

    def wipe(self, store: GraphStore) -> None:
        # Triggers first: one firing on our deletes could write (or refuse) while we wipe.
        for stmt in drop_trigger_statements(store.autocommit("SHOW TRIGGERS")):
            store.autocommit(stmt)
        super().wipe(store)

    def drop_index_statements(self, store: GraphStore) -> list[str]:
        indexes = store.autocommit("SHOW INDEX INFO")
        constraints = store.autocommit("SHOW CONSTRAINT INFO")
        return drop_constraint_statements(constraints) + drop_index_statements(indexes)

    def inventory(self, store: GraphStore) -> Inventory:
        """Nodes and relationships by full scans (exact, in memory), plus the names of every
        index, constraint and trigger (SHOW ... runs only in an auto-commit transaction)."""
        inv = super().inventory(store)
        return inventory_from_rows(
            inv,
            store.autocommit("SHOW INDEX INFO"),
            store.autocommit("SHOW CONSTRAINT INFO"),
            store.autocommit("SHOW TRIGGERS"),
        )

    def create_index_statements(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        return create_index_statements(pairs)

    def create_fulltext_index(self, store: GraphStore) -> None:
        store.autocommit(create_text_index_statement())

    def fulltext_search(self, query: str, limit: int) -> tuple[str, dict[str, Any]]:
        cypher = (
            "CALL text_search.search($index, $query, {limit: $limit}) YIELD node, score "
            "RETURN node.turn_id AS turn_id, score ORDER BY score DESC LIMIT $limit"
        )
        return cypher, {"index": TEXT_INDEX_NAME, "query": tantivy_query(query), "limit": limit}

    def _schema_info(self, store: GraphStore) -> dict[str, list[str]] | None:
        try:
            rows = store.autocommit("SHOW SCHEMA INFO")
        except GraphQueryError:
            return None  # flag not set: the portable scans answer instead
        return parse_schema_info(rows[0]["schema"]) if rows else None

    def labels(self, store: GraphStore) -> list[str]:
        info = self._schema_info(store)
        return info["labels"] if info else super().labels(store)

    def relationship_types(self, store: GraphStore) -> list[str]:
        info = self._schema_info(store)
        return info["relationship_types"] if info else super().relationship_types(store)

    def property_keys(self, store: GraphStore) -> dict[str, list[str]]:
        info = self._schema_info(store)
        if info is None:
            return super().property_keys(store)
        return {"nodes": info["node_keys"], "relationships": info["relationship_keys"]}

    def server_version(self, store: GraphStore) -> str:
        try:
            rows = store.autocommit("SHOW VERSION")
        except GraphQueryError:
            return store.driver_agent()
        return f"Memgraph {rows[0]['version']}" if rows else store.driver_agent()

    def map_error(self, exc: Exception, where: str) -> GraphError:
        mapped = super().map_error(exc, where)
        text = str(exc).lower()
        if "enterprise" in text or "multi-tenan" in text:
            return GraphQueryError(
                f"Memgraph at {where}: multi-database is Enterprise-only; leave "
                "--graph-database at its default"
            )
        if "text search" in text and "experimental" in text:
            return GraphQueryError(
                f"Memgraph at {where}: text search is off (before 3.6 it needs "
                "--experimental-enabled=text-search)"
            )
        return mapped
