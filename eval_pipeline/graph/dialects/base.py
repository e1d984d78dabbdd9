"""What every dialect provides, with portable defaults; a backend module overrides the rest.

Everything here is plain Cypher both servers run. A dialect receives the store to run its
statements (`store.write`, `store.read`, `store.autocommit`: the `DialectStore` protocol of
`store_protocol.py`); what it learns about the server it talks to (Memgraph: the version and
storage mode, read once by `on_connect`) it keeps, so a store holds one dialect instance per
server (`GraphStore.dialect`). Every difference between the backends is a method here, listed
in `eval_pipeline.graph.dialects.DIFFERENCES`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import neo4j.exceptions as nx
from pydantic import BaseModel, Field

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects.store_protocol import DialectStore
from eval_pipeline.graph.errors import (
    GraphError,
    GraphQueryError,
    GraphUnavailableError,
)

DELETE_BATCH = 10_000
# Labels (ArcadeDB: types) the wipe never removes: the lease (which chain holds the instance)
# and the claim (the instance is ours, and what we last wrote to it).
KEPT_LABELS: tuple[str, ...] = (schema.LEASE, schema.CLAIM)
# The key of an agent read's id in its transaction metadata (`Dialect.mark_read`).
READ_MARK_KEY = "eval_pipeline_read"


def quote_name(name: str) -> str:
    """A label, type or property name as a Cypher identifier (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class TextIndex:
    """A full-text index a server lists: its name, label and properties (empty: every text
    property of the label)."""

    name: str
    label: str
    properties: tuple[str, ...] = ()

    def covers(self, label: str, prop: str) -> bool:
        return self.label == label and (not self.properties or prop in self.properties)


@dataclass(frozen=True)
class VectorIndex:
    """A vector index over node property `label.prop` a server lists (dimensions when it
    says)."""

    name: str
    label: str
    prop: str
    dims: int | None = None

    def covers(self, label: str, prop: str) -> bool:
        return self.label == label and self.prop == prop


class Inventory(BaseModel):
    """Everything an instance holds, by kind: what "empty" and "written since" compare.

    Record counts by label or type, plus the names of schema objects. `complete` is False
    when some kind could not be listed (ArcadeDB without its HTTP API cannot see document
    records), so emptiness cannot be proven.
    """

    complete: bool = True
    nodes: int = 0
    labels: dict[str, int] = Field(default_factory=dict)  # ArcadeDB: vertex types
    relationships: int = 0
    relationship_types: dict[str, int] = Field(default_factory=dict)
    documents: dict[str, int] = Field(default_factory=dict)  # ArcadeDB document types
    types: list[str] = Field(default_factory=list)  # ArcadeDB: every type, empty ones too
    indexes: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    triggers: list[str] = Field(default_factory=list)
    # A finding, not a count: records already there were changed (a property edited, or
    # records deleted and re-created), seen by the content digest (`ownership.py`).
    content_changed: bool = False

    def without(self, labels: Iterable[str], *, empty_types: Iterable[str] = ()) -> Inventory:
        """This inventory minus `labels` (their records and types; ours: lease, claim), and
        minus the types in `empty_types` when they hold no record (our bookkeeping types)."""
        drop = set(labels)
        idle = set(empty_types)
        label_counts = {k: v for k, v in self.labels.items() if k not in drop}
        documents = {k: v for k, v in self.documents.items() if k not in drop}
        edges = {k: v for k, v in self.relationship_types.items() if k not in drop}
        held = {**self.labels, **self.documents, **self.relationship_types}
        types = [t for t in self.types if t not in drop and not (t in idle and held.get(t, 0) == 0)]
        return self.model_copy(
            update={
                "nodes": max(0, self.nodes - sum(v for k, v in self.labels.items() if k in drop)),
                "labels": label_counts,
                "relationships": max(
                    0,
                    self.relationships
                    - sum(v for k, v in self.relationship_types.items() if k in drop),
                ),
                "relationship_types": edges,
                "documents": documents,
                "types": types,
            }
        )

    def added_since(self, before: Inventory) -> Inventory:
        """What this inventory holds beyond `before`: record increases, new schema objects.
        Decreases are not counted (a delete is not someone else's data to protect)."""

        def grown(now: Mapping[str, int], then: Mapping[str, int]) -> dict[str, int]:
            return {k: v - then.get(k, 0) for k, v in now.items() if v > then.get(k, 0)}

        labels = grown(self.labels, before.labels)
        edges = grown(self.relationship_types, before.relationship_types)
        # A node may carry several labels (Memgraph): the total moved at least as much as
        # any one label did.
        nodes = max(self.nodes - before.nodes, max(labels.values(), default=0), 0)
        rels = max(self.relationships - before.relationships, sum(edges.values()), 0)
        return Inventory(
            complete=self.complete and before.complete,
            nodes=nodes,
            labels=labels,
            relationships=rels,
            relationship_types=edges,
            documents=grown(self.documents, before.documents),
            types=[t for t in self.types if t not in set(before.types)],
            indexes=[i for i in self.indexes if i not in set(before.indexes)],
            constraints=[c for c in self.constraints if c not in set(before.constraints)],
            triggers=[t for t in self.triggers if t not in set(before.triggers)],
        )

    def is_empty(self) -> bool:
        return not (
            self.nodes
            or self.relationships
            or any(self.documents.values())
            or self.types
            or self.indexes
            or self.constraints
            or self.triggers
            or self.content_changed
        )

    def items(self) -> int:
        """How many things this inventory names (records and schema objects)."""
        return (
            self.nodes
            + self.relationships
            + sum(self.documents.values())
            + len(self._bare_types())
            + len(self.indexes)
            + len(self.constraints)
            + len(self.triggers)
        )

    def _bare_types(self) -> list[str]:
        """Types that hold no record here (a type with records is named by its records)."""
        held = {
            name
            for counts in (self.labels, self.relationship_types, self.documents)
            for name, n in counts.items()
            if n > 0
        }
        return [t for t in self.types if t not in held]

    def describe(self) -> str:
        """One phrase: "3 document records of type Invoice and 1 index (Invoice[n])"."""
        parts: list[str] = []
        for total, by_name, noun in (
            (self.nodes, self.labels, "node"),
            (self.relationships, self.relationship_types, "relationship"),
            (sum(self.documents.values()), self.documents, "document record"),
        ):
            if total > 0:
                parts.append(_records_phrase(total, by_name, noun))
        for names, singular, plural in (
            (self._bare_types(), "type", "types"),
            (self.indexes, "index", "indexes"),
            (self.constraints, "constraint", "constraints"),
            (self.triggers, "trigger", "triggers"),
        ):
            if names:
                noun = singular if len(names) == 1 else plural
                parts.append(f"{len(names)} {noun} ({_names(names)})")
        if self.content_changed:
            parts.append(
                "changes to records already there (a property edited, or records deleted "
                "and re-created)"
            )
        if not parts:
            return "nothing"
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _names(names: Iterable[str], limit: int = 3) -> str:
    names = sorted(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _records_phrase(total: int, by_name: Mapping[str, int], noun: str) -> str:
    counted = {k: v for k, v in by_name.items() if v > 0}
    head = f"{total} {noun}{'' if total == 1 else 's'}"
    if not counted:
        return head
    if len(counted) == 1:
        return f"{head} of type {next(iter(counted)) or '(none)'}"
    top = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))
    listed = ", ".join(f"{k or '(none)'} ({v})" for k, v in top[:3])
    more = f" and {len(top) - 3} more" if len(top) > 3 else ""
    return f"{head} of types {listed}{more}"


