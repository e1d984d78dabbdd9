"""Whose failure is it: the classification of `eval_pipeline.failures`, on the real error
types of the neo4j driver, the graph stage and the LLM layer (no mock of either)."""

from __future__ import annotations

import neo4j.exceptions as nx
import pytest

from eval_pipeline.failures import infrastructure_cause
from eval_pipeline.graph.errors import GraphQueryError, GraphTimeoutError, GraphUnavailableError
from eval_pipeline.llm.errors import LLMCacheError, LLMCallFailed, StructuredOutputInvalid
from eval_pipeline.retrieve.protocol import RetrievalError, RetrievalOutput
from eval_pipeline.retrieve.reader import ExtractiveReader
from eval_pipeline.retrieve.runner import NO_MATCH, QuestionInput, RetrievalRunner


def _wrapped(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("my retriever gave up") from exc
    except RuntimeError as outer:
        return outer


def _call_failed(kind: str, role: str = "reader") -> LLMCallFailed:
    return LLMCallFailed(f"{role}: {kind}", role=role, kind=kind, attempts=1)


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (nx.ServiceUnavailable("Connection refused"), "graph_server"),
        (nx.SessionExpired("session expired"), "graph_server"),
        (GraphUnavailableError("graph server does not answer"), "graph_server"),
        (_wrapped(nx.ServiceUnavailable("reset")), "graph_server"),
        (ExceptionGroup("many", [ValueError("x"), nx.SessionExpired("y")]), "graph_server"),
        (LLMCacheError("cache unreadable", path="/x"), "llm_cache"),
        (_call_failed("server_error"), "llm_provider"),
        (_call_failed("rate_limited"), "llm_provider"),
        (_call_failed("timeout"), "llm_provider"),
        (_call_failed("bad_response"), "llm_provider"),
        # The system under test's own failures: a miss.
        (ValueError("my bug"), None),
        (RetrievalError("no haystack sessions"), None),
        (
            StructuredOutputInvalid(
                "bad", role="retrieval_agent", kind="invalid_output", attempts=2
            ),
            None,
        ),
    ],
)
def test_infrastructure_cause(exc, cause):
    assert infrastructure_cause(exc, graph_alive=lambda: True) == cause


@pytest.mark.parametrize(
    "exc",
    [
        GraphTimeoutError("read did not finish within 10 s"),
        GraphQueryError("refused a statement"),
        ConnectionResetError("reset by peer"),
        nx.ClientError("Neo.ClientError.Statement.SyntaxError"),
    ],
)
def test_ambiguous_graph_errors_are_decided_by_probing_the_server(exc):
    # A slow or refused query of the system's own while the server answers: a miss...
    assert infrastructure_cause(exc, graph_alive=lambda: True) is None
    # ...the same error while the server is gone: the pipeline's failure.
    assert infrastructure_cause(exc, graph_alive=lambda: False) == "graph_server"


class _Raising:
    name = "raising"

    def __init__(self, exc: BaseException | None) -> None:
        self.exc = exc

    def retrieve(self, request, trace):
        if self.exc is not None:
            raise self.exc
        return RetrievalOutput(items=[], context=[])

    def pins(self):
        return {}


def _one(exc: BaseException | None):
    runner = RetrievalRunner(
        _Raising(exc), ExtractiveReader(), scope="batch", top_k=5, count_tokens=len
    )
    return runner.run_one(QuestionInput(question_id="q", question="bike?", question_date="d"))


def test_runner_records_infrastructure_failures_apart_from_misses():
    down = _one(nx.ServiceUnavailable("gone"))
    assert [f.cause for f in down.infra_failures] == ["graph_server"]
    assert down.errors == [] and down.payload_tokens is None and down.answer is None
    bug = _one(ValueError("my bug"))
    assert bug.infra_failures == [] and bug.errors == ["retrieval: ValueError: my bug"]
    assert bug.payload_tokens == 0  # a miss: an empty payload, measured
    empty = _one(None)
    assert empty.notes == [NO_MATCH] and empty.errors == [] and empty.infra_failures == []
