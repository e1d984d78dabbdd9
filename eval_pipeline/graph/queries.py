"""`QueryRunner`: how a statement reaches the server, and what it may cost.

Auto-commit statements, single writes, explicit write transactions and capped, timed reads.
Every write is announced first (`note_write`: the store opens its write phase there, see
`ownership.py`); driver errors come back as the dialect maps them (`GraphError`s, one line).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import neo4j

from eval_pipeline.graph.connection import Connection
from eval_pipeline.graph.errors import GraphError, GraphRowLimitError, GraphTimeoutError

# Auto-commit statements that only read (everything else is taken for a write: a read taken
# for a write only opens a phase, a write taken for a read would be someone else's data).
# TERMINATE TRANSACTIONS (Memgraph) stops a statement of ours and changes no data.
_CYPHER_READ = re.compile(r"^\s*(SHOW|RETURN|EXPLAIN|PROFILE|TERMINATE)\b", re.IGNORECASE)


class QueryRunner:
    def __init__(self, connection: Connection, note_write: Callable[[str], None]) -> None:
        self._connection = connection
        self._note_write = note_write

    def _mapped(self, exc: Exception) -> GraphError:
        return self._connection.dialect.map_error(exc, self._connection.where)

    def autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one statement in its own auto-commit transaction (DDL, SHOW ...)."""
        if not _CYPHER_READ.match(query):
            self._note_write(query)
        return self.autocommit_unannounced(query, params)

    def autocommit_unannounced(
        self, query: str, params: Mapping[str, Any] | None = None
    ) -> list[dict]:
        """An auto-commit statement that opens no write phase: the store's own bookkeeping."""
        try:
            with self._connection.session() as session:
                return session.run(query, dict(params or {})).data()
        except Exception as exc:
            raise self._mapped(exc) from exc

    def write(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one write statement (auto-commit) and return its rows."""
        self._note_write(query)
        return self.autocommit_unannounced(query, params)

    def send(self, query: str, params: Mapping[str, Any]) -> None:
        """One write statement whose rows nobody reads (a batch of `write_batches`)."""
        self._note_write(query)
        try:
            with self._connection.session() as session:
                session.run(query, dict(params)).consume()
        except Exception as exc:
            raise self._mapped(exc) from exc

    def write_transaction(
        self, statements: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> list[list[dict]]:
        """Run `statements` in one explicit write transaction: all or nothing.

        ArcadeDB keeps the partial effects of a failing auto-commit statement, so a writer
        that needs atomicity (the reconciler, one session at a time) must come through here.
        """

        def work(tx: neo4j.ManagedTransaction) -> list[list[dict]]:
            return [tx.run(query, dict(params)).data() for query, params in statements]

        self._note_write("write transaction")
        try:
            with self._connection.session() as session:
                return session.execute_write(work)
        except Exception as exc:
            raise self._mapped(exc) from exc

    def read(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = 30,
        max_rows: int = 10_000,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[dict]:
        """Run a query in a read transaction; at most `max_rows` rows within `timeout_s`.

        More rows than the cap raise GraphRowLimitError (add a LIMIT) rather than truncate
        silently. The timeout is enforced here (ArcadeDB ignores the transaction timeout we
        also send): at `timeout_s` this call gives up with GraphTimeoutError. It does not stop
        the statement on the server by itself: `retrieve.guarded_read.GuardedReader` does
        (the dialect's `cancel_query`: ArcadeDB `terminate query`, Memgraph `TERMINATE
        TRANSACTIONS`), and the server's own statement timeout is the backstop. `metadata` is
        the transaction's metadata (Memgraph lists it in SHOW TRANSACTIONS). Neither server
        rejects writes in a read transaction: callers that run untrusted Cypher must guard it
        themselves.
        """
        driver = self._connection.driver()
        database = self._connection.session_database()
        tx_metadata = dict(metadata) if metadata else None

        def work() -> list[dict]:
            with driver.session(database=database, default_access_mode=neo4j.READ_ACCESS) as s:
                with s.begin_transaction(timeout=timeout_s, metadata=tx_metadata) as tx:
                    rows: list[dict] = []
                    for record in tx.run(query, dict(params or {})):
                        if len(rows) >= max_rows:
                            raise GraphRowLimitError(
                                f"query returned more than {max_rows} rows; add a LIMIT"
                            )
                        rows.append(record.data())
                    return rows

        try:
            return _in_own_thread(work).result(timeout=timeout_s)
        except FutureTimeout:
            raise GraphTimeoutError(
                f"read on {self._connection.where} did not finish within {timeout_s:g} s"
            ) from None
        except GraphError:
            raise
        except Exception as exc:
            raise self._mapped(exc) from exc

    def close(self) -> None:
        """Nothing to release: a read's thread ends with its statement (see `_in_own_thread`)."""


def _in_own_thread(work: Callable[[], list[dict]]) -> Future[list[dict]]:
    """`work` started on a daemon thread of its own; its outcome as a future.

    Not a fixed pool: a read the server never answers (one its cancel cannot reach) keeps its
    thread until the server lets go, and with a pool of N such reads every later read, the
    server probe `RETURN 1` included, queued behind them and looked like a lost server
    (issue 28: 8 pinned reads and the rest of the run was unscored). A daemon thread never
    holds up the process's exit.
    """
    future: Future[list[dict]] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to the waiting caller, if it still waits
            future.set_exception(exc)

    threading.Thread(target=run, name="graph-read", daemon=True).start()
    return future
