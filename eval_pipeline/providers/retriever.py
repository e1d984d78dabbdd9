"""Retrieval through a provider's own search: the memory under test answers for itself.

Each question searches its own namespace (`namespace_of`), with the question's date; every hit
becomes a `RetrievedItem` of kind `memory` carrying the session and turn ids the provider
handed back (evidence recall counts through them: at session level when a provider cannot name
a turn). A hit with no source is kept — the reader sees it — but it can never count as
evidence, and the formation audit counts it as unsourced.
"""

from __future__ import annotations

import time
from typing import Any

from eval_pipeline.providers.base import MemoryProvider
from eval_pipeline.reconcile.namespace import namespace_of
from eval_pipeline.retrieve.protocol import RetrievalOutput, RetrievalRequest, RetrievalTrace
from eval_pipeline.retrieve.results import MEMORY_KIND, QueryRecord, RetrievedItem


def session_of(turn_id: str) -> str:
    return turn_id.rpartition("#")[0] or turn_id


class ProviderRetriever:
    """A retriever (`retrieve.protocol`) over one provider."""

    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider
        self.name = f"provider:{provider.name}"

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> RetrievalOutput:
        namespace = namespace_of(request.question_id)
        started = time.perf_counter()
        record = trace.record(
            QueryRecord(
                query=f"{self.provider.name}.search",
                params={"namespace": namespace, "query": request.question, "top_k": request.top_k},
            )
        )
        try:
            hits = self.provider.search(
                namespace,
                request.question,
                top_k=request.top_k,
                question_date=request.question_date,
            )
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            record.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        if len(hits) > request.top_k:  # a provider returning more than asked is cut, and noted
            trace.note(f"{self.provider.name} returned {len(hits)} hits for top_k {request.top_k}")
            hits = hits[: request.top_k]
        record.rows = len(hits)
        items = []
        for hit in hits:
            sessions = list(dict.fromkeys([*hit.session_ids, *map(session_of, hit.turn_ids)]))
            items.append(
                RetrievedItem(
                    text=hit.text,
                    turn_ids=list(hit.turn_ids),
                    session_ids=sessions,
                    score=hit.score,
                    kind=MEMORY_KIND,
                    node_ids=[hit.memory_id] if hit.memory_id else [],
                )
            )
        return RetrievalOutput(items=items)

    def pins(self) -> dict[str, Any]:
        return {"name": self.name, "provider": self.provider.pins()}
