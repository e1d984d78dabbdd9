"""`GraphStore`: the one Dagster resource every graph-touching asset uses.

Official `neo4j` driver over Bolt; the dialect (`dialects/`) holds what differs between
ArcadeDB and Memgraph. With no `uri`, it starts (or reuses) the embedded ArcadeDB under
`state_dir()/graph/arcadedb` (see `server.py`).

The instance is dedicated to evaluation: `claim()` marks an empty instance as ours, and
`wipe()` refuses to touch a non-empty instance without that mark unless `disposable`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import neo4j
from pydantic import BaseModel, Field, PrivateAttr

from eval_pipeline.graph import schema, server
from eval_pipeline.graph.arcadedb_http import ArcadeHttp
from eval_pipeline.graph.dialects import Dialect, get_dialect
from eval_pipeline.graph.errors import (
    ForeignDataError,
    GraphError,
    GraphPayloadError,
    GraphRowLimitError,
    GraphTimeoutError,
)

# ArcadeDB's default Bolt message limit is 16 MiB and a message over it hangs the client with
# no error; one row must fit well under it even on a server we did not configure.
MAX_ROW_BYTES = 12 * 1024 * 1024


class BatchStats(BaseModel):
    batches: int = 0
    rows: int = 0
    bytes: int = 0

    def __add__(self, other: BatchStats) -> BatchStats:
        return BatchStats(
            batches=self.batches + other.batches,
            rows=self.rows + other.rows,
            bytes=self.bytes + other.bytes,
        )


class _Endpoint(BaseModel):
    uri: str
    user: str | None
    password: str | None
    http_url: str | None
    pid: int | None = None  # embedded server: a restarted server gets a fresh driver


class GraphStore(dg.ConfigurableResource):
    """Bolt access to the evaluation graph (embedded ArcadeDB by default, or Memgraph)."""

    backend: str = Field(default="arcadedb", description="arcadedb or memgraph")
    uri: str | None = Field(
        default=None, description="bolt://host:port; unset = the embedded ArcadeDB server"
    )
    database: str = Field(default="eval", description="database name on the server")
    user: str | None = Field(default=None, description="from EVAL_GRAPH_USER")
    password: str | None = Field(default=None, description="from EVAL_GRAPH_PASSWORD")
    http_url: str | None = Field(
        default=None, description="ArcadeDB HTTP API of an external server (index creation)"
    )
    disposable: bool = Field(
        default=False, description="allow wiping a non-empty instance the pipeline never claimed"
    )
    lease_wait_s: float = Field(
        default=0.0,
        ge=0.0,
        description="how long a chain waits for another chain's lease on the instance "
        "before it is refused (0: refuse at once, naming the holder)",
    )
    data_dir: str | None = Field(
        default=None, description="embedded server directory; unset = state_dir()/graph/arcadedb"
    )
    heap: str = Field(default="1g", description="embedded server JVM heap (-Xmx)")
    batch_turns: int = Field(default=2000, description="turns per injection statement")
    batch_bytes: int = Field(
        default=8 * 1024 * 1024,
        description="bytes per Bolt message, max (keep under the server's limit: 16 MiB by "
        "default on ArcadeDB, where an oversize message hangs the client)",
    )

    _driver: neo4j.Driver | None = PrivateAttr(default=None)
    _endpoint: _Endpoint | None = PrivateAttr(default=None)
    _pool: ThreadPoolExecutor | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.uri is None

    @property
    def dialect(self) -> Dialect:
        return get_dialect(self.backend)

    def ensure_running(self) -> str:
        """Start or reuse the embedded server (or check the external one); return its URI."""
        if self.embedded:
            if self.dialect.name != "arcadedb":
                raise GraphError(
                    f"backend {self.backend} needs --graph-uri: only ArcadeDB is embedded"
                )
            info = server.ensure_running(self.data_dir, database=self.database, heap=self.heap)
            creds = server.credentials(server.resolve_data_dir(self.data_dir))
            endpoint = _Endpoint(
                uri=info.bolt_uri,
                user=creds.user,
                password=creds.password,
                http_url=info.http_url,
                pid=info.pid,
            )
        else:
            endpoint = _Endpoint(
                uri=self.uri, user=self.user, password=self.password, http_url=self.http_url
            )
        with self._lock:
            if endpoint != self._endpoint or self._driver is None:
                self._close_driver()
                auth = (endpoint.user, endpoint.password) if endpoint.user else None
                self._driver = neo4j.GraphDatabase.driver(
                    endpoint.uri, auth=auth, connection_timeout=10.0
                )
                self._endpoint = endpoint
        self.autocommit("RETURN 1 AS ok")
        return endpoint.uri

    def close(self) -> None:
        with self._lock:
            self._close_driver()
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def _close_driver(self) -> None:
        if self._driver is not None:
            self._driver.close()
        self._driver = None

    def _get_driver(self) -> neo4j.Driver:
        if self._driver is None:
            self.ensure_running()
        assert self._driver is not None
        return self._driver

    @property
    def where(self) -> str:
        uri = self._endpoint.uri if self._endpoint else (self.uri or "embedded ArcadeDB")
        return f"{uri} (database {self.database})"

    def http(self) -> ArcadeHttp | None:
        """ArcadeDB's HTTP API for this server, or None when no URL is known."""
        self._get_driver()
        ep = self._endpoint
        if ep is None or not ep.http_url:
            return None
        return ArcadeHttp(ep.http_url, ep.user or "", ep.password or "")

    def driver_agent(self) -> str:
        return self._get_driver().get_server_info().agent

    def _session(self, access_mode: str = neo4j.WRITE_ACCESS) -> neo4j.Session:
        return self._get_driver().session(
            database=self.dialect.session_database(self.database), default_access_mode=access_mode
        )

    # --- queries ------------------------------------------------------------------------

    def autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one statement in its own auto-commit transaction (DDL, SHOW ...)."""
        try:
            with self._session() as session:
                return session.run(query, dict(params or {})).data()
        except Exception as exc:
            raise self.dialect.map_error(exc, self.where) from exc

    def write(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one write statement (auto-commit) and return its rows."""
        return self.autocommit(query, params)

    def write_transaction(
        self, statements: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> list[list[dict]]:
        """Run `statements` in one explicit write transaction: all or nothing.

        ArcadeDB keeps the partial effects of a failing auto-commit statement, so a writer
        that needs atomicity (the reconciler, one session at a time) must come through here.
        """

        def work(tx: neo4j.ManagedTransaction) -> list[list[dict]]:
            return [tx.run(query, dict(params)).data() for query, params in statements]

        try:
            with self._session() as session:
                return session.execute_write(work)
        except Exception as exc:
            raise self.dialect.map_error(exc, self.where) from exc

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
        silently. The timeout is enforced here: ArcadeDB ignores the transaction timeout we
        also send. A timed-out query may keep running on the server until it finishes; its
        connection goes back to the pool then. Neither server rejects writes in a read
        transaction: callers that run untrusted Cypher must guard it themselves.
        """
        driver = self._get_driver()
        database = self.dialect.session_database(self.database)

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
                f"read on {self.where} did not finish within {timeout_s:g} s"
            ) from None
        except GraphError:
            raise
        except Exception as exc:
            raise self.dialect.map_error(exc, self.where) from exc

    def _read_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="graph-read")
            return self._pool

    def write_batches(
        self,
        query: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        batch_rows: int,
        batch_bytes: int,
        row_cost: Callable[[Mapping[str, Any]], int] | None = None,
        param: str = "rows",
    ) -> BatchStats:
        """Send `rows` as `$rows` of `query`, one auto-commit statement per batch.

        A batch closes at `batch_rows` (counted by `row_cost`, 1 per row by default) or before
        it would exceed `batch_bytes` (JSON size, an upper bound of the Bolt encoding). A single
        row over MAX_ROW_BYTES is refused: an oversize Bolt message hangs the client.
        """
        stats = BatchStats()
        batch: list[Mapping[str, Any]] = []
        cost = size = 0
        for row in rows:
            row_bytes = len(json.dumps(row))
            if row_bytes > MAX_ROW_BYTES:
                raise GraphPayloadError(
                    f"one row is {row_bytes / 1e6:.1f} MB, over the {MAX_ROW_BYTES / 1e6:.0f} MB "
                    "a Bolt message may carry here; split it"
                )
            if batch and size + row_bytes > batch_bytes:
                self._send(query, param, batch, size, stats)
                batch, cost, size = [], 0, 0
            batch.append(row)
            size += row_bytes
            cost += row_cost(row) if row_cost else 1
            if cost >= batch_rows:
                self._send(query, param, batch, size, stats)
                batch, cost, size = [], 0, 0
        if batch:
            self._send(query, param, batch, size, stats)
        return stats

    def _send(
        self, query: str, param: str, batch: list[Mapping[str, Any]], size: int, stats: BatchStats
    ) -> None:
        try:
            with self._session() as session:
                session.run(query, {param: batch}).consume()
        except Exception as exc:
            raise self.dialect.map_error(exc, self.where) from exc
        stats.batches += 1
        stats.rows += len(batch)
        stats.bytes += size

    def encode_value(self, value: Any) -> Any:
        """A property value in a form this backend stores (ArcadeDB: maps as JSON text)."""
        return self.dialect.encode_value(value)

    # --- claim and wipe -----------------------------------------------------------------

    def claim_record(self) -> dict | None:
        rows = self.read(schema.READ_CLAIM)
        return rows[0] if rows else None

    def node_count(self) -> int:
        return int(self.read("MATCH (n) RETURN count(n) AS n", timeout_s=600)[0]["n"])

    def is_empty(self) -> bool:
        # Our lease alone does not make an instance someone's data.
        return not self.read(f"MATCH (n) WHERE NOT n:{schema.LEASE} RETURN 1 AS x LIMIT 1")

    def claim(self) -> None:
        """Mark the instance as the pipeline's own; refuse one that holds someone's data."""
        if self.claim_record() is not None:
            return
        if not self.is_empty() and not self.disposable:
            raise self._foreign("claim")
        self._write_claim()

    def _write_claim(self) -> None:
        self.write(schema.WRITE_CLAIM, {"claimed_at": datetime.now(UTC).isoformat()})

    def _foreign(self, action: str) -> ForeignDataError:
        return ForeignDataError(
            f"refusing to {action} {self.where}: it holds {self.node_count()} nodes and no "
            "eval_pipeline claim, so this looks like someone else's data; point --graph-uri "
            "at a dedicated instance, or mark this one disposable if it may be erased"
        )

    def wipe(self) -> None:
        """Remove every node, relationship and index (ours or a reconciler's), then re-claim."""
        if self.claim_record() is None and not self.is_empty() and not self.disposable:
            raise self._foreign("wipe")
        self.dialect.wipe(self)
        self._write_claim()

    # --- introspection ------------------------------------------------------------------

    def counts(self) -> dict[str, Any]:
        """{"nodes", "relationships", "labels": {label: n}, "relationship_types": {type: n}}."""
        return self.dialect.counts(self)

    def server_version(self) -> str:
        return self.dialect.server_version(self)

    def fulltext_search(self, query: str, *, limit: int = 10, timeout_s: float = 30) -> list[dict]:
        """Best-matching turns for a keyword query: rows of `turn_id` and `score`."""
        cypher, params = self.dialect.fulltext_search(query, limit)
        return self.read(cypher, params, timeout_s=timeout_s, max_rows=limit)

    def status(self) -> dict[str, Any]:
        """Where the graph is and what it holds (for `eval-pipeline graph status`)."""
        out: dict[str, Any] = {"backend": self.backend, "database": self.database}
        if self.embedded:
            root = server.resolve_data_dir(self.data_dir)
            info = server.running_info(root)
            out.update(data_dir=str(root), running=info is not None)
            if info is None:
                return out
            out.update(uri=info.bolt_uri, http_url=info.http_url, pid=info.pid)
        else:
            out.update(uri=self.uri, http_url=self.http_url)
        self.ensure_running()
        out.update(server_version=self.server_version(), counts=self.counts())
        return out
