"""On-disk response cache: content-addressed, SQLite in WAL mode, shared by concurrent processes.

The key is a SHA-256 over everything that decides an answer (provider, model, parameters,
messages, response schema, prompt version) and nothing that does not (timeouts, retries,
concurrency, the API key). Only validated answers are stored; failures are never cached, so a
re-run retries them, and a re-run of successes makes no provider call and returns the same text.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

CACHE_SCHEMA_VERSION = 1


def cache_key(parts: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {"cache_schema": CACHE_SCHEMA_VERSION, **parts},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CachedResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None


class ResponseCache:
    """A key → CachedResponse store in one SQLite file.

    One connection per process (re-opened after a fork), guarded by a lock because the sync API
    may call in from worker threads. WAL lets readers in other processes proceed during a write;
    busy_timeout makes concurrent writers wait instead of failing.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    def __repr__(self) -> str:
        return f"ResponseCache(path={str(self.path)!r})"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL is crash-safe in WAL mode; a lost last write only costs a cache miss.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS responses ("
            " key TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT, body TEXT NOT NULL,"
            " created_at REAL NOT NULL)"
        )
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get(self, key: str) -> CachedResponse | None:
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT body FROM responses WHERE key = ?", (key,))
                .fetchone()
            )
        if row is None:
            return None
        try:
            return CachedResponse.model_validate_json(row[0])
        except ValueError:
            return None  # an unreadable entry is a miss, and will be overwritten

    def put(self, key: str, provider: str, response: CachedResponse) -> None:
        body = response.model_dump_json()
        with self._lock:
            # INSERT OR REPLACE: racing processes may both miss and both store; either answer
            # is a valid one for the key, and later readers all see the same row.
            self._connection().execute(
                "INSERT OR REPLACE INTO responses (key, provider, model, body, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, provider, response.model, body, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn, self._pid = None, None
