"""Retrieve and answer, question by question, into `QuestionRetrieval` records.

A question whose retrieval raises is recorded, and the batch goes on: one bad question must
not cost the other 499 their results, and a dropped question would silently flatter every
average computed later. Whose failure it was decides how it counts (`eval_pipeline.failures`):
the system under test's own (its exception, bad Cypher, invalid output) is a miss, with its
error; the pipeline's infrastructure (graph server gone, LLM cache unreadable, provider down)
makes the question unscored, with its error, in `infra_failures`. An empty retrieval is noted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from eval_pipeline.corpus.models import Golden
from eval_pipeline.failures import InfraFailure, error_text, infrastructure_cause
from eval_pipeline.retrieve.protocol import (
    RetrievalRequest,
    RetrievalTrace,
    Retriever,
    Scope,
    as_output,
)
from eval_pipeline.retrieve.reader import Reader, as_reply
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, QuestionRetrieval], None]


class QuestionInput(BaseModel):
    """What retrieval may know of a golden: never its answer or evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    question: str
    question_date: str
    tier: int = 1


def question_from_golden(row: dict[str, Any]) -> QuestionInput:
    golden = Golden.model_validate(row)
    meta = golden.additional_metadata
    return QuestionInput(
        question_id=golden.name,
        question=golden.input,
        question_date=meta.question_date,
        tier=meta.tier,
    )


def questions_from_goldens(rows: Iterable[dict[str, Any]]) -> list[QuestionInput]:
    return [question_from_golden(row) for row in rows]


class ReaderOutcome(NamedTuple):
    answer: str | None  # None: no answer was produced
    prompt: str | None  # what the reader sent a model, when it says
    errors: list[str]  # the system's own failure (a miss)
    infra: list[InfraFailure]  # the pipeline's own (unscored)
    latency_ms: float


def read_answer(
    reader: Reader,
    question: str,
    question_date: str,
    context: list[str],
    cause: Callable[[BaseException], str | None] = infrastructure_cause,
) -> ReaderOutcome:
    """The reader's answer on `context`; a failure recorded by whose it was (`cause`: the
    pipeline's infrastructure, else the system's own)."""
    started = time.perf_counter()
    errors: list[str] = []
    infra: list[InfraFailure] = []
    answer: str | None
    prompt: str | None = None
    try:
        answer, prompt = as_reply(reader.answer(question, question_date, context))
    except Exception as exc:
        answer = None
        if kind := cause(exc):
            infra.append(InfraFailure(stage="reader", cause=kind, error=error_text(exc)))
        else:
            errors.append(f"reader: {error_text(exc)}")
    latency = round((time.perf_counter() - started) * 1000, 3)
    return ReaderOutcome(answer, prompt, errors, infra, latency)


NO_MATCH = "no match: the retriever returned no item for this question"


class RetrievalRunner:
    """One retriever + one reader at one scope and k; `payload_tokens` via `count_tokens`."""

    def __init__(
        self,
        retriever: Retriever,
        reader: Reader,
        *,
        scope: Scope,
        top_k: int,
        count_tokens: Callable[[list[str]], int] | None = None,
        graph_alive: Callable[[], bool] | None = None,
        provenance: Callable[[list[RetrievedItem]], list[RetrievedItem]] | None = None,
    ) -> None:
        """`graph_alive` probes the graph server: it tells a server that went away from a
        query of the system's own that failed (see `eval_pipeline.failures`). `provenance`
        adds to each item the turns its memory nodes came from (`retrieve.provenance`)."""
        self.retriever = retriever
        self.reader = reader
        self.scope = scope
        self.top_k = top_k
        self.count_tokens = count_tokens
        self.graph_alive = graph_alive
        self.provenance = provenance

    def _cause(self, exc: BaseException):
        return infrastructure_cause(exc, graph_alive=self.graph_alive)

    def run_one(self, question: QuestionInput) -> QuestionRetrieval:
        request = RetrievalRequest(
            question_id=question.question_id,
            question=question.question,
            question_date=question.question_date,
            scope=self.scope,
            top_k=self.top_k,
        )
        trace = RetrievalTrace()
        base = dict(
            question_id=question.question_id,
            tier=question.tier,
            scope=self.scope,
            retriever=self.retriever.name,
            reader=self.reader.label,
        )
        started = time.perf_counter()
        try:
            output = as_output(self.retriever.retrieve(request, trace))
            if self.provenance is not None:
                output = output.model_copy(update={"items": self.provenance(output.items)})
        except Exception as exc:
            latency = (time.perf_counter() - started) * 1000
            cause = self._cause(exc)
            text = error_text(exc)
            log.warning(
                "retrieval %s for %s: %s",
                f"unscored ({cause})" if cause else "failed",
                question.question_id,
                text,
            )
            infra = [InfraFailure(stage="retrieval", cause=cause, error=text)] if cause else []
            return QuestionRetrieval(
                **base,
                items=[],
                retrieval_context=[],
                answer=None,
                queries=trace.queries,
                errors=[*trace.notes, *([] if cause else [f"retrieval: {text}"])],
                infra_failures=infra,
                retrieval_latency_ms=round(latency, 3),
                # Unscored: no payload was measured (a miss has an empty one).
                payload_tokens=None if cause or not self.count_tokens else 0,
            )
        retrieval_ms = (time.perf_counter() - started) * 1000
        items = output.items
        context = [i.text for i in items] if output.context is None else list(output.context)
        notes = [] if items or context else [NO_MATCH]
        read = read_answer(
            self.reader, question.question, question.question_date, context, self._cause
        )
        return QuestionRetrieval(
            **base,
            items=items,
            retrieval_context=context,
            answer=read.answer,
            queries=trace.queries,
            errors=[*trace.notes, *read.errors],
            notes=notes,
            infra_failures=read.infra,
            retrieval_latency_ms=round(retrieval_ms, 3),
            reader_latency_ms=read.latency_ms,
            payload_tokens=self.count_tokens(context) if self.count_tokens else None,
            reader_saw_date=None if read.prompt is None else question.question_date in read.prompt,
        )

    def run(
        self, questions: list[QuestionInput], on_progress: ProgressCallback | None = None
    ) -> Iterator[QuestionRetrieval]:
        """Results in question order; `on_progress(done, total, result)` after each."""
        total = len(questions)
        for done, question in enumerate(questions, 1):
            result = self.run_one(question)
            if on_progress is not None:
                on_progress(done, total, result)
            yield result
