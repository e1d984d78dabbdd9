"""The one writer of reconciler output: a `SessionMemory` → graph writes, in one transaction.

`write_session_memory` sends a single portable Cypher statement (UNWIND lists inside unit
`CALL` subqueries, the form injection uses too) in an explicit write transaction, preceded —
when the session was reconciled before — by one statement removing that earlier output. Either
all of it lands, with the session marked `done`, or none of it does: ArcadeDB keeps the
partial writes of a failed auto-commit statement, so an explicit transaction is required.

Writes are serialised by `WRITE_LOCK`: entities are shared across sessions through MERGE on
`key`, and a MERGE racing another MERGE duplicates the node on ArcadeDB. The unique constraint
created by `ensure_reconcile_schema` is the second line of defence. Links are made by
unique-index lookups (turn, chunk, fact and episode ids), never by scanning a session.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from eval_pipeline.graph.schema import SESSION, TURN
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.models import SessionMemory

WRITE_LOCK = threading.Lock()
MAX_ERROR_CHARS = 1000

CLEAR_SESSION = f"""
MATCH (s:{SESSION} {{session_id: $session_id}})
OPTIONAL MATCH (s)-[:HAS_CHUNK|HAS_FACT]->()-[:MENTIONS|ABOUT]->(e:{schema.ENTITY})
WITH s, collect(DISTINCT e) AS entities
OPTIONAL MATCH (s)-[:HAS_CHUNK|HAS_FACT|HAS_EPISODE]->(old)
DETACH DELETE old
WITH DISTINCT s, entities
SET s.reconcile_status = '{schema.PENDING}'
WITH entities
UNWIND entities AS e
WITH e WHERE NOT (e)--()
DELETE e
RETURN count(e) AS orphans_removed
"""

WRITE_SESSION = f"""
MATCH (s:{SESSION} {{session_id: $session_id}})
CALL {{
  WITH s
  UNWIND $entities AS e
  MERGE (n:{schema.ENTITY} {{key: e.key}})
  ON CREATE SET n.name = e.name, n.type = e.type, n.reconciler = $reconciler
}}
CALL {{
  WITH s
  UNWIND $chunks AS c
  CREATE (s)-[:HAS_CHUNK]->(:{schema.CHUNK} {{chunk_id: c.chunk_id, session_id: $session_id,
      index: c.index, text: c.text, reconciler: $reconciler}})
}}
CALL {{
  WITH s
  UNWIND $chunk_turns AS l
  MATCH (c:{schema.CHUNK} {{chunk_id: l.id}})
  MATCH (t:{TURN} {{turn_id: l.turn_id}})
  CREATE (c)-[:FROM_TURN]->(t)
}}
CALL {{
  WITH s
  UNWIND $mentions AS l
  MATCH (c:{schema.CHUNK} {{chunk_id: l.id}})
  MATCH (e:{schema.ENTITY} {{key: l.key}})
  CREATE (c)-[:MENTIONS]->(e)
}}
CALL {{
  WITH s
  UNWIND $facts AS f
  CREATE (s)-[:HAS_FACT]->(:{schema.FACT} {{fact_id: f.fact_id, session_id: $session_id,
      text: f.text, fact_type: f.fact_type, valid_at: f.valid_at, reconciler: $reconciler}})
}}
CALL {{
  WITH s
  UNWIND $fact_turns AS l
  MATCH (f:{schema.FACT} {{fact_id: l.id}})
  MATCH (t:{TURN} {{turn_id: l.turn_id}})
  CREATE (f)-[:FROM_TURN]->(t)
}}
CALL {{
  WITH s
  UNWIND $fact_entities AS l
  MATCH (f:{schema.FACT} {{fact_id: l.id}})
  MATCH (e:{schema.ENTITY} {{key: l.key}})
  CREATE (f)-[:ABOUT]->(e)
}}
CALL {{
  WITH s
  UNWIND $episodes AS x
  CREATE (s)-[:HAS_EPISODE]->(:{schema.EPISODE} {{episode_id: x.episode_id,
      session_id: $session_id, summary: x.summary, started_at: s.started_at,
      reconciler: $reconciler}})
}}
CALL {{
  WITH s
  UNWIND $episode_turns AS l
  MATCH (x:{schema.EPISODE} {{episode_id: l.id}})
  MATCH (t:{TURN} {{turn_id: l.turn_id}})
  CREATE (x)-[:COVERS]->(t)
}}
SET s.reconcile_status = '{schema.DONE}', s.reconcile_error = null,
    s.reconciler = $reconciler, s.reconciler_version = $version,
    s.reconcile_schema = {schema.RECONCILE_SCHEMA_VERSION}, s.reconcile_pins = $pins_key
