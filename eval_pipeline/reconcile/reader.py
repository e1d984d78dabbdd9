"""What the reconciliation stage reads from the graph: session statuses, sessions with their
turns (in batches, so a 20k-session graph never travels in one message), and counts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from eval_pipeline.graph.schema import HAS_TURN, SESSION, TURN
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.memory_system import DEFAULT_SEARCHABLE
from eval_pipeline.reconcile.models import SessionInput, SessionTurn

READ_STATUSES = f"""
MATCH (s:{SESSION})
RETURN s.session_id AS session_id, s.reconcile_status AS status, s.reconcile_pins AS pins_key
"""

READ_MEMORY = f"""
MATCH (m:{schema.MEMORY})
RETURN m.pins_key AS pins_key, m.pins AS pins
"""

READ_SESSIONS = f"""
UNWIND $ids AS sid
MATCH (s:{SESSION} {{session_id: sid}})
OPTIONAL MATCH (s)-[:{HAS_TURN}]->(t:{TURN})
RETURN s.session_id AS session_id, s.date AS date, s.started_at AS started_at,
       t.turn_id AS turn_id, t.role AS role, t.text AS text, t.index AS index,
       t.timestamp AS timestamp
"""

COUNT_LABEL = "MATCH (n:{label}) RETURN count(n) AS n"

_NO_ROW_CAP = 10_000_000


class SessionState(NamedTuple):
    status: str
    pins_key: str | None  # the configuration that reconciled (or failed) it; None: never


def read_states(store: Any) -> dict[str, SessionState]:
    """session_id → (reconcile status, pins key) for every session."""
    rows = store.read(READ_STATUSES, timeout_s=600, max_rows=_NO_ROW_CAP)
    return {
        r["session_id"]: SessionState(r["status"] or schema.PENDING, r.get("pins_key"))
        for r in rows
    }


def read_statuses(store: Any) -> dict[str, str]:
    """session_id → reconcile status for every session (a missing status reads as pending)."""
    return {sid: state.status for sid, state in read_states(store).items()}


def memory_census(store: Any) -> dict[str, Any]:
    """What memory the graph holds, by the configuration that made it.

    `{"configurations": [{"pins_key", "pins", "done", "failed"}], "pending": n,
    "sessions": n}`: the run manifest pins what is actually in the graph from this.
    """
    states = read_states(store)
    registered = {
        r["pins_key"]: json.loads(r["pins"]) if isinstance(r["pins"], str) else r["pins"]
        for r in store.read(READ_MEMORY, timeout_s=60, max_rows=10_000)
    }
    by_key: dict[str, dict[str, Any]] = {}
    pending = 0
    for state in states.values():
        if state.status == schema.PENDING or state.pins_key is None:
            pending += 1
            continue
        entry = by_key.setdefault(
            state.pins_key,
            {
                "pins_key": state.pins_key,
                "pins": registered.get(state.pins_key),
                "done": 0,
                "failed": 0,
            },
        )
        entry["done" if state.status == schema.DONE else "failed"] += 1
    return {
        "configurations": sorted(by_key.values(), key=lambda e: -e["done"]),
        "pending": pending,
        "sessions": len(states),
    }


def declared_searchable(configurations: Sequence[Mapping[str, Any]]) -> set[str]:
    """The kinds the memory in the graph declares searchable (`IngestSchema.searchable`, the
    union over the census' configurations that made its sessions); every kind (the raw turns
    too) for a graph no reconciler registered memory in: it is searched as it is."""
    if not configurations:
        return {"turn", *DEFAULT_SEARCHABLE}
    kinds: set[str] = set()
    for c in configurations:
        if c.get("done"):
            schema = (c.get("pins") or {}).get("schema") or {}
            kinds.update(schema.get("searchable", DEFAULT_SEARCHABLE))
    return kinds


def status_counts(statuses: dict[str, str]) -> dict[str, int]:
    counts = {status: 0 for status in schema.STATUSES}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


def load_sessions(store: Any, session_ids: Sequence[str]) -> list[SessionInput]:
    """The sessions of `session_ids` with their turns sorted by index, in the order asked
    (ids no longer in the graph are left out)."""
    rows = store.read(
        READ_SESSIONS, {"ids": list(session_ids)}, timeout_s=600, max_rows=_NO_ROW_CAP
    )
    heads: dict[str, dict[str, Any]] = {}
    turns: dict[str, list[SessionTurn]] = {}
    for r in rows:
        sid = r["session_id"]
        heads.setdefault(sid, {"date": r["date"], "started_at": r["started_at"]})
        bucket = turns.setdefault(sid, [])
        if r["turn_id"] is not None:
            bucket.append(
                SessionTurn(
                    turn_id=r["turn_id"],
                    role=r["role"] or "",
                    text=r["text"] or "",
                    index=int(r["index"]),
                    timestamp=r["timestamp"],
                )
            )
    return [
        SessionInput(
            session_id=sid,
            date=heads[sid]["date"],
            started_at=heads[sid]["started_at"],
            turns=tuple(sorted(turns[sid], key=lambda t: t.index)),
        )
        for sid in session_ids
        if sid in heads
    ]


def reconciled_node_counts(store: Any) -> dict[str, int]:
    """Nodes of each reconciler label now in the graph."""
    return {
        label: int(store.read(COUNT_LABEL.format(label=label), timeout_s=600)[0]["n"])
        for label in schema.NODE_LABELS
    }
