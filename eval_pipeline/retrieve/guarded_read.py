"""The one road from a retriever to the graph: guard check, then a bounded read transaction.

"Read-only, enforced twice" (issue 5): `readonly_guard.check_read_only` refuses anything that
is not plainly a read *before* the server sees it, and `GraphStore.read` runs what passes in a
read transaction with a timeout and a row cap. Neither ArcadeDB nor Memgraph community rejects
a write in a read transaction, so the guard is the half that holds; the transaction is kept
because a server that does enforce it costs nothing extra.

Every attempt, refused or failed or not, becomes a `QueryRecord` in the caller's trace.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from eval_pipeline.graph.errors import GraphError, GraphRowLimitError
from eval_pipeline.retrieve.protocol import GraphReader, RetrievalTrace
from eval_pipeline.retrieve.readonly_guard import (
    DEFAULT_ALLOWED_PROCEDURES,
    WriteRejected,
    check_read_only,
)
from eval_pipeline.retrieve.results import QueryRecord

REJECTED_PREFIX = "rejected by the read-only guard: "


class QueryRejected(Exception):
    """The guard refused a query; it never reached the server."""

    def __init__(self, reason: str) -> None:
        super().__init__(REJECTED_PREFIX + reason)
        self.reason = reason


class GuardedReader:
    """Reads through the guard with one timeout and one row cap, recording each attempt."""

    def __init__(
        self,
        store: GraphReader,
        *,
        timeout_s: float = 10.0,
        max_rows: int = 500,
        allowed_procedures: Iterable[str] = DEFAULT_ALLOWED_PROCEDURES,
    ) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.allowed_procedures = frozenset(allowed_procedures)

    def read(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        trace: RetrievalTrace | None = None,
        max_rows: int | None = None,
    ) -> list[dict]:
        """Rows of `query`; raises QueryRejected, or the store's GraphError, after recording."""
        params = dict(params or {})
        cap = self.max_rows if max_rows is None else max_rows
        started = time.perf_counter()
        try:
            check_read_only(query, allowed_procedures=self.allowed_procedures)
        except WriteRejected as rejected:
            _record(trace, query, params, started, error=REJECTED_PREFIX + rejected.reason)
            raise QueryRejected(rejected.reason) from None
        try:
            rows = self.store.read(query, params, timeout_s=self.timeout_s, max_rows=cap)
        except Exception as exc:
            # A row-cap refusal is recorded as truncation: the store refuses rather than cut
            # silently, and the caller decides what to tell the agent.
            message = str(exc) if isinstance(exc, GraphError) else f"{type(exc).__name__}: {exc}"
            _record(
                trace,
                query,
                params,
                started,
                error=message,
                truncated=isinstance(exc, GraphRowLimitError),
            )
            raise
        _record(trace, query, params, started, rows=len(rows))
        return rows


def _record(
    trace: RetrievalTrace | None,
    query: str,
    params: dict[str, Any],
    started: float,
    *,
    rows: int | None = None,
    error: str | None = None,
    truncated: bool = False,
) -> None:
    if trace is None:
        return
    trace.record(
        QueryRecord(
            query=query,
            params=params,
            rows=rows,
            error=error,
            truncated=truncated,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
        )
    )
