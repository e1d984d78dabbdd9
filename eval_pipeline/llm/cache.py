"""On-disk response cache: content-addressed, SQLite in WAL mode, shared by concurrent processes.

The key is a SHA-256 over everything that decides an answer (provider, model, parameters,
messages, response schema, prompt version) and nothing that does not (timeouts, retries,
concurrency, the API key). Only validated answers are stored; failures are never cached, so a
re-run retries them, and a re-run of successes makes no provider call and returns the same text.

A repeated configuration adds its sample identity to the key (see `LLMSettings.sample_identity`),
so repeat k never replays repeat j. Each row also records its `origin` (the token of the layer
that wrote it), so a hit on another origin's entry can be counted as a *replay*; rows written
before that column existed have origin NULL (unknown: any hit on them is a replay). Files of
the old layout are migrated in place when opened (the column is added; no entry is lost).

An unreadable file (not SQLite, corrupt, locked past the busy timeout, unwritable) raises
`LLMCacheError`, never a raw `sqlite3` error: callers treat it as an infrastructure failure.
"""

from __future__ import annotations

import contextlib
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

from eval_pipeline.llm.errors import LLMCacheError

# Part of every key: changing it invalidates every cache file. Adding a key part only when it is
# set (as the sample identity is) keeps existing keys, hence existing files, valid.
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
    # Where the entry came from: filled from the row's origin column on `get`, never stored in
    # the body (so older code, which forbids unknown fields, still reads newer rows).
    origin: str | None = None


def cache_failure(path: Path, exc: sqlite3.DatabaseError) -> LLMCacheError:
    """The LLMCacheError for a sqlite3 failure on `path`, saying what to do about it."""
    detail = str(exc) or type(exc).__name__
    if not isinstance(exc, sqlite3.OperationalError) or "malformed" in detail:
        # "file is not a database", "database disk image is malformed": the bytes are bad.
        message = (
            f"LLM cache {path} is unreadable ({detail}): it is not a valid SQLite cache file. "
            "Delete or move it, then re-run (its answers will be asked of the provider again)"
        )
    else:
        message = (
            f"LLM cache {path} cannot be used ({detail}). If another process holds it, wait or "
            "point this run at another cache file; if the file is damaged, delete or move it"
        )
    return LLMCacheError(message, path=str(path))


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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LLMCacheError(
                f"LLM cache {self.path} cannot be created: {exc.strerror or exc}",
                path=str(self.path),
            ) from None
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                _prepare(conn, self._busy_timeout_ms)
            except sqlite3.OperationalError as exc:
                conn.close()
                # Processes opening a new file at once race to switch it to WAL, and that
                # switch can answer "locked" without waiting: wait and try again.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                continue
            except BaseException:
                conn.close()
                raise
            for suffix in ("", "-wal", "-shm"):  # private: the cache holds model answers
                with contextlib.suppress(OSError):
                    os.chmod(f"{self.path}{suffix}", 0o600)
            self._conn, self._pid = conn, os.getpid()
            return conn

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """Run one statement on this process's connection; sqlite3 failures → LLMCacheError."""
        try:
            return self._connection().execute(sql, params)
        except sqlite3.DatabaseError as exc:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn, self._pid = None, None  # the next call reopens (and re-checks) the file
            raise cache_failure(self.path, exc) from None

    def get(self, key: str) -> CachedResponse | None:
        """The entry for `key` with its `origin` (None: written before origins were kept)."""
        with self._lock:
            row = self._execute(
                "SELECT body, origin FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        try:
            response = CachedResponse.model_validate_json(row[0])
        except ValueError:
            return None  # an unreadable entry is a miss, and will be overwritten
        return response.model_copy(update={"origin": row[1]})

    def put(
        self, key: str, provider: str, response: CachedResponse, *, origin: str | None = None
    ) -> None:
        body = response.model_dump_json(exclude={"origin"})
        origin = origin if origin is not None else response.origin
        with self._lock:
            # INSERT OR REPLACE: racing processes may both miss and both store; either answer
            # is a valid one for the key, and later readers all see the same row.
            self._execute(
                "INSERT OR REPLACE INTO responses (key, provider, model, body, created_at, origin)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, provider, response.model, body, time.time(), origin),
            )

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn, self._pid = None, None


def _prepare(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL is crash-safe in WAL mode; a lost last write only costs a cache miss.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS responses ("
        " key TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT, body TEXT NOT NULL,"
        " created_at REAL NOT NULL, origin TEXT)"
    )
    _migrate(conn)


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a file of an older layout up to date in place, keeping every entry."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
    if "origin" not in columns:
        try:
            conn.execute("ALTER TABLE responses ADD COLUMN origin TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):  # another process migrated it just now
                raise
