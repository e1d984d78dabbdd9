"""The retriever protocol: question + question date + scope in, ranked `RetrievedItem`s out.

A retriever is a class built as `cls(env, **options)` with

    name: str
    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace)
        -> RetrievalOutput | list[RetrievedItem]
    def pins(self) -> dict[str, Any]

Optional, for a retriever that needs the graph prepared: a classmethod
`prepare_graph(store, options, note) -> dict` the retrieval stage runs before its read
fingerprint (the only place a retriever's graph may be written: `dense` embeds there), and
`check_graph()`, called once before the first question, raising ValueError in one line when
the graph cannot serve it.

Built-ins are chosen by name (`fulltext`, `dense`, `hybrid`, `graph_agent`); a user's own by
import path `package.module:ClassName` or by a name registered with the plug-in registry
(`eval_pipeline.plugins`, `docs/plugins.md`). Every query a retriever sends goes into the
`trace` the runner owns, so the queries of a question whose retrieval raises are still recorded
with its miss.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline import plugins
from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.retrieve.results import QueryRecord, RetrievedItem

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer
    from eval_pipeline.score.tokens import PayloadTokenizer

Scope = Literal["question", "batch"]
SCOPES: tuple[str, ...] = ("question", "batch")

KIND = "retriever"
# name -> "module:Class", imported on first use so `fulltext` never imports the agent's deps.
BUILTIN_RETRIEVERS: Mapping[str, str] = plugins.KINDS[KIND].builtins


class RetrieverLoadError(PluginLoadError):
    """A retriever spec that cannot be turned into a retriever (the plug-in registry's error
    for this kind)."""


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
    """The class named by a built-in name, a registered plug-in name or an import path."""
    return plugins.resolve(KIND, spec)


def load_retriever(
    spec: str, env: RetrievalEnv, options: Mapping[str, Any] | None = None
) -> Retriever:
    """Build the retriever `spec` names as `cls(env, **options)`."""
    return plugins.load(KIND, spec, env, options=options)
