"""Retrieve and answer, question by question, into `QuestionRetrieval` records.

A question whose retrieval raises is recorded as a miss (no items, answer None, the error)
and the batch goes on: one bad question must not cost the other 499 their results, and a
dropped question would silently flatter every average computed later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.corpus.models import Golden
from eval_pipeline.retrieve.protocol import (
    RetrievalRequest,
    RetrievalTrace,
    Retriever,
    Scope,
    as_output,
)
from eval_pipeline.retrieve.reader import Reader
from eval_pipeline.retrieve.results import QuestionRetrieval

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


def _error_text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
    ) -> None:
        self.retriever = retriever
        self.reader = reader
        self.scope = scope
        self.top_k = top_k
        self.count_tokens = count_tokens

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
        except Exception as exc:
            latency = (time.perf_counter() - started) * 1000
            log.warning("retrieval failed for %s: %s", question.question_id, _error_text(exc))
            return QuestionRetrieval(
                **base,
                items=[],
                retrieval_context=[],
                answer=None,
                queries=trace.queries,
                errors=[*trace.notes, f"retrieval: {_error_text(exc)}"],
                retrieval_latency_ms=round(latency, 3),
                payload_tokens=0 if self.count_tokens else None,
            )
        retrieval_ms = (time.perf_counter() - started) * 1000
        items = output.items
        context = [i.text for i in items] if output.context is None else list(output.context)
        errors = list(trace.notes)

        started = time.perf_counter()
        answer: str | None
        try:
            answer = self.reader.answer(question.question, question.question_date, context)
        except Exception as exc:
            answer = None
            errors.append(f"reader: {_error_text(exc)}")
        reader_ms = (time.perf_counter() - started) * 1000
        return QuestionRetrieval(
            **base,
            items=items,
            retrieval_context=context,
            answer=answer,
            queries=trace.queries,
            errors=errors,
            retrieval_latency_ms=round(retrieval_ms, 3),
            reader_latency_ms=round(reader_ms, 3),
            payload_tokens=self.count_tokens(context) if self.count_tokens else None,
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
