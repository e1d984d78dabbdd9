"""`GraphStore`: the one Dagster resource every graph-touching asset uses.

Official `neo4j` driver over Bolt; the dialect (`dialects/`) holds what differs between
ArcadeDB and Memgraph. With no `uri`, it starts (or reuses) the embedded ArcadeDB under
`state_dir()/graph/arcadedb` (see `server.py`).

The instance is dedicated to evaluation: `claim()` marks an empty instance as ours, and
`wipe()` refuses to touch a non-empty instance without that mark unless `disposable`.
"Empty" is the dialect's inventory with nothing in it: no node, relationship, document record,
type, index, constraint or trigger (our lease aside).

Data someone else wrote after the claim is caught by checkpoints: every write of ours goes
through this store (Cypher, batches, transactions, and SQL over ArcadeDB's HTTP API), so the
store knows when one of its write phases begins — it lists itself in the claim node before its
first write — and records, when the phase ends (`checkpoint()`, called by `close()` and so at
the end of every Dagster step), what the instance then holds. The wipe compares the instance
with the last checkpoint: more records, types, indexes, constraints or triggers than that,
with no write phase of ours open, were written by someone else, and it refuses with one line
(unless `disposable`). A phase opening also compares, so that its checkpoint never absorbs
what someone else wrote before it: that finding is kept in the claim for the next wipe.

Limits: writes of ours in a phase that never reached its checkpoint (a killed process) cannot
be told apart from someone else's, so the next wipe goes ahead and logs it; a delete or a
property change by someone else is not detected (counts only grow or stay), nor is a foreign
write made while a write phase of ours is open. The lease's own writes (heartbeat) are ours
and not a write phase: the lease node is left out of every inventory.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import dagster as dg
import neo4j
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.graph import lease, schema, server
from eval_pipeline.graph.arcadedb_http import ArcadeHttp
from eval_pipeline.graph.dialects import Dialect, get_dialect
from eval_pipeline.graph.dialects.base import KEPT_LABELS, Inventory
from eval_pipeline.graph.errors import (
    ForeignDataError,
    GraphError,
    GraphPayloadError,
    GraphQueryError,
    GraphRowLimitError,
    GraphTimeoutError,
)

log = logging.getLogger(__name__)

# ArcadeDB's default Bolt message limit is 16 MiB and a message over it hangs the client with
# no error; one row must fit well under it even on a server we did not configure.
MAX_ROW_BYTES = 12 * 1024 * 1024

# The lease's statements are ours but not a write phase: a chain holds (and renews) its lease
# for hours, and that must not keep a window open in which any change passes for ours.
_LEASE_STATEMENTS = frozenset(
    {lease.CREATE_LEASE, lease.TAKE_LEASE, lease.RENEW_LEASE, lease.DELETE_LEASE}
)
# Auto-commit statements that only read (everything else is taken for a write: a read taken
# for a write only opens a phase, a write taken for a read would be someone else's data).
# TERMINATE TRANSACTIONS (Memgraph) stops a statement of ours and changes no data.
_CYPHER_READ = re.compile(r"^\s*(SHOW|RETURN|EXPLAIN|PROFILE|TERMINATE)\b", re.IGNORECASE)
_SQL_READ = re.compile(r"^\s*(SELECT|MATCH|TRAVERSE|EXPLAIN|PROFILE)\b", re.IGNORECASE)
# Write phases of ours open in this process: a wipe here keeps their entries in the claim.
_OPEN_HERE: set[str] = set()
_OPEN_LOCK = threading.Lock()
# In a graph URI: one instance per question batch, `{batch}` being its number (1-based).
BATCH_PLACEHOLDER = "{batch}"
_BOOKKEEPING_RETRIES = 5


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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
    batch_uri: str | None = Field(
        default=None,
        description="bolt URI of the instance of each question batch, {batch} its number "
        "(a run over K > 1 batches); unset: `uri` itself names one per batch",
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

    # A refused URL must not be echoed back into Dagster's error either.
    model_config = ConfigDict(hide_input_in_errors=True)

    @field_validator("uri", "http_url", "batch_uri")
    @classmethod
    def _no_credentials_in_urls(cls, value: str | None) -> str | None:
        # A URL is stored in Dagster's run storage and logs: credentials never go in one.
        if value is not None and (urlsplit(value).username or urlsplit(value).password):
            raise ValueError(
                "the graph URL must not carry credentials; set EVAL_GRAPH_USER and "
                "EVAL_GRAPH_PASSWORD in the environment instead"
            )
        return value

    _driver: neo4j.Driver | None = PrivateAttr(default=None)
    _endpoint: _Endpoint | None = PrivateAttr(default=None)
    _pool: ThreadPoolExecutor | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    # The write phase this store has open (its entry in the claim's `writers`), if any.
    _writer: str | None = PrivateAttr(default=None)
    _phase_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _quiet: int = PrivateAttr(default=0)  # > 0 while the wipe runs: its writes open no phase
    _wipe_note: str | None = PrivateAttr(default=None)
    # One dialect per server: Memgraph's remembers the version and storage mode it read.
    _dialect: Dialect | None = PrivateAttr(default=None)
    # The instances of a partitioned run's question batches (`for_batch`), closed with this.
    _batch_stores: dict[str, GraphStore] = PrivateAttr(default_factory=dict)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.uri is None

    @property
    def dialect(self) -> Dialect:
        """This store's dialect; what it learned of the server (`on_connect`) is kept until
        the store connects to another server."""
        if self._dialect is None or self._dialect.name != self.backend.lower():
            self._dialect = get_dialect(self.backend)
        return self._dialect

    def for_batch(self, batch: BatchKey) -> GraphStore:
        """The graph instance of question batch `batch`: this one for a run of one batch;
        otherwise the batch URI (`batch_template`) with `{batch}` replaced by the batch number
        (in the HTTP URL too), or an embedded server of its own (`<data dir>-batchNN`).
        Batches never share an instance: each wipes its own before injecting."""
        template = self.batch_template(batch.batches)
        if template is None and batch.batches == 1:
            return self
        if template is None and not self.embedded:
            raise GraphError(
                f"{batch.batches} question batches need one graph instance each: put "
                f"{BATCH_PLACEHOLDER} in the graph URI (e.g. bolt://memgraph-{{batch}}:7687)"
            )
        number = str(batch.index)
        with self._lock:
            store = self._batch_stores.get(batch.key)
            if store is None:
                values = {name: getattr(self, name) for name in type(self).model_fields}
                if template is None:  # embedded: a server of its own per batch
                    root = server.resolve_data_dir(self.data_dir)
                    values["data_dir"] = str(root.with_name(f"{root.name}-batch{batch.index:02d}"))
                else:
                    values["uri"] = template.replace(BATCH_PLACEHOLDER, number)
                    values["batch_uri"] = None
                    if self.http_url:
                        values["http_url"] = self.http_url.replace(BATCH_PLACEHOLDER, number)
                store = self._batch_stores[batch.key] = GraphStore(**values)
        return store

    def batch_template(self, batches: int) -> str | None:
        """The URI naming each batch's instance with {batch}: `uri` when it holds the
        placeholder, else `batch_uri` for a run over several batches; None: embedded servers
        (several batches) or this instance itself (one)."""
        if BATCH_PLACEHOLDER in (self.uri or ""):
            return self.uri
        if batches > 1 and self.batch_uri:
            return self.batch_uri
        return None

    def ensure_running(self) -> str:
        """Start or reuse the embedded server (or check the external one); return its URI."""
        if BATCH_PLACEHOLDER in (self.uri or ""):
            raise GraphError(
                f"the graph URI {self.uri} names one instance per question batch: this use "
                "of it was given no batch"
            )
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
                if self._endpoint is None or endpoint.uri != self._endpoint.uri:
                    self._dialect = None  # another server: learn it afresh
                self._endpoint = endpoint
        self.autocommit("RETURN 1 AS ok")
        self.dialect.on_connect(self)
        return endpoint.uri

    def close(self) -> None:
        """Record the end of this store's write phase (if one is open), then disconnect."""
        if self._writer is not None and self._driver is not None:
            try:
                self.checkpoint()
            except GraphError as exc:  # the next wipe will not attribute what changed since
                log.warning("no checkpoint recorded on %s: %s", self.where, exc)
        for store in list(self._batch_stores.values()):
            store.close()
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
        return ArcadeHttp(ep.http_url, ep.user or "", ep.password or "", on_command=self._heard_sql)

    def _heard_sql(self, command: str) -> None:
        if not _SQL_READ.match(command):
            self._note_write(command)

    def driver_agent(self) -> str:
        return self._get_driver().get_server_info().agent

    def _session(self, access_mode: str = neo4j.WRITE_ACCESS) -> neo4j.Session:
        return self._get_driver().session(
            database=self.dialect.session_database(self.database), default_access_mode=access_mode
        )

    # --- queries ------------------------------------------------------------------------

    def autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one statement in its own auto-commit transaction (DDL, SHOW ...)."""
        if not _CYPHER_READ.match(query):
            self._note_write(query)
        return self._autocommit(query, params)

    def _autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        try:
            with self._session() as session:
                return session.run(query, dict(params or {})).data()
        except Exception as exc:
            raise self.dialect.map_error(exc, self.where) from exc

    def write(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one write statement (auto-commit) and return its rows."""
        self._note_write(query)
        return self._autocommit(query, params)

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
        silently. The timeout is enforced here (ArcadeDB ignores the transaction timeout we
        also send): at `timeout_s` this call gives up with GraphTimeoutError. It does not stop
        the statement on the server by itself: `retrieve.guarded_read.GuardedReader` does
        (the dialect's `cancel_query`: ArcadeDB `terminate query`, Memgraph `TERMINATE
        TRANSACTIONS`), and the server's own statement timeout is the backstop. Neither server
        rejects writes in a read transaction: callers that run untrusted Cypher must guard it
        themselves.
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
        self._note_write(query)
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

    def inventory(self) -> Inventory:
        """What the instance holds, our lease and claim left out (the dialect's view)."""
        return self.dialect.inventory(self).without(KEPT_LABELS)

    def foreign_content(self) -> Inventory:
        """What an unclaimed instance holds that is not ours: the inventory less our
        bookkeeping types when they hold no record (the lease and claim always)."""
        return self.inventory().without((), empty_types=schema.BOOKKEEPING_LABELS)

    def is_empty(self) -> bool:
        """No node, relationship, document record, type, index, constraint or trigger (our
        lease and claim aside). An inventory that cannot see everything is not empty."""
        found = self.foreign_content()
        return found.complete and found.is_empty()

    @property
    def wipe_note(self) -> str | None:
        """Why the last wipe went ahead over changes it could not attribute, if it did."""
        return self._wipe_note

    def claim(self) -> None:
        """Mark the instance as the pipeline's own; refuse one that holds someone's data."""
        if self.claim_record() is not None:
            return
        self._refuse_unclaimed("claim")
        self._write_claim()

    def _refuse_unclaimed(self, action: str) -> None:
        if self.disposable:
            return
        found = self.foreign_content()
        if not found.is_empty():
            raise ForeignDataError(
                f"refusing to {action} {self.where}: it holds {found.describe()} and no "
                "eval_pipeline claim: someone else's data; point --graph-uri at a dedicated "
                "instance, or mark this one disposable if it may be erased"
            )
        if not found.complete:
            raise ForeignDataError(
                f"refusing to {action} {self.where}: it has no eval_pipeline claim and its "
                "emptiness cannot be checked (ArcadeDB shows document records, types and "
                "indexes only over its HTTP API: set --graph-http-url), or mark it disposable "
                "if it may be erased"
            )

    def _write_claim(self) -> None:
        now = _now()
        params = {"claimed_at": now, "checkpoint": self._inventory_json(), "checkpoint_at": now}
        self._bookkeeping(schema.WRITE_CLAIM, params)
        self._forget_writer()

    def _inventory_json(self) -> str:
        return self.inventory().model_dump_json()

    def _bookkeeping(self, query: str, params: Mapping[str, Any]) -> list[dict]:
        """A write to the claim node (ours, never a write phase), retried on a conflict with
        another writer of ours touching it at the same moment."""
        for attempt in range(_BOOKKEEPING_RETRIES):
            try:
                return self._autocommit(query, params)
            except GraphQueryError:
                if attempt + 1 == _BOOKKEEPING_RETRIES:
                    raise
                time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    def _note_write(self, query: str) -> None:
        """Before a write of ours: open this store's write phase if none is open, listing it
        in the claim first (so that a phase cut short is known to have been ours)."""
        if self._writer is not None or self._quiet or query in _LEASE_STATEMENTS:
            return
        with self._phase_lock:
            if self._writer is not None:
                return
            record = self.claim_record()
            if record is None:
                return  # nothing to record in; claiming takes what is there as the start
            writer = f"{socket.gethostname()} pid {os.getpid()} {secrets.token_hex(4)} {_now()}"
            params: dict[str, Any] = {"writer": writer, "foreign": None, "foreign_since": None}
            if not record.get("writers") and not record.get("foreign"):
                # No phase of ours is open, so whatever grew since the checkpoint is someone
                # else's: keep it for the next wipe rather than let our checkpoint absorb it.
                added = self._added_since(record)
                if added is not None and not added.is_empty():
                    params["foreign"] = added.model_dump_json()
                    params["foreign_since"] = record.get("checkpoint_at")
            self._bookkeeping(schema.OPEN_WRITER, params)
            with _OPEN_LOCK:
                _OPEN_HERE.add(writer)
            self._writer = writer

    def _forget_writer(self) -> None:
        with _OPEN_LOCK:
            _OPEN_HERE.discard(self._writer or "")
        self._writer = None

    def checkpoint(self) -> None:
        """End this store's write phase: what the instance holds now is ours."""
        writer = self._writer
        if writer is None:
            return
        params = {"checkpoint": self._inventory_json(), "checkpoint_at": _now(), "writer": writer}
        self._bookkeeping(schema.RECORD_CHECKPOINT, params)
        self._forget_writer()

    def _added_since(self, record: Mapping[str, Any]) -> Inventory | None:
        raw = record.get("checkpoint")
        if not raw:
            return None  # a claim from before checkpoints: nothing to compare with
        return self.inventory().added_since(Inventory.model_validate_json(raw))

    def _refuse_foreign_writes(self, record: Mapping[str, Any]) -> None:
        kept = record.get("foreign")
        if kept:
            found, since = Inventory.model_validate_json(kept), record.get("foreign_since")
        else:
            added = self._added_since(record)
            if added is None or added.is_empty():
                return
            writers = list(record.get("writers") or [])
            if writers or self._writer is not None:
                # A write phase of ours is open (this one, one in this process, or one that
                # never reached its checkpoint): what grew cannot be told apart from ours.
                with _OPEN_LOCK:
                    elsewhere = [w for w in writers if w not in _OPEN_HERE]
                if elsewhere:  # not ours to vouch for from here: say so
                    self._wipe_note = (
                        f"{added.describe()} added since {record.get('checkpoint_at')} taken "
                        f"for ours: a write phase of ours never recorded its end "
                        f"({'; '.join(elsewhere)})"
                    )
                    log.warning("wiping %s: %s", self.where, self._wipe_note)
                return
            found, since = added, record.get("checkpoint_at")
        verb = "was" if found.items() == 1 else "were"
        raise ForeignDataError(
            f"refusing to wipe {self.where}: {found.describe()} {verb} written here by someone "
            f"else since {since} (the end of the pipeline's last write); point --graph-uri at "
            "a dedicated instance, or mark this one disposable if it may be erased"
        )

    def wipe(self) -> None:
        """Remove every node, relationship, type, index, constraint and trigger (ours or a
        reconciler's), then reset the claim. Refused on an unclaimed instance that is not
        empty, and on a claimed one someone else wrote to since our last checkpoint, unless
        `disposable`."""
        self._wipe_note = None
        record = self.claim_record()
        if record is None:
            self._refuse_unclaimed("wipe")
        elif not self.disposable:
            self._refuse_foreign_writes(record)
        self._quiet += 1
        try:
            self.dialect.wipe(self)
        finally:
            self._quiet -= 1
        self._forget_writer()  # what this store wrote is gone: its phase ends here
        if record is None:
            self._write_claim()
            return
        with _OPEN_LOCK:  # other phases of ours under way in this process stay listed
            still_open = [w for w in record.get("writers") or [] if w in _OPEN_HERE]
        now = _now()
        params = {"checkpoint": self._inventory_json(), "checkpoint_at": now}
        rows = self._bookkeeping(schema.RESET_CLAIM, {**params, "writers": still_open})
        if not rows or not rows[0]["claims"]:
            self._write_claim()

    # --- introspection ------------------------------------------------------------------

    def counts(self) -> dict[str, Any]:
        """{"nodes", "relationships", "labels": {label: n}, "relationship_types": {type: n}}."""
        return self.dialect.counts(self)

    def server_version(self) -> str:
        return self.dialect.server_version(self)

    def fulltext_search(self, query: str, *, limit: int = 10, timeout_s: float = 30) -> list[dict]:
        """Best-matching turns: rows of `turn_id` and `score`. `query` is in the engine's term
        syntax, already escaped (`retrieve.terms.or_query`): plain words need nothing."""
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
