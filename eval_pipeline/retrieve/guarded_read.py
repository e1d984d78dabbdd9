"""The one road from a retriever to the graph: guard check, then a bounded read transaction.

"Read-only, enforced twice" (issue 5): `readonly_guard.check_read_only` refuses anything that
is not plainly a read *before* the server sees it, and `GraphStore.read` runs what passes in a
read transaction with a timeout and a row cap. Neither ArcadeDB nor Memgraph community rejects
a write in a read transaction, so the guard is the half that holds; the transaction is kept
because a server that does enforce it costs nothing extra.

Reads that harm the server without writing (issue 13) are bounded on the server:
- time: a query still running at its timeout is *terminated on the server* (the dialect's
  `cancel_query`: ArcadeDB's `terminate query`, Memgraph's `TERMINATE TRANSACTIONS`), not
  only abandoned by the client: ArcadeDB ignores the Bolt transaction timeout, and an
  abandoned `UNWIND range(...)` product kept a core busy for minutes. The server's own ceiling
  (`arcadedb.command.timeout`, server.py; Memgraph's `--query-execution-timeout-sec`,
  docker-compose.yml) stops anything a canceller missed;
- memory and size: what the dialect attaches to the statement (`Dialect.bound_read`: Memgraph
  `QUERY MEMORY LIMIT`), the server's own guards (ArcadeDB's per-query heap guards, server.py;
  Memgraph's `--memory-limit`) and the row cap here. A statement that still exhausts the
  server's heap has its connection dropped while the server stays up; that is reported as the
  query's own failure, not as a server outage.

A timed-out read is found on the server by an id of its own, never by its text alone
(`Dialect.mark_read`: ArcadeDB a leading comment `/* eval_pipeline read <id> */`, Memgraph the
transaction's metadata): ArcadeDB lists a statement's text cut at 1,024 UTF-16 units, Python
counts code points, and a statement with a character outside the BMP before that cut was never
recognised, so it ran on to the server's ceiling (issue 28). What the server cannot stop at
all, a statement still being parsed, the guard bounds in size and nesting before it is sent.

Whose failure (see `eval_pipeline.failures`): a query refused, too slow or too big while the
server keeps answering is the system's own (a miss: retrievers tell their agent, the runner
scores it). A server that no longer answers raises `GraphServerLost`, deliberately not a
GraphError so that no retriever mistakes it for a bad query: the question is unscored.

Every attempt, refused or failed or not, becomes a `QueryRecord` in the caller's trace.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from eval_pipeline.graph.errors import (
    GraphError,
    GraphQueryError,
    GraphRowLimitError,
    GraphTimeoutError,
    GraphUnavailableError,
)
from eval_pipeline.retrieve.protocol import GraphReader, RetrievalTrace
from eval_pipeline.retrieve.readonly_guard import (
    DEFAULT_ALLOWED_FUNCTIONS,
    DEFAULT_ALLOWED_PROCEDURES,
    WriteRejected,
    check_read_only,
)
from eval_pipeline.retrieve.results import QueryRecord

log = logging.getLogger(__name__)

REJECTED_PREFIX = "rejected by the read-only guard: "
PROBE_TIMEOUT_S = 5.0

# (statement as sent, wall-clock time it was submitted, the read's id or None) -> ids of the
# server-side queries stopped.
QueryCanceller = Callable[[str, float, str | None], list[str]]


class QueryRejected(Exception):
    """The guard refused a query; it never reached the server."""

    def __init__(self, reason: str) -> None:
        super().__init__(REJECTED_PREFIX + reason)
        self.reason = reason


class GraphServerLost(RuntimeError):
    """The graph server stopped answering: an infrastructure failure, never the system's.

    Raised from the driver's error (`__cause__`), which `failures.infrastructure_cause`
    recognises; not a GraphError, so a retriever that feeds query errors back to its agent
    lets it through to the runner, which leaves the question unscored.
    """


class GuardedReader:
    """Reads through the guard with one timeout and one row cap, recording each attempt.

    `canceller` stops a timed-out query on the server; by default ("auto") the store's
    dialect does (`Dialect.cancel_query`), and None turns it off. The statement sent is the
    guarded one with the dialect's server-side bounds attached (`Dialect.bound_read`).
    """

    def __init__(
        self,
        store: GraphReader,
        *,
        timeout_s: float = 10.0,
        max_rows: int = 500,
        allowed_procedures: Iterable[str] = DEFAULT_ALLOWED_PROCEDURES,
        allowed_functions: Iterable[str] = DEFAULT_ALLOWED_FUNCTIONS,
        canceller: QueryCanceller | None | str = "auto",
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.allowed_procedures = frozenset(allowed_procedures)
        self.allowed_functions = frozenset(allowed_functions)
        self.probe_timeout_s = probe_timeout_s
        self._canceller = canceller

    def read(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        trace: RetrievalTrace | None = None,
        max_rows: int | None = None,
    ) -> list[dict]:
        """Rows of `query`; raises QueryRejected, a GraphError (the query's own failure) or
        GraphServerLost (the server's), after recording the attempt."""
        params = dict(params or {})
        cap = self.max_rows if max_rows is None else max_rows
        started = time.perf_counter()
        try:
            check_read_only(
                query,
                allowed_procedures=self.allowed_procedures,
                allowed_functions=self.allowed_functions,
            )
        except WriteRejected as rejected:
            _record(trace, query, params, started, error=REJECTED_PREFIX + rejected.reason)
            raise QueryRejected(rejected.reason) from None
        try:
            bounded = self._bounded(query)
        except GraphError as refused:  # a statement the dialect cannot bound is not sent
            _record(trace, query, params, started, error=str(refused))
            raise
        read_id = secrets.token_hex(8)
        sent, metadata = self._marked(bounded, read_id)
        extra: dict[str, Any] = {"metadata": metadata} if metadata else {}
        submitted = time.time()
        timed_out: GraphTimeoutError | None = None
        dropped: GraphUnavailableError | None = None
        # A dropped connection is tried once more when the server still answers: a stale
        # pooled connection (the server restarted) succeeds then, a statement that kills its
        # own connection (out of heap) fails again and is the query's own failure.
        for attempt in range(2):
            timed_out = dropped = None
            try:
                rows = self.store.read(
                    sent, params, timeout_s=self.timeout_s, max_rows=cap, **extra
                )
            except GraphTimeoutError as exc:
                timed_out = exc
            except GraphUnavailableError as exc:
                dropped = exc
            except Exception as exc:
                # A row-cap refusal is recorded as truncation: the store refuses rather than
                # cut silently, and the caller decides what to tell the agent.
                message = (
                    str(exc) if isinstance(exc, GraphError) else f"{type(exc).__name__}: {exc}"
                )
                _record(
                    trace,
                    query,
                    params,
                    started,
                    error=message,
                    truncated=isinstance(exc, GraphRowLimitError),
                )
                raise
            else:
                _record(trace, query, params, started, rows=len(rows))
                return rows
            if dropped is None or attempt == 1 or not self._server_answers():
                break
        # Out of the except blocks on purpose: the error raised next must not carry the
        # driver's error as its context when the server is fine (failures.py reads the chain).
        if timed_out is not None:
            stopped = self._stop_on_server(sent, submitted, read_id)
            if not self._server_answers():
                _record(trace, query, params, started, error=f"graph server lost: {timed_out}")
                down = GraphUnavailableError(f"graph server does not answer after: {timed_out}")
                down.__cause__ = timed_out
                raise GraphServerLost(f"graph server lost: {timed_out}") from down
            where = (
                f"stopped on the server ({', '.join(stopped)})"
                if stopped
                else "the server's own statement timeout stops it if still running"
            )
            error: GraphError = GraphTimeoutError(f"{timed_out}; {where}")
        else:
            assert dropped is not None
            if not self._server_answers():
                _record(trace, query, params, started, error=f"graph server lost: {dropped}")
                raise GraphServerLost(f"graph server lost: {dropped}") from dropped
            error = GraphQueryError(
                "the graph server dropped the connection running this query, twice, and "
                "still answers: the query itself failed there (most likely it needed more "
                "memory than the server has; produce smaller values and fewer rows)"
            )
            log.warning("%s: %s", error, query[:200])
        _record(trace, query, params, started, error=str(error))
        raise error

    # --- server side ----------------------------------------------------------------------

    def _server_answers(self) -> bool:
        try:
            self.store.read("RETURN 1 AS ok", {}, timeout_s=self.probe_timeout_s, max_rows=1)
        except Exception:
            return False
        return True

    def _bounded(self, query: str) -> str:
        bound = getattr(getattr(self.store, "dialect", None), "bound_read", None)
        return bound(query) if callable(bound) else query

    def _marked(self, query: str, read_id: str) -> tuple[str, dict[str, str]]:
        """`query` marked as read `read_id` the dialect's way (`Dialect.mark_read`), and the
        transaction metadata to send; as it is for a reader without a dialect."""
        mark = getattr(getattr(self.store, "dialect", None), "mark_read", None)
        return mark(query, read_id) if callable(mark) else (query, {})

    def _stop_on_server(self, query: str, submitted: float, read_id: str) -> list[str]:
        """Terminate the timed-out query on the server; best effort, never raises."""
        try:
            if self._canceller == "auto":
                self._canceller = dialect_canceller(self.store)
            if not callable(self._canceller):
                return []
            return list(self._canceller(query, submitted, read_id))
        except Exception as exc:  # the server's ceiling still applies
            log.warning("could not stop a timed-out query on the server: %s", exc)
            return []


def dialect_canceller(store: Any) -> QueryCanceller | None:
    """The store's dialect's way of stopping a query on the server (`cancel_query`), or None
    for a reader without a dialect."""
    cancel = getattr(getattr(store, "dialect", None), "cancel_query", None)
    if not callable(cancel):
        return None

    def canceller(query: str, submitted: float, read_id: str | None = None) -> list[str]:
        return list(cancel(store, query, submitted, read_id))

    return canceller


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