RETURN s.session_id AS session_id
"""

# Many untouched (pending) sessions in one statement: the same writes as WRITE_SESSION, per
# session row of `$sessions` (each row is `memory_params` without the shared fields). The
# entities of the whole batch are merged first, once per key, by MERGE_ENTITIES in the same
# transaction, so no two rows MERGE one key in one statement.
MERGE_ENTITIES = f"""
UNWIND $entities AS e
MERGE (n:{schema.ENTITY} {{key: e.key}})
ON CREATE SET n.name = e.name, n.type = e.type, n.reconciler = $reconciler
RETURN count(n) AS entities
"""

WRITE_SESSIONS = (
    f"UNWIND $sessions AS row\nMATCH (s:{SESSION} {{session_id: row.session_id}})\n"
    + WRITE_SESSION.split("\n}\n", 1)[1]  # every CALL after the entities' MERGE
    .replace("WITH s\n", "WITH s, row\n")
    .replace("$session_id", "row.session_id")
    .replace("UNWIND $", "UNWIND row.")
)
BATCH_SHARED_PARAMS = ("sessions", "reconciler", "version", "pins_key")

MARK_FAILED = f"""
MATCH (s:{SESSION} {{session_id: $session_id}})
SET s.reconcile_status = '{schema.FAILED}', s.reconcile_error = $reason,
    s.reconciler = $reconciler, s.reconciler_version = $version, s.reconcile_pins = $pins_key
RETURN s.session_id AS session_id
"""

# One node per configuration whose memory is in the graph (its pins as JSON text: ArcadeDB
# refuses map-valued properties). Written under the chain's lease, so MERGE cannot race.
RECORD_MEMORY = f"""
MERGE (m:{schema.MEMORY} {{pins_key: $pins_key}})
SET m.pins = $pins, m.recorded_at = $recorded_at
RETURN m.pins_key AS pins_key
"""


class SessionNotFound(LookupError):
    """The session to write is not in the graph (wiped or re-injected meanwhile)."""


def memory_params(memory: SessionMemory, version: str, pins_key: str | None) -> dict[str, Any]:
    """The statement's parameters: lists of flat maps of scalars (no map-valued property)."""
    return {
        "session_id": memory.session_id,
        "reconciler": memory.reconciler,
        "version": version,
        "pins_key": pins_key,
        "entities": [{"key": e.key, "name": e.name, "type": e.type} for e in memory.entities],
        "chunks": [
            {"chunk_id": c.chunk_id, "index": c.index, "text": c.text} for c in memory.chunks
        ],
        "chunk_turns": [
            {"id": c.chunk_id, "turn_id": t} for c in memory.chunks for t in c.turn_ids
        ],
        "mentions": [{"id": c.chunk_id, "key": k} for c in memory.chunks for k in c.entity_keys],
        "facts": [
            {"fact_id": f.fact_id, "text": f.text, "fact_type": f.fact_type, "valid_at": f.valid_at}
            for f in memory.facts
        ],
        "fact_turns": [{"id": f.fact_id, "turn_id": t} for f in memory.facts for t in f.turn_ids],
        "fact_entities": [{"id": f.fact_id, "key": k} for f in memory.facts for k in f.entity_keys],
        "episodes": (
            []
            if memory.episode is None
            else [{"episode_id": memory.episode.episode_id, "summary": memory.episode.summary}]
        ),
        "episode_turns": (
            []
            if memory.episode is None
            else [{"id": memory.episode.episode_id, "turn_id": t} for t in memory.episode.turn_ids]
        ),
    }


