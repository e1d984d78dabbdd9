"""The `none` reconciler: raw turns only. It writes nothing and marks each session done, so
retrieval runs over the injected graph as is (the baseline every memory system must beat)."""

from __future__ import annotations

from eval_pipeline.reconcile.memory_system import NONE_SCHEMA
from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.reconcile.protocol import BaseReconciler


class NoneReconciler(BaseReconciler):
    name = "none"
    version = "1"
    schema = NONE_SCHEMA

    def __init__(self) -> None:
        super().__init__()

    async def reconcile(self, session: SessionInput) -> SessionMemory:
        return SessionMemory(session_id=session.session_id, reconciler=self.name)
