"""A user's own retriever, loaded in the tests by its import path (`...:EchoRetriever`)."""

from __future__ import annotations

from typing import Any

from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline.retrieve.results import QueryRecord, RetrievedItem


class EchoRetriever:
    name = "echo"

    def __init__(self, env: RetrievalEnv, *, prefix: str = "echo") -> None:
        self.env = env
        self.prefix = prefix

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> list[RetrievedItem]:
        trace.record(QueryRecord(query="(none)", rows=1))
        if "explode" in request.question:
            raise RuntimeError(f"cannot handle {request.question_id}")
        return [
            RetrievedItem(
                text=f"{self.prefix}: {request.question}",
                turn_ids=["s1#0"],
                session_ids=["s1"],
            )
        ]

    def pins(self) -> dict[str, Any]:
        return {"retriever": self.name, "prefix": self.prefix}


class NotARetriever:
    """Has no `retrieve`."""

    name = "nope"


not_a_class = 42
