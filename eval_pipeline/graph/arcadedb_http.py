"""ArcadeDB's HTTP API, for the few things Bolt cannot do.

Bolt refuses `CREATE DATABASE` and has no SQL, yet full-text indexes and a fast wipe
(`DROP TYPE ... UNSAFE`) need SQL. Standard library only: three endpoints do not justify an
HTTP client dependency.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from eval_pipeline.graph.errors import GraphQueryError, GraphUnavailableError


class ArcadeHttp:
    """`on_command`, when given, hears every SQL command before it is sent (the store notes
    its own writes there: a DDL statement is a write the instance's checkpoint must know)."""

    def __init__(
        self,
        url: str,
        user: str,
        password: str,
        *,
        timeout_s: float = 600.0,
        on_command: Callable[[str], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.on_command = on_command
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {token}", "Content-Type": "application/json"}
        # Index builds over a full corpus take minutes: the default is generous on purpose.
        self.timeout_s = timeout_s

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise GraphQueryError(
                f"ArcadeDB HTTP {path}: {exc.code} {_error_detail(exc)}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GraphUnavailableError(
                f"ArcadeDB HTTP API at {self.url} does not answer ({reason})"
            ) from None

    def sql(self, database: str, command: str) -> list[dict[str, Any]]:
        if self.on_command is not None:
            self.on_command(command)
        out = self._call(f"/api/v1/command/{database}", {"language": "sql", "command": command})
        return out.get("result", [])

    def server_command(self, command: str) -> dict[str, Any]:
        """A server command (`POST /api/v1/server`: `list queries`, `terminate query <id>`,
        `create database <name>`); the server's JSON answer."""
        return self._call("/api/v1/server", {"command": command})

    def server_settings(self) -> list[dict[str, Any]]:
        """The server's settings (`GET /api/v1/server`): rows of key and value."""
        return list(self._call("/api/v1/server").get("settings") or [])

    def databases(self) -> list[str]:
        return list(self._call("/api/v1/databases").get("result", []))

    def create_database(self, database: str) -> None:
        self.server_command(f"create database {database}")

    def version(self) -> str:
        return str(self._call("/api/v1/server?mode=basic").get("version", "unknown"))


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return exc.reason or ""
    detail = body.get("detail") or body.get("error") or ""
    return " ".join(str(detail).split())[:300]
