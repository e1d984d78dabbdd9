"""Plug-ins that fail the way real ones do, loaded by import path in the end-to-end tests.

`FlakyRetriever` wraps the real full-text retriever: for some questions it raises the
driver's own `ServiceUnavailable` (the graph server going away: the pipeline's failure), for
others a plain exception (the system under test's own bug), and answers the rest normally.
Which is which is a pure function of the question id, so a test can recompute it.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from typing import Any

import neo4j.exceptions

from eval_pipeline.corpus.batches import batch_index
from eval_pipeline.corpus.canaries import CANARY_PREFIX
from eval_pipeline.graph import server
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace


def flaky_fate(question_id: str) -> str:
    """ "unavailable", "bug" or "ok" for a question id (about a third each)."""
    bucket = hashlib.sha256(question_id.encode()).digest()[0] % 3
    return ("unavailable", "bug", "ok")[bucket]


class FlakyRetriever:
    name = "flaky"

    def __init__(self, env: RetrievalEnv) -> None:
        self.inner = FulltextRetriever(env)

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> Any:
        fate = flaky_fate(request.question_id)
        if fate == "unavailable":
            raise neo4j.exceptions.ServiceUnavailable("Connection to 127.0.0.1:7687 closed")
        if fate == "bug":
            raise ValueError(f"my retriever cannot parse {request.question_id}")
        return self.inner.retrieve(request, trace)

    def pins(self) -> dict[str, Any]:
        return {"retriever": self.name, "inner": self.inner.pins()}


class StopsTheGraphReconciler(ExtractiveReconciler):
    """Extractive, but stops the embedded graph server while it reconciles (as an operator
    running `eval-pipeline graph stop` mid-run would): the default one of the state dir, once
    per reconciler (a chain run in the tests' own process makes a new one)."""

    name = "stops-the-graph"
    version = "1"
    _stopped = False

    def reconcile(self, session):
        if not self._stopped:
            self._stopped = True
            server.stop(server.resolve_data_dir(None))
        return super().reconcile(session)


class KilledInBatchTwoRetriever(FulltextRetriever):
    """The full-text retriever, whose process is killed outright (as the kernel's OOM killer
    would) when it reaches a question of batch 2 of a run over two batches."""

    name = "killed-in-batch-two"

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> Any:
        # Canaries are planted in every batch: only a question of batch 2 itself kills it.
        own = not request.question_id.startswith(CANARY_PREFIX)
        if own and batch_index(request.question_id, 2) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().retrieve(request, trace)


class UnhurriedRetriever(FulltextRetriever):
    """The full-text retriever, waiting EVAL_TEST_RETRIEVAL_DELAY_S seconds before each
    question (none when unset): a run that a signal from outside can still catch half-way
    through retrieval, whatever the machine's speed. Its pins are the full-text retriever's,
    so a resumed run without the delay is the same run."""

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> Any:
        time.sleep(float(os.environ.get("EVAL_TEST_RETRIEVAL_DELAY_S") or 0))
        return super().retrieve(request, trace)
