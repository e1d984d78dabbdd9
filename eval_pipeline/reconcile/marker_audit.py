"""What the memory writer is handed, audited for evidence markers (protocol check
`protocol_writer_sees_no_marker`, `score.protocol`).

The graph holds no marker (the injection check), but a memory system never reads the graph
itself: it is handed session objects (`SessionInput` to reconcilers and memory systems,
`ProviderSession` to providers). `SessionAudit.see` walks each one as it is handed over —
model fields and extras, mappings, sequences, dataclasses — and records every key that names
answer evidence (`graph.schema.is_evidence_name`: has_answer, holds_evidence, answer session
ids, in any spelling). `marker_paths` does the same for the memory a provider formed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from eval_pipeline.graph.schema import is_evidence_name

MAX_FOUND = 50  # markers kept for the report (all are counted)


def _items(obj: Any) -> Iterable[tuple[str, Any]] | None:
    if isinstance(obj, BaseModel):
        fields = {name: getattr(obj, name) for name in type(obj).model_fields}
        return {**fields, **(obj.model_extra or {})}.items()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, Mapping):
        return ((str(k), v) for k, v in obj.items())
    return None


def marker_paths(obj: Any, path: str = "") -> list[str]:
    """Every key within `obj` that names answer evidence, as a dotted path."""
    found: list[str] = []
    items = _items(obj)
    if items is not None:
        for key, value in items:
            here = f"{path}.{key}" if path else key
            if is_evidence_name(key):
                found.append(here)
            found.extend(marker_paths(value, here))
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            found.extend(marker_paths(value, f"{path}[{i}]"))
    return found


class SessionAudit:
    """Counts the sessions handed to the memory writer and the markers they carried.
    Thread-safe: reconcilers and providers are handed sessions from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions = 0
        self.markers = 0
        self.found: list[str] = []

    def see(self, session: Any) -> None:
        paths = marker_paths(session)
        sid = getattr(session, "session_id", "?")
        with self._lock:
            self.sessions += 1
            self.markers += len(paths)
            room = MAX_FOUND - len(self.found)
            self.found.extend(f"{sid}: {p}" for p in paths[: max(room, 0)])
