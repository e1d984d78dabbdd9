"""`QueryRunner`: how a statement reaches the server, and what it may cost.

Auto-commit statements, single writes, explicit write transactions and capped, timed reads.
Every write is announced first (`note_write`: the store opens its write phase there, see
`ownership.py`); driver errors come back as the dialect maps them (`GraphError`s, one line).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import neo4j

from eval_pipeline.graph.connection import Connection
from eval_pipeline.graph.errors import GraphError, GraphRowLimitError, GraphTimeoutError

# Auto-commit statements that only read (everything else is taken for a write: a read taken
# for a write only opens a phase, a write taken for a read would be someone else's data).
# TERMINATE TRANSACTIONS (Memgraph) stops a statement of ours and changes no data.
_CYPHER_READ = re.compile(r"^\s*(SHOW|RETURN|EXPLAIN|PROFILE|TERMINATE)\b", re.IGNORECASE)
READ_THREADS = 8


class QueryRunner:
    def __init__(self, connection: Connection, note_write: Callable[[str], None]) -> None:
        self._connection = connection
        self._note_write = note_write
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

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
    ) -> list[dict]:
        """Run a query in a read transaction; at most `max_rows` rows within `timeout_s`.

        More rows than the cap raise GraphRowLimitError (add a LIMIT) rather than truncate
        silently. The timeout is enforced here (ArcadeDB ignores the transaction timeout we
        also send): at `timeout_s` this call gives up with GraphTimeoutError. It does not stop
        the statement on the server by itself: `retrieve.guarded_read.GuardedReader` does
        (the dialect's `cancel_query`: ArcadeDB `terminate query`, Memgraph `TERMINATE
        TRANSACTIONS`), and the server's own statement timeout is the backstop. Neither server
        rejects writes in a read transaction: callers that run untrusted Cypher must guard it
        themselves.
        """
        driver = self._connection.driver()
        database = self._connection.session_database()

        def work() -> list[dict]:
            with driver.session(database=database, default_access_mode=neo4j.READ_ACCESS) as s:
                with s.begin_transaction(timeout=timeout_s) as tx:
                    rows: list[dict] = []
                    for record in tx.run(query, dict(params or {})):
                        if len(rows) >= max_rows:
                            raise GraphRowLimitError(
                                f"query returned more than {max_rows} rows; add a LIMIT"
                            )
                        rows.append(record.data())
                    return rows

        future = self._read_pool().submit(work)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            raise GraphTimeoutError(
                f"read on {self._connection.where} did not finish within {timeout_s:g} s"
            ) from None
        except GraphError:
            raise
        except Exception as exc:
            raise self._mapped(exc) from exc

    def _read_pool(self) -> ThreadPoolExecutor:
        # Reads run in a pool so that a read past its timeout leaves its caller on time.
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=READ_THREADS, thread_name_prefix="graph-read"
                )
            return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
