"""Namespaces in the graph: which sessions each one holds (in time order), its memory read
back as a `NamespaceView`, and that memory written, one namespace per transaction.

    (:Entity {key: "<namespace>|<local key>", local_key, namespace, name, type, norm,
              aliases: [local keys], reconciler})
    (:Fact {fact_id: "<namespace>|<session_id>#fact<n>", namespace, session_id, text,
            fact_type, subject, attribute, qualifier, value, valid_at, invalid_at,
            superseded_by, reconciler})
    (:Session)-[:HAS_FACT]->(:Fact)-[:FROM_TURN]->(:Turn)    provenance
    (:Fact)-[:ABOUT]->(:Entity)
    (:Fact)-[:SUPERSEDED_BY]->(:Fact)                         the successor, same namespace
    (:MemoryNamespace {namespace, pins_key, sessions: [session ids, time order], reconciler,
                       recorded_at})                          what was consolidated, by whom

A namespace is consolidated again from its memory so far when only later sessions were added
under the same pins; otherwise (other pins, a session redone, an earlier session added) it is
rebuilt from nothing. Either way its nodes are replaced in one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.graph.schema import HAYSTACK, QUESTION, SESSION, TURN
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.namespace import (
    NamespaceEntity,
    NamespaceFact,
    NamespaceView,
    namespace_of,
    scoped_key,
)
from eval_pipeline.reconcile.reader import load_sessions
from eval_pipeline.reconcile.writer import WRITE_LOCK, run_write_transaction

_NO_ROW_CAP = 10_000_000
LOAD_BATCH = 200

READ_HAYSTACKS = f"""
MATCH (q:{QUESTION})-[:{HAYSTACK}]->(s:{SESSION})
RETURN q.question_id AS question_id, s.session_id AS session_id, s.started_at AS started_at
"""

READ_MARKERS = f"""
MATCH (m:{schema.NAMESPACE})
RETURN m.namespace AS namespace, m.pins_key AS pins_key, m.sessions AS sessions
"""

READ_ENTITIES = f"""
MATCH (e:{schema.ENTITY} {{namespace: $namespace}})
RETURN e.local_key AS key, e.name AS name, e.type AS type, e.aliases AS aliases
"""

READ_FACTS = f"""
MATCH (f:{schema.FACT} {{namespace: $namespace}})
OPTIONAL MATCH (f)-[:FROM_TURN]->(t:{TURN})
WITH f, collect(DISTINCT t.turn_id) AS turn_ids
OPTIONAL MATCH (f)-[:ABOUT]->(e:{schema.ENTITY})
RETURN f.fact_id AS fact_id, f.session_id AS session_id, f.text AS text,
       f.fact_type AS fact_type, f.subject AS subject, f.attribute AS attribute,
       f.qualifier AS qualifier, f.value AS value, f.valid_at AS valid_at,
       f.invalid_at AS invalid_at, f.superseded_by AS superseded_by, turn_ids,
       collect(DISTINCT e.local_key) AS entity_keys
"""

# One statement per label, each matched through its `namespace` index.
CLEAR_NAMESPACE: tuple[str, ...] = tuple(
    f"MATCH (n:{label} {{namespace: $namespace}}) DETACH DELETE n"
    for label in (schema.FACT, schema.ENTITY, schema.NAMESPACE)
)
CLEAR_ALL_NAMESPACES: tuple[str, ...] = tuple(
    f"MATCH (n:{label}) WHERE n.namespace IS NOT NULL DETACH DELETE n"
    for label in (schema.FACT, schema.ENTITY, schema.NAMESPACE)
)

WRITE_NAMESPACE = f"""
CALL {{
  UNWIND $entities AS e
  CREATE (:{schema.ENTITY} {{key: e.key, local_key: e.local_key, namespace: $namespace,
      name: e.name, type: e.type, norm: e.norm, aliases: e.aliases, reconciler: $reconciler}})
}}
CALL {{
  UNWIND $facts AS f
  MATCH (s:{SESSION} {{session_id: f.session_id}})
  CREATE (s)-[:HAS_FACT]->(:{schema.FACT} {{fact_id: f.fact_id, namespace: $namespace,
      session_id: f.session_id, text: f.text, fact_type: f.fact_type, subject: f.subject,
      attribute: f.attribute, qualifier: f.qualifier, value: f.value, valid_at: f.valid_at,
      invalid_at: f.invalid_at, superseded_by: f.superseded_by, reconciler: $reconciler}})
}}
CALL {{
  UNWIND $fact_turns AS l
  MATCH (f:{schema.FACT} {{fact_id: l.id}})
  MATCH (t:{TURN} {{turn_id: l.turn_id}})
  CREATE (f)-[:FROM_TURN]->(t)
}}
CALL {{
  UNWIND $fact_entities AS l
  MATCH (f:{schema.FACT} {{fact_id: l.id}})
  MATCH (e:{schema.ENTITY} {{key: l.key}})
  CREATE (f)-[:ABOUT]->(e)
}}
CALL {{
  UNWIND $successors AS l
  MATCH (a:{schema.FACT} {{fact_id: l.id}})
  MATCH (b:{schema.FACT} {{fact_id: l.by}})
  CREATE (a)-[:SUPERSEDED_BY]->(b)
}}
CREATE (m:{schema.NAMESPACE} {{namespace: $namespace, pins_key: $pins_key,
    sessions: $sessions, reconciler: $reconciler, recorded_at: $recorded_at}})
