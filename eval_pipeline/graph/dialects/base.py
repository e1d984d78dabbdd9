"""What every dialect provides, with portable defaults; a backend module overrides the rest.

Everything here is plain Cypher both servers run. A dialect receives the store to run its
statements (`store.write`, `store.read`, `store.autocommit`), so it stays a bag of decisions
with no connection state of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import neo4j.exceptions as nx

from eval_pipeline.graph import schema
from eval_pipeline.graph.errors import (
    GraphError,
    GraphQueryError,
    GraphUnavailableError,
)

if TYPE_CHECKING:
    from eval_pipeline.graph.store import GraphStore

DELETE_BATCH = 10_000


def quote_name(name: str) -> str:
    """A label, type or property name as a Cypher identifier (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


class Dialect:
    name = "portable"
    fulltext_index_name = "turn_text"

    # --- connection ---------------------------------------------------------------------

    def session_database(self, database: str | None) -> str | None:
        return database or None

    # --- wipe and indexes ---------------------------------------------------------------

    def wipe(self, store: GraphStore) -> None:
        delete_all_batched(store)
        for stmt in self.drop_index_statements(store):
            store.autocommit(stmt)

    def drop_index_statements(self, store: GraphStore) -> list[str]:
        return []

    def create_index_statements(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        raise NotImplementedError

    def create_indexes(
        self, store: GraphStore, pairs: Iterable[tuple[str, str]] = schema.PROPERTY_INDEXES
    ) -> None:
        for stmt in self.create_index_statements(pairs):
            store.autocommit(stmt)

    def create_fulltext_index(self, store: GraphStore) -> None:
        raise NotImplementedError

    def fulltext_search(self, query: str, limit: int) -> tuple[str, dict[str, Any]]:
        """(Cypher, params) returning `turn_id` and `score` of the best-matching turns."""
        raise NotImplementedError

    # --- introspection ------------------------------------------------------------------

    def labels(self, store: GraphStore) -> list[str]:
        rows = store.read("MATCH (n) UNWIND labels(n) AS l RETURN DISTINCT l", timeout_s=600)
        return sorted(r["l"] for r in rows)

    def relationship_types(self, store: GraphStore) -> list[str]:
        rows = store.read("MATCH ()-[r]->() RETURN DISTINCT type(r) AS t", timeout_s=600)
        return sorted(r["t"] for r in rows)

    def property_keys(self, store: GraphStore) -> dict[str, list[str]]:
        """Every property key in use, on nodes and on relationships (a full scan)."""
        nodes = store.read(
            "MATCH (n) WITH DISTINCT keys(n) AS ks UNWIND ks AS k RETURN DISTINCT k",
            timeout_s=600,
        )
        rels = store.read(
            "MATCH ()-[r]->() WITH DISTINCT keys(r) AS ks UNWIND ks AS k RETURN DISTINCT k",
            timeout_s=600,
        )
        return {
            "nodes": sorted(r["k"] for r in nodes),
            "relationships": sorted(r["k"] for r in rels),
        }

    def counts(self, store: GraphStore) -> dict[str, Any]:
        """Totals, by label and by relationship type: one count query per label and type
        rather than a grouping scan of the whole graph."""
        by_label: dict[str, int] = {}
        for label in self.labels(store):
            rows = store.read(f"MATCH (n:{quote_name(label)}) RETURN count(n) AS n", timeout_s=600)
            if rows[0]["n"]:
                by_label[label] = int(rows[0]["n"])
        by_type: dict[str, int] = {}
        for rel in self.relationship_types(store):
            q = f"MATCH ()-[r:{quote_name(rel)}]->() RETURN count(r) AS n"
            rows = store.read(q, timeout_s=600)
            if rows[0]["n"]:
                by_type[rel] = int(rows[0]["n"])
        nodes = store.read("MATCH (n) RETURN count(n) AS n", timeout_s=600)[0]["n"]
        return counts_dict(int(nodes), by_label, by_type)

    def server_version(self, store: GraphStore) -> str:
        return store.driver_agent()

    # --- values and errors --------------------------------------------------------------

    def encode_value(self, value: Any) -> Any:
        return value

    def map_error(self, exc: Exception, where: str) -> GraphError:
        """One clear line for a driver error; `where` names the server (URI, database)."""
        if isinstance(exc, GraphError):
            return exc
        if isinstance(exc, nx.AuthError):
            return GraphUnavailableError(
                f"graph server at {where} refused the credentials (set EVAL_GRAPH_USER and "
                f"EVAL_GRAPH_PASSWORD): {_message(exc)}"
            )
        if isinstance(exc, nx.ServiceUnavailable | nx.SessionExpired | ConnectionError | OSError):
            return GraphUnavailableError(
                f"graph server at {where} does not answer ({_message(exc)}); "
                "`eval-pipeline graph status` shows the embedded server"
            )
        if isinstance(exc, nx.Neo4jError):
            code = exc.code or type(exc).__name__
            return GraphQueryError(
                f"graph server at {where} refused a statement: {code}: {_message(exc)}"
            )
        if isinstance(exc, nx.DriverError):
            return GraphQueryError(f"graph driver error talking to {where}: {_message(exc)}")
        return GraphQueryError(f"graph error at {where}: {type(exc).__name__}: {exc}")


def counts_dict(nodes: int, by_label: dict[str, int], by_type: dict[str, int]) -> dict[str, Any]:
    return {
        "nodes": nodes,
        "relationships": sum(by_type.values()),
        "labels": dict(sorted(by_label.items())),
        "relationship_types": dict(sorted(by_type.items())),
    }


def _message(exc: Exception) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(msg).split())[:300]


def delete_all_batched(store: GraphStore, batch: int = DELETE_BATCH) -> int:
    """DETACH DELETE everything but the lease, in bounded transactions (one big one exhausts
    the heap). The lease says which chain holds the instance: the wiping chain itself."""
    total = 0
    while True:
        rows = store.write(
            f"MATCH (n) WHERE NOT n:{schema.LEASE} WITH n LIMIT $limit DETACH DELETE n "
            "RETURN count(*) AS deleted",
            {"limit": batch},
        )
        deleted = int(rows[0]["deleted"]) if rows else 0
        total += deleted
        if deleted == 0:
            return total


def json_encode_maps(value: Any) -> Any:
    """Map values (and maps inside lists) as JSON text, for servers that refuse maps."""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value
