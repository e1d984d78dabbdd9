"""Plug-in reconcilers for the tests, loaded by import path like a user's own."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.models import (
    MemoryChunk,
    MemoryEntity,
    SessionInput,
    SessionMemory,
)
from eval_pipeline.reconcile.protocol import ReconcilerUnavailable


class EchoReconciler:
    """A minimal plug-in: one chunk per turn, one entity per session (shared across sessions)."""

    name = "echo"
    version = "7"

    def __init__(self, label: str = "shared") -> None:
        self.config = {"label": label}

    async def reconcile(self, session: SessionInput) -> SessionMemory:
        await asyncio.sleep(0)
        key = f"other:{self.config['label']}"
        return SessionMemory(
            session_id=session.session_id,
            reconciler=self.name,
            entities=(MemoryEntity(key=key, name=self.config["label"], type="other"),),
            chunks=tuple(
                MemoryChunk(
                    chunk_id=f"{session.session_id}#chunk{i}",
                    index=i,
                    text=t.text,
                    turn_ids=(t.turn_id,),
                    entity_keys=(key,),
                )
                for i, t in enumerate(session.turns)
            ),
        )


class FailingReconciler(ExtractiveReconciler):
    """Extractive, except that it raises on the sessions named in `fail`."""

    name = "failing"
    version = "1"

    def __init__(self, fail: list[str] | None = None, **config: Any) -> None:
        super().__init__(**config)
        self.fail = set(fail or [])

    def reconcile(self, session: SessionInput) -> SessionMemory:
        if session.session_id in self.fail:
            raise RuntimeError(f"cannot make sense of {session.session_id} | on purpose")
        return super().reconcile(session)


class ForeignTurnsReconciler(ExtractiveReconciler):
    """Returns memory citing a turn of another session: the runner must refuse it."""

    name = "foreign"
    version = "1"

    def reconcile(self, session: SessionInput) -> SessionMemory:
        return SessionMemory(
            session_id=session.session_id,
            reconciler=self.name,
            chunks=(MemoryChunk(chunk_id="x", index=0, text="x", turn_ids=("elsewhere#0",)),),
        )


class NoReconcileMethod:
    name = "nothing"
    version = "1"


class NoVersion:
    name = "unversioned"

    def reconcile(self, session: SessionInput) -> SessionMemory:  # pragma: no cover
        raise NotImplementedError


def not_a_class(session: SessionInput) -> SessionMemory:  # pragma: no cover
    raise NotImplementedError


class FixedIdReconciler:
    """Every session gets a chunk with the same id: only the first write can succeed."""

    name = "fixed"
    version = "1"

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    async def reconcile(self, session: SessionInput) -> SessionMemory:
        first = session.turns[0]
        return SessionMemory(
            session_id=session.session_id,
            reconciler=self.name,
            entities=(MemoryEntity(key=f"other:{session.session_id}", name="x", type="other"),),
            chunks=(
                MemoryChunk(
                    chunk_id="the-same-id",
                    index=0,
                    text=first.text,
                    turn_ids=(first.turn_id,),
                    entity_keys=(f"other:{session.session_id}",),
                ),
            ),
        )


class MarkerWritingReconciler:
    """A plug-in that leaks: it forms the extractive memory, then writes an evidence-marker
    property into the graph through a connection of its own (the run's last act, `aclose`,
    so it never races the pipeline's writer)."""

    name = "marker-writer"
    version = "1"

    def __init__(self, data_dir: str, database: str) -> None:
        self._inner = ExtractiveReconciler()
        self._where = {"data_dir": data_dir, "database": database}
        self.config: dict[str, Any] = {"leaks": True}

    async def reconcile(self, session: SessionInput) -> SessionMemory:
        memory = self._inner.reconcile(session)
        memory = await memory if asyncio.iscoroutine(memory) else memory
        return memory.model_copy(update={"reconciler": self.name})

    async def aclose(self) -> None:
        from eval_pipeline.graph.store import GraphStore

        store = GraphStore(**self._where, heap="512m")
        try:
            store.write_transaction(
                [("MATCH (c:Chunk) WITH c LIMIT 1 SET c.is_answer_session = true", {})]
            )
        finally:
            store.close()


class KilledOnSessionReconciler(ExtractiveReconciler):
    """Extractive, except that its process is killed outright (as the OOM killer would) when
    it reaches the session named `kill`: in a worker process, the worker dies."""

    name = "killed-on-session"
    version = "1"

    def __init__(self, kill: str = "", **config: Any) -> None:
        super().__init__(**config)
        self.kill = kill

    def reconcile(self, session: SessionInput) -> SessionMemory:
        if session.session_id == self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().reconcile(session)


class UnavailableReconciler(ExtractiveReconciler):
    """Extractive, but finds out on its first session that it cannot run here."""

    name = "unavailable"
    version = "1"

    def reconcile(self, session: SessionInput) -> SessionMemory:
        raise ReconcilerUnavailable("the model this needs is not configured | on purpose")