RETURN m.namespace AS namespace
"""


class NamespaceReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    namespaces: int
    consolidated: int  # namespaces written this run
    rebuilt: int  # ... of which from nothing
    skipped_current: int  # already consolidated under these pins
    sessions_consolidated: int  # (namespace, session) pairs fed to `consolidate`
    sessions_extracted: int  # distinct sessions extracted by the reconciler (cache misses)
    sessions_without_namespace: int  # in no question's haystack: no namespace memory
    entities: int
    facts: int
    superseded: int
    merged_aliases: int
    seconds: float


def read_namespaces(store: Any) -> tuple[dict[str, list[str]], int]:
    """namespace → its session ids in time order (start, then id), and how many sessions are
    in no haystack."""
    rows = store.read(READ_HAYSTACKS, timeout_s=600, max_rows=_NO_ROW_CAP)
    members: dict[str, dict[str, str]] = {}
    for r in rows:
        members.setdefault(namespace_of(str(r["question_id"])), {})[str(r["session_id"])] = str(
            r["started_at"] or ""
        )
    total = store.read(f"MATCH (s:{SESSION}) RETURN count(s) AS n", timeout_s=600)[0]["n"]
    covered = {sid for sessions in members.values() for sid in sessions}
    ordered = {
        ns: [sid for sid, _ in sorted(sessions.items(), key=lambda kv: (kv[1], kv[0]))]
        for ns, sessions in sorted(members.items())
    }
    return ordered, int(total) - len(covered)


def read_view(store: Any, namespace: str, sessions: list[str]) -> NamespaceView:
    """The namespace's memory as the graph holds it."""
    entities = [
        NamespaceEntity(
            key=r["key"], name=r["name"], type=r["type"], aliases=tuple(r["aliases"] or ())
        )
        for r in store.read(READ_ENTITIES, {"namespace": namespace}, timeout_s=600)
    ]
    facts = [
        NamespaceFact(
            fact_id=r["fact_id"],
            session_id=r["session_id"],
            text=r["text"],
            fact_type=r["fact_type"],
            subject=r["subject"],
            attribute=r["attribute"],
            qualifier=r["qualifier"],
            value=r["value"],
            valid_at=r["valid_at"],
            invalid_at=r["invalid_at"],
            superseded_by=r["superseded_by"],
            turn_ids=tuple(sorted(r["turn_ids"])),
            entity_keys=tuple(sorted(k for k in r["entity_keys"] if k)),
        )
        for r in store.read(READ_FACTS, {"namespace": namespace}, timeout_s=600)
    ]
    facts.sort(key=lambda f: (f.valid_at or "", f.fact_id))
    return NamespaceView(namespace, entities, facts, sessions)


def namespace_params(view: NamespaceView, *, pins_key: str, reconciler: str) -> dict[str, Any]:
    ns = view.namespace
    facts = list(view.facts.values())
    return {
        "namespace": ns,
        "pins_key": pins_key,
        "reconciler": reconciler,
        "sessions": list(view.sessions),
        "recorded_at": datetime.now(UTC).isoformat(),
        "entities": [
            {
                "key": scoped_key(ns, e.key),
                "local_key": e.key,
                "name": e.name,
                "type": e.type,
                "norm": e.key.partition(":")[2],
                "aliases": list(e.aliases),
            }
            for e in view.entities.values()
        ],
        "facts": [
            {
                "fact_id": f.fact_id,
                "session_id": f.session_id,
                "text": f.text,
                "fact_type": f.fact_type,
                "subject": f.subject,
                "attribute": f.attribute,
                "qualifier": f.qualifier,
                "value": f.value,
                "valid_at": f.valid_at,
                "invalid_at": f.invalid_at,
                "superseded_by": f.superseded_by,
            }
            for f in facts
        ],
        "fact_turns": [{"id": f.fact_id, "turn_id": t} for f in facts for t in f.turn_ids],
        "fact_entities": [
            {"id": f.fact_id, "key": scoped_key(ns, k)} for f in facts for k in f.entity_keys
        ],
        "successors": [{"id": f.fact_id, "by": f.superseded_by} for f in facts if f.superseded_by],
    }


