"""What the reconciliation stage reads from the graph: session statuses, sessions with their
turns (in batches, so a 20k-session graph never travels in one message), and counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval_pipeline.graph.schema import HAS_TURN, SESSION, TURN
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.models import SessionInput, SessionTurn

READ_STATUSES = f"""
MATCH (s:{SESSION})
RETURN s.session_id AS session_id, s.reconcile_status AS status
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


def read_statuses(store: Any) -> dict[str, str]:
    """session_id → reconcile status for every session (a missing status reads as pending)."""
    rows = store.read(READ_STATUSES, timeout_s=600, max_rows=_NO_ROW_CAP)
    return {r["session_id"]: r["status"] or schema.PENDING for r in rows}


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
