"""Where the runner reads sessions and writes memory: the graph store, or memory (in-process).

`StoreSessionGraph` is the real thing, over `GraphStore` (reader, writer, indexes modules).
`InMemorySessionGraph` holds sessions and their memories in dicts: for plug-in authors who want
to run their reconciler without a graph server, and for benchmarks that measure the reconciler
and the LLM layer apart from graph writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.indexes import (
    drop_fulltext_indexes,
    ensure_fulltext_indexes,
    ensure_reconcile_schema,
)
from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.reconcile.reader import (
    SessionState,
    load_sessions,
    read_states,
    read_statuses,
    reconciled_node_counts,
)
from eval_pipeline.reconcile.writer import (
    mark_failed,
    record_memory,
    write_session_memory,
    write_sessions_memory,
)


class SessionGraph(Protocol):
    def prepare(self, *, bulk: bool) -> list[str]:
        """Create what writes need (indexes); with `bulk`, also get out of the way what slows
        many writes down (full-text indexes, rebuilt by `finish`). Returns problems that are
        not fatal."""
        ...

    def statuses(self) -> dict[str, str]: ...

    def states(self) -> dict[str, SessionState]:
        """Status and the pins key of the configuration that reconciled each session."""
        ...

    def load(self, session_ids: Sequence[str]) -> list[SessionInput]: ...

    def write(
        self, memory: SessionMemory, *, version: str, replace: bool, pins_key: str | None
    ) -> None: ...

    def mark_failed(
        self,
        session_id: str,
        reason: str,
        *,
        reconciler: str,
        version: str,
        pins_key: str | None,
        clear: bool,
    ) -> None: ...

    def record(self, pins_key: str, pins: dict[str, Any]) -> None:
        """Register the configuration whose memory the graph now holds."""
        ...

    def node_counts(self) -> dict[str, int]: ...

    def finish(self, labels_with_nodes: set[str]) -> list[str]:
        """Work after the batch (full-text indexes); return problems that are not fatal."""
        ...


class StoreSessionGraph:
    """The evaluation graph behind a GraphStore (or anything with its read/write methods)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def prepare(self, *, bulk: bool) -> list[str]:
        problems = ensure_reconcile_schema(self.store)
        if bulk:
            problems += drop_fulltext_indexes(self.store)
        return problems

    def statuses(self) -> dict[str, str]:
        return read_statuses(self.store)

    def states(self) -> dict[str, SessionState]:
        return read_states(self.store)

    def load(self, session_ids: Sequence[str]) -> list[SessionInput]:
        return load_sessions(self.store, session_ids)

    def write(
        self, memory: SessionMemory, *, version: str, replace: bool, pins_key: str | None = None
    ) -> None:
        write_session_memory(
            self.store, memory, version=version, replace=replace, pins_key=pins_key
        )

    def write_many(
        self, memories: Sequence[SessionMemory], *, version: str, pins_key: str | None = None
    ) -> set[str]:
        """Untouched sessions' memories in one transaction; the ids the graph lacked."""
        return write_sessions_memory(self.store, memories, version=version, pins_key=pins_key)

    def mark_failed(
        self,
        session_id: str,
        reason: str,
        *,
        reconciler: str,
        version: str,
        pins_key: str | None = None,
        clear: bool = False,
    ) -> None:
        mark_failed(
            self.store,
            session_id,
            reason,
            reconciler=reconciler,
            version=version,
            pins_key=pins_key,
            clear=clear,
        )

    def record(self, pins_key: str, pins: dict[str, Any]) -> None:
        record_memory(self.store, pins_key, pins, datetime.now(UTC).isoformat())

    def node_counts(self) -> dict[str, int]:
        return reconciled_node_counts(self.store)

    def finish(self, labels_with_nodes: set[str]) -> list[str]:
        return ensure_fulltext_indexes(self.store, labels_with_nodes)


class InMemorySessionGraph:
    """Sessions and memories in dicts, with the same status semantics as the graph."""

    def __init__(self, sessions: Iterable[SessionInput]) -> None:
        self.sessions = {s.session_id: s for s in sessions}
        self.status = {sid: schema.PENDING for sid in self.sessions}
        self.keys: dict[str, str | None] = {sid: None for sid in self.sessions}
        self.errors: dict[str, str] = {}
        self.memories: dict[str, SessionMemory] = {}
        self.configurations: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def prepare(self, *, bulk: bool) -> list[str]:
        return []

    def statuses(self) -> dict[str, str]:
        with self._lock:
            return dict(self.status)

    def states(self) -> dict[str, SessionState]:
        with self._lock:
            return {sid: SessionState(st, self.keys.get(sid)) for sid, st in self.status.items()}

    def load(self, session_ids: Sequence[str]) -> list[SessionInput]:
        return [self.sessions[sid] for sid in session_ids if sid in self.sessions]

    def write(
        self, memory: SessionMemory, *, version: str, replace: bool, pins_key: str | None = None
    ) -> None:
        with self._lock:
            if memory.session_id not in self.sessions:
                raise LookupError(f"session {memory.session_id!r} is not in the graph")
            self.memories[memory.session_id] = memory
            self.status[memory.session_id] = schema.DONE
            self.keys[memory.session_id] = pins_key
            self.errors.pop(memory.session_id, None)

    def mark_failed(
        self,
        session_id: str,
        reason: str,
        *,
        reconciler: str,
        version: str,
        pins_key: str | None = None,
        clear: bool = False,
    ) -> None:
        with self._lock:
            self.status[session_id] = schema.FAILED
            self.keys[session_id] = pins_key
            self.errors[session_id] = reason
            if clear:
                self.memories.pop(session_id, None)

    def record(self, pins_key: str, pins: dict[str, Any]) -> None:
        with self._lock:
            self.configurations[pins_key] = pins

    def node_counts(self) -> dict[str, int]:
        with self._lock:
            memories = list(self.memories.values())
        counts = {label: 0 for label in schema.NODE_LABELS}
        for memory in memories:
            for label, n in memory.node_counts().items():
                counts[label] += n
        counts[schema.ENTITY] = len({e.key for m in memories for e in m.entities})
        return counts

    def finish(self, labels_with_nodes: set[str]) -> list[str]:
        return []


def as_session_graph(target: Any) -> SessionGraph:
    """A SessionGraph as is; anything else is taken for a graph store."""
    if isinstance(target, StoreSessionGraph | InMemorySessionGraph):
        return target
    if all(callable(getattr(target, m, None)) for m in ("statuses", "load", "write", "finish")):
        return target  # type: ignore[no-any-return]
    return StoreSessionGraph(target)
