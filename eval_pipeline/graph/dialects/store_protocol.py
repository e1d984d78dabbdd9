"""`DialectStore`: what a dialect needs from the store it is handed.

The dialects run their statements through the store, and the store picks its dialect: this
protocol is the dialects' side of that, so they depend on it and not on `graph.store`. The
store (`GraphStore`) provides it; so can a test's stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from eval_pipeline.graph.arcadedb_http import ArcadeHttp


class DialectStore(Protocol):
    @property
    def database(self) -> str:
        """The database name the store was configured with."""
        ...

    @property
    def where(self) -> str:
        """The server and database, for messages."""
        ...

    def autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]: ...

    def write(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict]: ...

    def read(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = ...,
        max_rows: int = ...,
    ) -> list[dict]: ...

    def http(self) -> ArcadeHttp | None:
        """ArcadeDB's HTTP API of the server, or None when no URL is known."""
        ...

    def driver_agent(self) -> str:
        """The server's agent string, as the Bolt handshake gave it."""
        ...
