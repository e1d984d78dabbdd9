"""Whose failure is it: the system under test's (a miss) or the pipeline's own (unscored)?

A retriever raising its own exception, an agent writing bad Cypher, a reader or agent model
answering with invalid output: the system under test failed, and the question is a miss,
recorded with its error. The pipeline's infrastructure failing — the graph server unreachable,
going away or timing out, the LLM response cache unreadable, a model provider down or
answering garbage, the judge failing — says nothing about the system: the question is
*unscored* with its error, never 0 recall or "not covered", and the run is incomplete.

`infrastructure_cause` looks through an exception and what caused it (`__cause__`,
`__context__`, exception groups), so a plug-in that wraps a driver error is still told apart.
A graph error that could be either (a read that timed out: a server gone, or a query too
expensive?) is decided by probing the server: if it does not answer, the server failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

import neo4j.exceptions as nx
from pydantic import BaseModel, ConfigDict

from eval_pipeline.graph.errors import GraphError, GraphUnavailableError
from eval_pipeline.llm.errors import LLMCacheError, LLMCallFailed
from eval_pipeline.providers.base import ProviderUnavailable

Cause = Literal["graph_server", "llm_cache", "llm_provider", "memory_provider", "judge"]
CAUSES: tuple[str, ...] = ("graph_server", "llm_cache", "llm_provider", "judge")
# LLMCallFailed kinds that are the provider's failure, not the model's answer.
PROVIDER_KINDS = frozenset(
    {"rate_limited", "server_error", "timeout", "connection", "client_error", "bad_response"}
)
# Driver errors that mean the server is gone or cannot serve now, whoever hit them.
_GRAPH_DOWN = (GraphUnavailableError, nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError)
# Errors that could be the server's or the system's own (a read too slow, a reset socket, a
# refused statement): the probe decides.
_AMBIGUOUS = (GraphError, nx.Neo4jError, nx.DriverError, ConnectionError, TimeoutError)


class InfraFailure(BaseModel):
    """One infrastructure failure that left a question (partly) unmeasured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: str  # retrieval | reader | judge
    cause: Cause
    error: str


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for nxt in (current.__cause__, current.__context__):
            if nxt is not None:
                stack.append(nxt)


def infrastructure_cause(
    exc: BaseException, *, graph_alive: Callable[[], bool] | None = None
) -> Cause | None:
    """The infrastructure cause of `exc`, or None when it is the system under test's own.

    `graph_alive` probes the graph server; it decides graph errors that could be either.
    """
    ambiguous_graph = False
    for e in _chain(exc):
        if isinstance(e, LLMCacheError):
            return "llm_cache"
        if isinstance(e, LLMCallFailed) and e.kind in PROVIDER_KINDS:
            return "llm_provider"
        if isinstance(e, _GRAPH_DOWN):
            return "graph_server"
        if isinstance(e, ProviderUnavailable):  # a memory system's service down: not its miss
            return "memory_provider"
        if isinstance(e, _AMBIGUOUS):
            ambiguous_graph = True
    if ambiguous_graph and graph_alive is not None and not graph_alive():
        return "graph_server"
    return None


def error_text(exc: BaseException) -> str:
    """One line: the exception's type and message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def counts_by_cause(failures: list[InfraFailure]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in failures:
        out[f.cause] = out.get(f.cause, 0) + 1
    return dict(sorted(out.items()))
