"""Indexes for the reconciler schema; the statements are the graph dialect's, the intent not.

The unique constraint on `Entity.key` matters most: entities are MERGEd by key, and ArcadeDB
duplicates nodes under concurrent MERGE without one. The others make id lookups cheap, and the
full-text indexes let retrieval search chunks, facts and episode summaries like turns.
Creation is idempotent; a statement a server refuses is reported, not fatal (the writer also
serialises its writes, and retrieval falls back to turns without a full-text index). What each
backend sends is `Dialect.reconcile_index_statements`, `create_text_index` and
`drop_text_index` (eval_pipeline.graph.dialects).

One thing is fatal: a server that would not run the writer's one transaction per session
atomically (Memgraph in IN_MEMORY_ANALYTICAL mode) is refused before anything is written.
"""

from __future__ import annotations

from typing import Any

from eval_pipeline.graph.dialects import Dialect
from eval_pipeline.reconcile import schema


def _dialect(store: Any) -> Dialect | None:
    dialect = getattr(store, "dialect", None)
    return dialect if isinstance(dialect, Dialect) else None


def ensure_reconcile_schema(store: Any) -> list[str]:
    """Refuse a server without transactions; create the id indexes and the unique key
    constraints; one line per refusal."""
    dialect = _dialect(store)
    if dialect is None:
        return []
    dialect.require_transactions(store, "reconciliation")
    problems: list[str] = []
    for statement in dialect.reconcile_index_statements(schema.INDEXES):
        try:
            store.autocommit(statement)
        except Exception as exc:
            if "already exists" in str(exc).lower():  # Memgraph has no IF NOT EXISTS
                continue
            problems.append(f"{statement}: {exc}")
    return problems


def drop_fulltext_indexes(store: Any) -> list[str]:
    """Before a bulk run: a full-text index maintained on every write costs more (probed:
    ~15 → ~55 ms per session on ArcadeDB) than building it once afterwards."""
    dialect = _dialect(store)
    if dialect is None:
        return []
    problems: list[str] = []
    for label, prop in schema.FULLTEXT:
        try:
            dialect.drop_text_index(store, label, prop)
        except Exception as exc:
            problems.append(f"drop full-text index on {label}.{prop}: {exc}")
    return problems


def ensure_fulltext_indexes(store: Any, labels_with_nodes: set[str]) -> list[str]:
    """Full-text indexes over the distilled text of the labels that have nodes."""
    dialect = _dialect(store)
    wanted = [(label, prop) for label, prop in schema.FULLTEXT if label in labels_with_nodes]
    if dialect is None or not wanted:
        return []
    problems: list[str] = []
    for label, prop in wanted:
        try:
            dialect.create_text_index(store, label, prop)
        except Exception as exc:
            if "already exists" in str(exc).lower():
                continue
            problems.append(f"full-text index on {label}.{prop}: {exc}")
    return problems
