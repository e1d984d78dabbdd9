"""The retriever protocol: question + question date + scope in, ranked `RetrievedItem`s out.

A retriever is a class built as `cls(env, **options)` with

    name: str
    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace)
        -> RetrievalOutput | list[RetrievedItem]
    def pins(self) -> dict[str, Any]

Built-ins are chosen by name (`fulltext`, `graph_agent`); a user's own by import path
`package.module:ClassName`. Every query a retriever sends goes into the `trace` the runner owns,
so the queries of a question whose retrieval raises are still recorded with its miss.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.retrieve.results import QueryRecord, RetrievedItem

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer
    from eval_pipeline.score.tokens import PayloadTokenizer

Scope = Literal["question", "batch"]
SCOPES: tuple[str, ...] = ("question", "batch")

# name -> "module:Class", imported on first use so `fulltext` never imports the agent's deps.
BUILTIN_RETRIEVERS: dict[str, str] = {
    "fulltext": "eval_pipeline.retrieve.fulltext:FulltextRetriever",
    "graph_agent": "eval_pipeline.retrieve.graph_agent:GraphAgentRetriever",
}


class RetrieverLoadError(ValueError):
    """A retriever name or import path that cannot be turned into a retriever."""


class RetrievalError(RuntimeError):
    """A retriever could not retrieve for one question (recorded as that question's miss)."""


class RetrievalRequest(BaseModel):
    """One question, as a retriever sees it: no answer, no evidence labels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    question: str
    question_date: str  # upstream form, "2023/05/30 (Tue) 23:40"
    scope: Scope = "question"
    top_k: int = Field(default=10, ge=1)


class RetrievalOutput(BaseModel):
    """What a retriever hands back. `context` defaults to the items' texts."""

    model_config = ConfigDict(extra="forbid")

    items: list[RetrievedItem]
    context: list[str] | None = None  # the exact strings for the reader, when not item texts


class RetrievalTrace:
    """The queries and notes of one question's retrieval; owned by the runner."""

    def __init__(self) -> None:
        self.queries: list[QueryRecord] = []
        self.notes: list[str] = []

    def record(self, record: QueryRecord) -> QueryRecord:
        self.queries.append(record)
        return record

    def note(self, message: str) -> None:
        """A problem that did not stop retrieval (kept in the result's `errors`)."""
        self.notes.append(message)


@runtime_checkable
class GraphReader(Protocol):
    """The part of `GraphStore` retrievers use: a read transaction with timeout and row cap."""

    def read(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = 30,
        max_rows: int = 10_000,
    ) -> list[dict]: ...


@dataclass
class RetrievalEnv:
    """What every retriever is built with."""

    store: GraphReader
    backend: str = "arcadedb"  # the graph dialect: arcadedb | memgraph
    llm: LLMLayer | None = None
    tokenizer: PayloadTokenizer | None = None
    query_timeout_s: float = 10.0
    max_rows: int = 500


@runtime_checkable
class Retriever(Protocol):
    name: str

    def retrieve(
        self, request: RetrievalRequest, trace: RetrievalTrace
    ) -> RetrievalOutput | list[RetrievedItem]: ...

    def pins(self) -> dict[str, Any]: ...


def as_output(result: RetrievalOutput | list[RetrievedItem]) -> RetrievalOutput:
    """Normalise what a retriever returned, refusing anything else with a clear message."""
    if isinstance(result, RetrievalOutput):
        return result
    if isinstance(result, list):
        return RetrievalOutput(
            items=[
                i if isinstance(i, RetrievedItem) else RetrievedItem.model_validate(i)
                for i in result
            ]
        )
    raise TypeError(
        f"a retriever must return RetrievalOutput or list[RetrievedItem], not {type(result)}"
    )


def resolve_retriever_class(spec: str) -> type:
    """The class named by a built-in name or by `package.module:ClassName`."""
    spec = (spec or "").strip()
    path = BUILTIN_RETRIEVERS.get(spec, spec)
    if ":" not in path:
        raise RetrieverLoadError(
            f"unknown retriever {spec!r}: use one of {sorted(BUILTIN_RETRIEVERS)} or an "
            "import path 'package.module:ClassName'"
        )
    module_name, _, attr = path.partition(":")
    if not module_name or not attr or not all(p.isidentifier() for p in attr.split(".")):
        raise RetrieverLoadError(
            f"bad retriever import path {spec!r}: expected 'package.module:ClassName'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RetrieverLoadError(
            f"retriever {spec!r}: cannot import module {module_name!r} ({exc}); is it installed "
            "in this environment and on the Python path?"
        ) from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise RetrieverLoadError(f"retriever {spec!r}: {module_name!r} has no {attr!r}")
        target = getattr(target, part)
    if not inspect.isclass(target):
        raise RetrieverLoadError(f"retriever {spec!r}: {attr!r} is not a class")
    missing = [m for m in ("retrieve", "pins") if not callable(getattr(target, m, None))]
    if missing or not hasattr(target, "name"):
        need = ", ".join(missing + ([] if hasattr(target, "name") else ["name"]))
        raise RetrieverLoadError(
            f"retriever {spec!r}: {target.__name__} lacks {need}; a retriever has `name`, "
            "`retrieve(request, trace)` and `pins()` (see eval_pipeline.retrieve.protocol)"
        )
    return target


def load_retriever(
    spec: str, env: RetrievalEnv, options: Mapping[str, Any] | None = None
) -> Retriever:
    """Build the retriever `spec` names with `env` and its options."""
    cls = resolve_retriever_class(spec)
    try:
        return cls(env, **dict(options or {}))
    except TypeError as exc:
        raise RetrieverLoadError(
            f"retriever {spec!r}: {cls.__name__}(env, **options) failed: {exc}"
        ) from None
