"""`GraphStore`: the client every graph-touching stage uses. Plain Python, no Dagster.

Official `neo4j` driver over Bolt; the dialect (`dialects/`) holds what differs between
ArcadeDB and Memgraph. With no `uri`, it starts (or reuses) the embedded ArcadeDB under
`state_dir()/graph/arcadedb` (see `server.py`). A store is its configuration (`StoreConfig`,
whose fields are its constructor's keywords) composed with small parts, one module each:

- `connection.py`: the driver, the endpoint (embedded or external) and the dialect;
- `queries.py`: auto-commit, write, write-transaction and capped, timed read statements;
- `batched_writes.py`: rows sent as batches that fit one Bolt message;
- `ownership.py`: the claim, write phases, checkpoints and the wipe's refusals;
- `batch_instances.py`: the instance of each question batch of a partitioned run.

Every write goes through here so that the ownership hears of it before it is sent. `close()`
records the end of the store's write phase and disconnects: the Dagster layer calls it at the
end of every step that used the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import PrivateAttr

from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.graph import server
from eval_pipeline.graph.arcadedb_http import ArcadeHttp
from eval_pipeline.graph.batch_instances import BatchInstances
from eval_pipeline.graph.batched_writes import MAX_ROW_BYTES, BatchStats, write_batches
from eval_pipeline.graph.config import BATCH_PLACEHOLDER, StoreConfig
from eval_pipeline.graph.connection import Connection
from eval_pipeline.graph.dialects import Dialect
from eval_pipeline.graph.dialects.base import Inventory
from eval_pipeline.graph.errors import GraphError
from eval_pipeline.graph.ownership import Ownership
from eval_pipeline.graph.queries import QueryRunner

__all__ = ["BATCH_PLACEHOLDER", "MAX_ROW_BYTES", "BatchStats", "StoreConfig", "GraphStore"]

log = logging.getLogger(__name__)


class GraphStore(StoreConfig):
    """Bolt access to the evaluation graph (embedded ArcadeDB by default, or Memgraph)."""

    _connection: Connection = PrivateAttr()
    _queries: QueryRunner = PrivateAttr()
    _ownership: Ownership = PrivateAttr()
    _batches: BatchInstances[GraphStore] = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._connection = Connection(self, connect_on_demand=self.ensure_running)
        self._ownership = Ownership(self, bookkeeping=self._unannounced)
        self._queries = QueryRunner(self._connection, note_write=self._ownership.note_write)
        self._batches = BatchInstances(self, make=GraphStore.from_config)

    @classmethod
    def from_config(cls, config: StoreConfig) -> GraphStore:
        return cls(**config.config_values())

    def _unannounced(self, query: str, params: Mapping[str, Any]) -> list[dict]:
        return self._queries.autocommit_unannounced(query, params)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def dialect(self) -> Dialect:
        """This store's dialect; what it learned of the server (`on_connect`) is kept until
        the store connects to another server."""
        return self._connection.dialect

    @property
    def where(self) -> str:
        return self._connection.where

    def for_batch(self, batch: BatchKey) -> GraphStore:
        """The graph instance of question batch `batch` (`StoreConfig.batch_config`): this
        store for a run of one batch, else a store of its own, closed with this one."""
        store = self._batches.get(batch)
        return self if store is None else store

    def ensure_running(self) -> str:
        """Start or reuse the embedded server (or check the external one); return its URI."""
        uri = self._connection.connect()
        self.dialect.on_connect(self)
        return uri

    def close(self) -> None:
        """Record the end of this store's write phase (if one is open), then disconnect."""
        if self._ownership.writer is not None and self._connection.connected:
            try:
                self._ownership.checkpoint()
            except GraphError as exc:  # the next wipe will not attribute what changed since
                log.warning("no checkpoint recorded on %s: %s", self.where, exc)
        self._batches.close()
        self._connection.close()
        self._queries.close()

    def http(self) -> ArcadeHttp | None:
        """ArcadeDB's HTTP API for this server, or None when no URL is known; its SQL writes
        are announced like any other write of ours."""
        return self._connection.http(on_command=self._ownership.heard_sql)

    def driver_agent(self) -> str:
        return self._connection.driver().get_server_info().agent

    # --- queries (queries.py) -----------------------------------------------------------

    def autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one statement in its own auto-commit transaction (DDL, SHOW ...)."""
        return self._queries.autocommit(query, params)

    def write(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]:
        """Run one write statement (auto-commit) and return its rows."""
        return self._queries.write(query, params)

    def write_transaction(
        self, statements: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> list[list[dict]]:
        """Run `statements` in one explicit write transaction: all or nothing
        (`QueryRunner.write_transaction`)."""
        return self._queries.write_transaction(statements)

    def read(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = 30,
        max_rows: int = 10_000,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[dict]:
        """A read transaction of at most `max_rows` rows within `timeout_s`, else
        GraphRowLimitError or GraphTimeoutError (`QueryRunner.read`); `metadata` is the
        transaction's (what `Dialect.mark_read` asks for)."""
        return self._queries.read(
            query, params, timeout_s=timeout_s, max_rows=max_rows, metadata=metadata
        )

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
        """Send `rows` as `$rows` of `query`, one auto-commit statement per batch
        (`batched_writes.write_batches`)."""
        return write_batches(
            self._queries.send,
            query,
            rows,
            batch_rows=batch_rows,
            batch_bytes=batch_bytes,
            row_cost=row_cost,
            param=param,
        )

    def encode_value(self, value: Any) -> Any:
        """A property value in a form this backend stores (ArcadeDB: maps as JSON text)."""
        return self.dialect.encode_value(value)

    # --- claim and wipe (ownership.py) --------------------------------------------------

    def claim_record(self) -> dict | None:
        return self._ownership.claim_record()

    def node_count(self) -> int:
        return int(self.read("MATCH (n) RETURN count(n) AS n", timeout_s=600)[0]["n"])

    def inventory(self) -> Inventory:
        return self._ownership.inventory()

    def foreign_content(self) -> Inventory:
        return self._ownership.foreign_content()

    def is_empty(self) -> bool:
        return self._ownership.is_empty()

    @property
    def wipe_note(self) -> str | None:
        """Why the last wipe went ahead over changes it could not attribute, if it did."""
        return self._ownership.wipe_note

    def claim(self, *, check_changes: bool = False) -> None:
        """Mark the instance as the pipeline's own; refuse one that holds someone's data (and,
        with `check_changes`, one someone else changed since our last write: `Ownership`)."""
        self._ownership.claim(check_changes=check_changes)

    def checkpoint(self) -> None:
        """End this store's write phase: what the instance holds now is ours."""
        self._ownership.checkpoint()

    def wipe(self) -> None:
        """Remove everything (ours or a reconciler's) and reset the claim; refused on
        someone else's data unless `disposable` (`Ownership.wipe`)."""
        self._ownership.wipe()

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
