"""Memgraph over Bolt: production (`memgraph/memgraph-mage`, DESIGN.md section 5).

Differences from ArcadeDB handled here:
- one database per instance on community (multi-database is Enterprise-only), so the
  project's default database name maps to Memgraph's default and is not sent;
- wipe = batched DETACH DELETE (DROP GRAPH needs IN_MEMORY_ANALYTICAL mode), then every
  index and constraint listed by SHOW INDEX INFO / SHOW CONSTRAINT INFO is dropped;
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
from eval_pipeline.graph.dialects.base import Dialect, quote_name
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


def drop_index_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW INDEX INFO (columns `index type`, `label`,
    `property`; text and vector indexes name themselves as `text (name: x)`)."""
    out: list[str] = []
    for row in rows:
        kind = str(row.get("index type", "")).strip()
        label = row.get("label")
        props = _props(row.get("property"))
        named = re.match(r"^(text|vector)\b.*?name:\s*([^)\s]+)", kind)
        if named:
            verb = "TEXT" if named.group(1) == "text" else "VECTOR"
            out.append(f"DROP {verb} INDEX {quote_name(named.group(2))}")
        elif kind.startswith("edge-type"):
            on = f":{quote_name(str(label))}"
            cols = f"({', '.join(quote_name(p) for p in props)})" if props else ""
            out.append(f"DROP EDGE INDEX ON {on}{cols}")
        elif kind.startswith("label") and label:
            cols = f"({', '.join(quote_name(p) for p in props)})" if props else ""
            out.append(f"DROP INDEX ON :{quote_name(str(label))}{cols}")
        elif kind.startswith("point") and label and props:
            out.append(f"DROP POINT INDEX ON :{quote_name(str(label))}({quote_name(props[0])})")
    return out


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

    def drop_index_statements(self, store: GraphStore) -> list[str]:
        indexes = store.autocommit("SHOW INDEX INFO")
        constraints = store.autocommit("SHOW CONSTRAINT INFO")
        return drop_constraint_statements(constraints) + drop_index_statements(indexes)

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
