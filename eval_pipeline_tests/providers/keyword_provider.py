"""A small provider that owns its storage, for the suite: one JSON file per namespace in its
storage directory, every user turn kept as a memory naming its turn, search by shared words.

Options bend it the ways a real system can go wrong, so the pipeline's handling is tried on a
real store: `invent` adds a memory nothing in the session says (unsupported), `unsourced`
adds one with no session, `session_level` hands back session ids only (no turn), and
`write_on_search` changes the store while retrieval reads it.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from eval_pipeline.providers import (
    MemoryProvider,
    ProviderEnv,
    ProviderHit,
    ProviderSession,
    StoredMemory,
)

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the a an i my me you to of and in on is was what did do for how".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class KeywordProvider(MemoryProvider):
    name = "keyword"
    version = "1"
    concurrency = 2

    def __init__(
        self,
        env: ProviderEnv,
        *,
        invent: bool = False,
        unsourced: bool = False,
        session_level: bool = False,
        write_on_search: bool = False,
    ) -> None:
        super().__init__(
            env,
            invent=invent,
            unsourced=unsourced,
            session_level=session_level,
            write_on_search=write_on_search,
        )
        env.storage_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.ingested: list[tuple[str, str]] = []  # (namespace, session id) this process

    def _path(self, namespace: str):
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", namespace)
        return self.env.storage_dir / f"{safe}.json"

    def _load(self, namespace: str) -> list[dict[str, Any]]:
        path = self._path(namespace)
        return json.loads(path.read_text("utf-8")) if path.exists() else []

    def _save(self, namespace: str, rows: list[dict[str, Any]]) -> None:
        path = self._path(namespace)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows), "utf-8")
        tmp.replace(path)

    def ingest(self, namespace: str, session: ProviderSession) -> list[StoredMemory]:
        new = [
            {"id": t.turn_id, "text": t.content, "session": session.session_id, "turn": t.turn_id}
            for t in session.turns
            if t.role == "user" and t.content.strip()
        ]
        if self.options["invent"]:
            new.append(
                {
                    "id": f"{session.session_id}#invented",
                    "text": "owns a golden coat with a blue tail",
                    "session": session.session_id,
                    "turn": None,
                }
            )
        if self.options["unsourced"]:
            new.append(
                {
                    "id": f"{session.session_id}#nowhere",
                    "text": "likes tea",
                    "session": None,
                    "turn": None,
                }
            )
        with self._lock:
            self._save(namespace, self._load(namespace) + new)
            self.ingested.append((namespace, session.session_id))
        return [self._memory(r) for r in new]

    def _memory(self, row: dict[str, Any]) -> StoredMemory:
        return StoredMemory(
            memory_id=row["id"],
            text=row["text"],
            session_id=row["session"],
            turn_ids=[row["turn"]] if row["turn"] else [],
        )

    def search(
        self, namespace: str, query: str, *, top_k: int, question_date: str | None = None
    ) -> list[ProviderHit]:
        wanted = _words(query)
        rows = self._load(namespace)
        scored = sorted(
            ((len(wanted & _words(r["text"])), i, r) for i, r in enumerate(rows)),
            key=lambda x: (-x[0], x[1]),
        )
        if self.options["write_on_search"]:
            with self._lock:
                self._save(
                    namespace, rows + [{"id": "x", "text": query, "session": None, "turn": None}]
                )
        return [
            ProviderHit(
                text=r["text"],
                memory_id=r["id"],
                score=float(score),
                session_ids=[r["session"]] if r["session"] else [],
                turn_ids=[] if self.options["session_level"] or not r["turn"] else [r["turn"]],
            )
            for score, _, r in scored[:top_k]
            if score > 0
        ]

    def reset(self, namespace: str) -> None:
        with self._lock:
            self._path(namespace).unlink(missing_ok=True)

    def memories(self, namespace: str) -> list[StoredMemory]:
        return [self._memory(r) for r in self._load(namespace)]