class Dialect:
    name = "portable"
    # The database a run names when the user gives none.
    default_database = "eval"

    # --- connection ---------------------------------------------------------------------

    def session_database(self, database: str | None) -> str | None:
        return database or None

    def on_connect(self, store: DialectStore) -> None:
        """Learn what this server is (once per server) and refuse one the pipeline cannot
        use; called by `GraphStore.ensure_running` after the first answer."""

    def require_transactions(self, store: DialectStore, purpose: str) -> None:
        """Raise GraphError when the server would not run `purpose`'s explicit write
        transactions atomically."""

    # --- wipe and indexes ---------------------------------------------------------------

    def wipe(self, store: DialectStore) -> None:
        delete_all_batched(store)
        for stmt in self.drop_index_statements(store):
            store.autocommit(stmt)

    def drop_index_statements(self, store: DialectStore) -> list[str]:
        return []

    def inventory(self, store: DialectStore) -> Inventory:
        """What the instance holds (every label, our own included). Portable Cypher sees
        nodes and relationships only, so the answer is marked incomplete."""
        nodes = store.read("MATCH (n) RETURN count(n) AS n", timeout_s=600)[0]["n"]
        labels = store.read(
            "MATCH (n) UNWIND labels(n) AS l RETURN l AS label, count(*) AS n", timeout_s=600
        )
        rels = store.read("MATCH ()-[r]->() RETURN type(r) AS type, count(*) AS n", timeout_s=600)
        return Inventory(
            complete=False,
            nodes=int(nodes),
            labels={r["label"]: int(r["n"]) for r in labels},
            relationships=sum(int(r["n"]) for r in rels),
            relationship_types={r["type"]: int(r["n"]) for r in rels},
        )

    def create_index_statements(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        raise NotImplementedError

    def create_indexes(
        self, store: DialectStore, pairs: Iterable[tuple[str, str]] = schema.PROPERTY_INDEXES
    ) -> None:
        for stmt in self.create_index_statements(pairs):
            store.autocommit(stmt)

    def reconcile_index_statements(self, indexes: Iterable[tuple[str, str, bool]]) -> list[str]:
        """Id indexes and unique key constraints, one statement each, for (label, property,
        unique) triples (the reconciler's schema)."""
        raise NotImplementedError

    # --- full-text indexes and search ---------------------------------------------------
    # One builder for every full-text statement the pipeline sends: the turn search below,
    # retrieval (`retrieve/fulltext_queries.py`) and the agent's schema description all take
    # their CALL clause and query text from here. Queries arrive already escaped
    # (`retrieve.terms.or_query`): the dialect adds syntax, never escapes again.

    def text_index_name(self, label: str, prop: str) -> str:
        """The name the pipeline gives (or the server gives) its index over label.prop."""
        raise NotImplementedError

    def create_text_index(self, store: DialectStore, label: str, prop: str) -> None:
        """Create the full-text index over label.prop; one that exists already is fine."""
        raise NotImplementedError

    def drop_text_index(self, store: DialectStore, label: str, prop: str) -> None:
        """Drop the pipeline's full-text index over label.prop; a missing one is fine."""
        raise NotImplementedError

    def require_text_index(self, store: DialectStore, label: str, prop: str) -> None:
        """Raise unless the server lists the pipeline's full-text index over label.prop.

        Every `create_text_index` ends with it: a server may answer a CREATE it did not carry
        out with a notification rather than an error (Memgraph 3.10: "Text index on label ...
        already exists" for a name taken by an index elsewhere), and a search over a missing
        index would then fail, or find nothing, far from its cause."""
        name = self.text_index_name(label, prop)
        listed = self.text_indexes(store)
        if any(i.name == name and i.covers(label, prop) for i in listed):
            return
        seen = ", ".join(f"{i.name} on {i.label}" for i in listed) or "none"
        raise GraphQueryError(
            f"graph server at {store.where} accepted the full-text index {name} over "
            f"{label}.{prop} but does not list it (full-text indexes listed: {seen})"
        )

    def text_indexes(self, store: DialectStore) -> list[TextIndex]:
        """Every full-text index the server lists."""
        raise NotImplementedError

    def create_fulltext_index(self, store: DialectStore) -> None:
        """The full-text index over turn text (injection)."""
        self.create_text_index(store, *schema.FULLTEXT_PROPERTY)

    def fulltext_call(self) -> str:
        """The CALL clause yielding `node, score` for `$index` and `$query` (and `$fetch`,
        how many hits to ask the engine for, where it takes one)."""
        raise NotImplementedError

    def fulltext_call_bounded(self) -> str | None:
        """A CALL clause like `fulltext_call` that yields only the best `$fetch` hits, in score
        order (None where the engine has none): retrieval asks for the top hits first and
        widens only when they cannot decide its top k (`retrieve.fulltext_queries.search`)."""
        return None

    def fulltext_query(self, prop: str, or_query: str) -> str:
        """The engine's query string over `prop` for an escaped disjunction of terms."""
        return or_query

    def fulltext_params(self, index: str, prop: str, or_query: str, fetch: int) -> dict[str, Any]:
        """Parameters of `fulltext_call`."""
        return {"index": index, "query": self.fulltext_query(prop, or_query)}

    def fulltext_example(self, index: str, prop: str) -> str:
        """A literal search call for an agent to copy (schema description)."""
        raise NotImplementedError

    def fulltext_search(self, query: str, limit: int) -> tuple[str, dict[str, Any]]:
        """(Cypher, params) returning `turn_id` and `score` of the best-matching turns for an
        escaped disjunction of terms."""
        label, prop = schema.FULLTEXT_PROPERTY
        cypher = (
            f"{self.fulltext_call()}\n"
            "RETURN node.turn_id AS turn_id, score ORDER BY score DESC LIMIT $limit"
        )
        params = self.fulltext_params(self.text_index_name(label, prop), prop, query, limit)
        return cypher, {**params, "limit": limit}

    # --- vector indexes and search -----------------------------------------------------
    # Dense retrieval (`retrieve/dense.py`): embeddings are a node property, indexed by the
    # server's own vector index (written and indexed by `graph/vectors.py`, never by a read).
    # Cosine similarity throughout: the embedder's vectors are normalised.

    def vector_index_name(self, label: str, prop: str) -> str:
        """The name of the pipeline's vector index over label.prop."""
        raise NotImplementedError

    def create_vector_index(
        self, store: DialectStore, label: str, prop: str, dims: int, capacity: int
    ) -> None:
        """Create the cosine vector index over label.prop (`dims` wide, room for `capacity`
        vectors where the server sizes it up front); an existing one is fine. Ends with
        `require_vector_index`."""
        raise NotImplementedError

    def vector_indexes(self, store: DialectStore) -> list[VectorIndex]:
        """Every vector index over node properties the server lists."""
        raise NotImplementedError

    def require_vector_index(self, store: DialectStore, label: str, prop: str) -> None:
        """Raise unless the server lists the pipeline's vector index over label.prop (a
        server may answer a failed CREATE with a notification)."""
        name = self.vector_index_name(label, prop)
        listed = self.vector_indexes(store)
        if any(i.name == name and i.covers(label, prop) for i in listed):
            return
        seen = ", ".join(f"{i.name} on {i.label}.{i.prop}" for i in listed) or "none"
        raise GraphQueryError(
            f"graph server at {store.where} accepted the vector index {name} over "
            f"{label}.{prop} but does not list it (vector indexes listed: {seen})"
        )

    def vector_call(self) -> str:
        """The CALL clause yielding `node, score` (higher is closer) for the `$k` nearest
        neighbours of `$vector` in index `$index` (approximate: the server's ANN index)."""
        raise NotImplementedError

    def vector_similarity(self, left: str, right: str) -> str:
        """A Cypher expression: the cosine similarity of two list expressions (exact; for
        scoring a question's haystack, a few hundred nodes, without the index)."""
        raise NotImplementedError

    # --- reads by agents ----------------------------------------------------------------

    def bound_read(self, query: str) -> str:
        """`query` with the server-side bounds this dialect can attach to one statement
        (Memgraph: a per-query memory limit); as is where there are none."""
        return query

    def mark_read(self, query: str, read_id: str) -> tuple[str, dict[str, str]]:
        """`query` as sent for the agent read `read_id`, and the metadata of its transaction:
        what lets `cancel_query` pick out this read, and no other, among the server's. Here
        the transaction metadata alone carries the id; a dialect whose server lists no
        metadata marks the text instead."""
        return query, {READ_MARK_KEY: read_id}

    def cancel_query(
        self, store: DialectStore, query: str, submitted: float, read_id: str | None = None
    ) -> list[str]:
        """Stop `query` (sent at wall-clock `submitted`, marked with `read_id` by `mark_read`
        when given) on the server after our timeout; the ids of what was stopped. Best
        effort: [] when the server offers no way."""
        return []

    def schema_state(self, store: DialectStore) -> Any:
        """A JSON-able description of the schema (types, indexes, constraints, triggers)
        leaving out what a read changes; hashed by `graph.state`. None: content
        only."""
        return None

    # --- introspection ------------------------------------------------------------------

    def labels(self, store: DialectStore) -> list[str]:
        rows = store.read("MATCH (n) UNWIND labels(n) AS l RETURN DISTINCT l", timeout_s=600)
        return sorted(r["l"] for r in rows)

    def relationship_types(self, store: DialectStore) -> list[str]:
        rows = store.read("MATCH ()-[r]->() RETURN DISTINCT type(r) AS t", timeout_s=600)
        return sorted(r["t"] for r in rows)

    def property_keys(self, store: DialectStore) -> dict[str, list[str]]:
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

    def counts(self, store: DialectStore) -> dict[str, Any]:
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

    def server_version(self, store: DialectStore) -> str:
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


def delete_all_batched(store: DialectStore, batch: int = DELETE_BATCH) -> int:
    """DETACH DELETE everything but the lease and the claim, in bounded transactions (one big
    one exhausts the heap). The lease says which chain holds the instance (the wiping chain
    itself); the claim stays so that a wipe cut short still leaves the instance ours."""
    keep = " AND ".join(f"NOT n:{quote_name(label)}" for label in KEPT_LABELS)
    total = 0
    while True:
        rows = store.write(
            f"MATCH (n) WHERE {keep} WITH n LIMIT $limit DETACH DELETE n "
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


# --- schema descriptions (graph.state hashes them) ---------------------------------

# Fields of a listed index or constraint that change without any write.
VOLATILE_FIELDS = frozenset(
    {"id", "state", "populationPercent", "lastRead", "readCount", "count", "size", "compacting"}
)


def _stable(row: Any) -> Any:
    if isinstance(row, dict):
        return {k: _stable(v) for k, v in sorted(row.items()) if k not in VOLATILE_FIELDS}
    if isinstance(row, list):
        return [_stable(v) for v in row]
    return row


def sorted_rows(rows: list[dict]) -> list[Any]:
    """Rows without their volatile fields, in a fixed order (the server's order is not)."""
    stable = [_stable(r) for r in rows]
    return sorted(stable, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def listing(run: Any, statement: str) -> Any:
    """`sorted_rows` of `statement`; a statement this server refuses is refused every time,
    so say so, deterministically."""
    try:
        return sorted_rows(run(statement))
    except GraphQueryError as exc:
        return {"refused": statement, "by": type(exc).__name__}
