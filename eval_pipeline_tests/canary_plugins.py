"""Plug-ins for the canary tests, loaded by import path like a user's own.

- `ForgetfulReconciler`: a memory system that stores nothing at all (it declares the
  extractive layer's searchable kinds and writes none of them): every canary must fail.
- `HaystackOverlapRetriever`: ranks the turns of the question's own haystack by content-word
  overlap with the question, reading nothing else in the graph, so its ranking cannot depend
  on what else the graph holds (unlike BM25's corpus-wide statistics): with it, a run with
  canaries must give exactly the tier rows of a run without.
"""

from __future__ import annotations

from typing import Any

from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.retrieve.guarded_read import GuardedReader
from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    RetrievalOutput,
    RetrievalRequest,
    RetrievalTrace,
)
from eval_pipeline.retrieve.results import RetrievedItem
from eval_pipeline.retrieve.terms import content_terms, stems, words


class ForgetfulReconciler:
    """Forms no memory: every session's memory is empty."""

    name = "forgetful"
    version = "1"

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def reconcile(self, session: SessionInput) -> SessionMemory:
        return SessionMemory(session_id=session.session_id, reconciler=self.name)


HAYSTACK_TURNS = (
    "MATCH (:Question {question_id: $question_id})-[:HAYSTACK]->(s:Session)-[:HAS_TURN]->"
    "(t:Turn) RETURN t.turn_id AS turn_id, s.session_id AS session_id, t.text AS text"
)


class HaystackOverlapRetriever:
    name = "haystack-overlap"

    def __init__(self, env: RetrievalEnv) -> None:
        self.reader = GuardedReader(env.store, timeout_s=env.query_timeout_s, max_rows=100_000)

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> RetrievalOutput:
        wanted = stems(content_terms(request.question, max_terms=1_000))
        rows = self.reader.read(HAYSTACK_TURNS, {"question_id": request.question_id}, trace=trace)
        scored = [(len(wanted & stems(words(str(r["text"])))), str(r["turn_id"]), r) for r in rows]
        # Ties by turn id: the order is a function of the haystack alone.
        ranked = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))
        items = [
            RetrievedItem(
                text=str(r["text"]),
                turn_ids=[turn],
                session_ids=[str(r["session_id"])],
                score=float(score),
            )
            for score, turn, r in ranked[: request.top_k]
        ]
        return RetrievalOutput(items=items)

    def pins(self) -> dict[str, Any]:
        return {"retriever": self.name, "version": 1}