def write_namespace(store: Any, view: NamespaceView, *, pins_key: str, reconciler: str) -> None:
    """Replace the namespace's memory with `view`, atomically."""
    statements: list[tuple[str, dict[str, Any]]] = [
        (statement, {"namespace": view.namespace}) for statement in CLEAR_NAMESPACE
    ]
    statements += [
        (WRITE_NAMESPACE, namespace_params(view, pins_key=pins_key, reconciler=reconciler)),
    ]
    with WRITE_LOCK:
        run_write_transaction(store, statements)


def clear_all_namespaces(store: Any) -> None:
    """Remove every namespace's memory (another, session-level reconciler takes over)."""
    with WRITE_LOCK:
        run_write_transaction(store, [(statement, {}) for statement in CLEAR_ALL_NAMESPACES])


def has_namespaces(store: Any) -> bool:
    rows = store.read(f"MATCH (m:{schema.NAMESPACE}) RETURN count(m) AS n", timeout_s=600)
    return bool(rows and rows[0]["n"])


def consolidate_namespaces(
    store: Any,
    reconciler: Any,
    *,
    pins_key: str,
    touched: set[str],
    progress: Callable[[int, int], None] | None = None,
    audit: Any = None,
) -> NamespaceReport:
    """Consolidate every namespace not yet consolidated under `pins_key` (or holding a
    session in `touched`, whose session-level memory was rewritten this run)."""
    started = time.perf_counter()
    namespaces, orphans = read_namespaces(store)
    markers = {
        r["namespace"]: r for r in store.read(READ_MARKERS, timeout_s=600, max_rows=_NO_ROW_CAP)
    }
    # Namespaces in the graph that no haystack names any more are stale: remove them.
    for stale in sorted(set(markers) - set(namespaces)):
        with WRITE_LOCK:
            run_write_transaction(store, [(q, {"namespace": stale}) for q in CLEAR_NAMESPACE])
    consolidated = rebuilt = skipped = pairs = 0
    entities = facts = superseded = merged = 0
    name = str(getattr(reconciler, "name", type(reconciler).__name__))
    for i, (ns, sessions) in enumerate(namespaces.items(), 1):
        marker = markers.get(ns)
        done_before = list(marker["sessions"] or []) if marker else []
        same_pins = marker is not None and marker["pins_key"] == pins_key
        untouched = not (set(done_before) & touched)
        if same_pins and untouched and done_before == sessions:
            skipped += 1
            continue
        if same_pins and untouched and sessions[: len(done_before)] == done_before:
            view = read_view(store, ns, done_before)  # only later sessions are new
            todo = sessions[len(done_before) :]
        else:
            view = NamespaceView(ns)
            todo = sessions
            rebuilt += 1
        cached = getattr(reconciler, "extracted", None)
        for batch_start in range(0, len(todo), LOAD_BATCH):
            batch = todo[batch_start : batch_start + LOAD_BATCH]
            extractions = {
                sid: hit for sid in batch if callable(cached) and (hit := cached(sid)) is not None
            }
            missing = [sid for sid in batch if sid not in extractions]
            for session in load_sessions(store, missing) if missing else []:
                if audit is not None:  # reconcile.marker_audit.SessionAudit
                    audit.see(session)
                extractions[session.session_id] = reconciler.extract(session)
            for sid in batch:
                if sid not in extractions:
                    continue  # no longer in the graph
                change_set = reconciler.consolidate(view, extractions[sid])
                merged += sum(1 for c in change_set.changes if c.op == "merge_entities")
                view.apply(change_set)
                pairs += 1
        write_namespace(store, view, pins_key=pins_key, reconciler=name)
        consolidated += 1
        entities += len(view.entities)
        facts += len(view.facts)
        superseded += sum(1 for f in view.facts.values() if f.superseded_by)
        if progress is not None:
            progress(i, len(namespaces))
    return NamespaceReport(
        namespaces=len(namespaces),
        consolidated=consolidated,
        rebuilt=rebuilt,
        skipped_current=skipped,
        sessions_consolidated=pairs,
        sessions_extracted=int(getattr(reconciler, "extractions", 0)),
        sessions_without_namespace=orphans,
        entities=entities,
        facts=facts,
        superseded=superseded,
        merged_aliases=merged,
        seconds=round(time.perf_counter() - started, 3),
    )
