"""`Connection`: the `neo4j` driver to one graph server, and that server's dialect.

With no `uri` the server is the embedded ArcadeDB under `state_dir()/graph/arcadedb`, started
(or reused) on connect (see `server.py`); its credentials come from its data directory. A
restarted embedded server (another pid) gets a fresh driver, another server a fresh dialect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import neo4j
from pydantic import BaseModel

from eval_pipeline.graph import server
from eval_pipeline.graph.arcadedb_http import ArcadeHttp
from eval_pipeline.graph.config import BATCH_PLACEHOLDER, StoreConfig
from eval_pipeline.graph.dialects import Dialect, get_dialect
from eval_pipeline.graph.errors import GraphError

CONNECTION_TIMEOUT_S = 10.0


class Endpoint(BaseModel):
    uri: str
    user: str | None
    password: str | None
    http_url: str | None
    pid: int | None = None  # embedded server: a restarted server gets a fresh driver


class Connection:
    """`connect_on_demand` is called when a statement needs a driver and none is open: the
    store's own connect, which also lets the dialect learn the server."""

    def __init__(self, config: StoreConfig, connect_on_demand: Callable[[], object]) -> None:
        self.config = config
        self._connect_on_demand = connect_on_demand
        self._driver: neo4j.Driver | None = None
        self._endpoint: Endpoint | None = None
        # One dialect per server: Memgraph's remembers the version and storage mode it read.
        self._dialect: Dialect | None = None
        self._lock = threading.Lock()

    @property
    def dialect(self) -> Dialect:
        """The server's dialect; what it learned of the server (`on_connect`) is kept until
        this connection moves to another server."""
        if self._dialect is None or self._dialect.name != self.config.backend.lower():
            self._dialect = get_dialect(self.config.backend)
        return self._dialect

    @property
    def connected(self) -> bool:
        return self._driver is not None

    @property
    def where(self) -> str:
        uri = self._endpoint.uri if self._endpoint else (self.config.uri or "embedded ArcadeDB")
        return f"{uri} (database {self.config.database})"

    def connect(self) -> str:
        """Start or reuse the embedded server (or check the external one), open a driver if
        the endpoint changed, and check that the server answers; return its URI."""
        endpoint = self._resolve_endpoint()
        with self._lock:
            if endpoint != self._endpoint or self._driver is None:
                self._close_driver()
                auth = (endpoint.user, endpoint.password) if endpoint.user else None
                self._driver = neo4j.GraphDatabase.driver(
                    endpoint.uri, auth=auth, connection_timeout=CONNECTION_TIMEOUT_S
                )
                if self._endpoint is None or endpoint.uri != self._endpoint.uri:
                    self._dialect = None  # another server: learn it afresh
                self._endpoint = endpoint
        try:
            with self.session() as session:
                session.run("RETURN 1 AS ok").consume()
        except Exception as exc:
            raise self.dialect.map_error(exc, self.where) from exc
        return endpoint.uri

    def _resolve_endpoint(self) -> Endpoint:
        config = self.config
        if BATCH_PLACEHOLDER in (config.uri or ""):
            raise GraphError(
                f"the graph URI {config.uri} names one instance per question batch: this use "
                "of it was given no batch"
            )
        if not config.embedded:
            assert config.uri is not None
            return Endpoint(
                uri=config.uri, user=config.user, password=config.password, http_url=config.http_url
            )
        if self.dialect.name != "arcadedb":
            raise GraphError(
                f"backend {config.backend} needs --graph-uri: only ArcadeDB is embedded"
            )
        info = server.ensure_running(config.data_dir, database=config.database, heap=config.heap)
        creds = server.credentials(server.resolve_data_dir(config.data_dir))
        return Endpoint(
            uri=info.bolt_uri,
            user=creds.user,
            password=creds.password,
            http_url=info.http_url,
            pid=info.pid,
        )

    def driver(self) -> neo4j.Driver:
        if self._driver is None:
            self._connect_on_demand()
        assert self._driver is not None
        return self._driver

    def session(self, access_mode: str = neo4j.WRITE_ACCESS) -> neo4j.Session:
        return self.driver().session(
            database=self.session_database(), default_access_mode=access_mode
        )

    def session_database(self) -> str | None:
        return self.dialect.session_database(self.config.database)

    def http(self, on_command: Callable[[str], None] | None = None) -> ArcadeHttp | None:
        """ArcadeDB's HTTP API for this server, or None when no URL is known."""
        self.driver()
        ep = self._endpoint
        if ep is None or not ep.http_url:
            return None
        return ArcadeHttp(ep.http_url, ep.user or "", ep.password or "", on_command=on_command)

    def close(self) -> None:
        with self._lock:
            self._close_driver()

    def _close_driver(self) -> None:
        if self._driver is not None:
            self._driver.close()
        self._driver = None