def write_session_memory(
    store: Any,
    memory: SessionMemory,
    *,
    version: str = "unversioned",
    replace: bool = True,
    pins_key: str | None = None,
) -> None:
    """Write `memory` and mark its session `done`, atomically.

    `replace` first removes what an earlier reconciliation wrote for the session (and the
    entities only it used); skip it only for sessions known to be untouched (pending).
    `pins_key` names the configuration (`schema.pins_key`) the memory came from.
    """
    statements: list[tuple[str, dict[str, Any]]] = []
    if replace:
        statements.append((CLEAR_SESSION, {"session_id": memory.session_id}))
    statements.append((WRITE_SESSION, memory_params(memory, version, pins_key)))
    with WRITE_LOCK:
        results = run_write_transaction(store, statements)
    if not results[-1]:
        raise SessionNotFound(f"session {memory.session_id!r} is not in the graph")


def write_sessions_memory(
    store: Any,
    memories: Sequence[SessionMemory],
    *,
    version: str = "unversioned",
    pins_key: str | None = None,
) -> set[str]:
    """Write the memories of untouched (pending) sessions in one transaction, all or nothing,
    and mark them `done`; return the ids of the sessions the graph did not have (nothing was
    written for them). One transaction for many sessions: the writes of one session are the
    same as `write_session_memory`'s, without a transaction's fixed cost each."""
    if not memories:
        return set()
    reconcilers = {m.reconciler for m in memories}
    if len(reconcilers) != 1:
        raise ValueError(f"one reconciler per batch, not {sorted(reconcilers)}")
    entities: dict[str, dict[str, Any]] = {}
    sessions: list[dict[str, Any]] = []
    shared = ("reconciler", "version", "pins_key", "entities")
    for memory in memories:
        params = memory_params(memory, version, pins_key)
        for e in params["entities"]:
            entities.setdefault(e["key"], e)
        sessions.append({k: v for k, v in params.items() if k not in shared})
    common = {"reconciler": reconcilers.pop(), "version": version, "pins_key": pins_key}
    statements = [
        (MERGE_ENTITIES, {"entities": list(entities.values()), "reconciler": common["reconciler"]}),
        (WRITE_SESSIONS, {**common, "sessions": sessions}),
    ]
    with WRITE_LOCK:
        results = run_write_transaction(store, statements)
    written = {str(row["session_id"]) for row in results[-1]}
    return {m.session_id for m in memories} - written


def mark_failed(
    store: Any,
    session_id: str,
    reason: str,
    *,
    reconciler: str,
    version: str,
    pins_key: str | None = None,
    clear: bool = False,
) -> None:
    """Record why a session failed. With `clear`, what it had before is removed in the same
    transaction (memory another configuration made must not pass for this one's); without,
    it is left as it was (a retry of the same configuration)."""
    params = {
        "session_id": session_id,
        "reason": reason[:MAX_ERROR_CHARS],
        "reconciler": reconciler,
        "version": version,
        "pins_key": pins_key,
    }
    statements: list[tuple[str, dict[str, Any]]] = []
    if clear:
        statements.append((CLEAR_SESSION, {"session_id": session_id}))
    statements.append((MARK_FAILED, params))
    with WRITE_LOCK:
        run_write_transaction(store, statements)


def record_memory(store: Any, pins_key: str, pins: dict[str, Any], recorded_at: str) -> None:
    """Register a configuration whose memory is now in the graph (see `schema.MEMORY`)."""
    params = {
        "pins_key": pins_key,
        "pins": json.dumps(pins, sort_keys=True, default=str),
        "recorded_at": recorded_at,
    }
    with WRITE_LOCK:
        run_write_transaction(store, [(RECORD_MEMORY, params)])


def run_write_transaction(
    store: Any, statements: Sequence[tuple[str, dict[str, Any]]]
) -> list[list[dict[str, Any]]]:
    """Run `statements` in one write transaction (ArcadeDB keeps partial auto-commit writes)."""
    return list(store.write_transaction(list(statements)))
