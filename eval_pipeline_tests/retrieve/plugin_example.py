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


class ManyRetriever:
    """Returns `count` items whatever k is (memorybench#64: 30 results against 10)."""

    name = "many"

    def __init__(self, env: RetrievalEnv, *, count: int = 30) -> None:
        self.count = count

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> list[RetrievedItem]:
        return [
            RetrievedItem(text=f"item {i}: {request.question}", turn_ids=[], session_ids=[])
            for i in range(self.count)
        ]

    def pins(self) -> dict[str, Any]:
        return {"retriever": self.name, "count": self.count}


class NotARetriever:
    """Has no `retrieve`."""

    name = "nope"


not_a_class = 42
