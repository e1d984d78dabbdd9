"""The provider interface: a memory system that owns its storage (mem0, Graphiti/Zep, Letta,
a hosted memory API) plugged in as it is.

A `MemorySystem` writes its memory into the pipeline's graph in the pipeline's vocabulary; a
provider keeps its memory where it always does and exposes three operations, per namespace
(one memory owner: one LongMemEval question is one user's history, `user:<question_id>`):

- `ingest(namespace, session)`: one session, with its turns, in time order. Every turn the
  pipeline sends carries its ids (`ProviderTurn.turn_id`, `ProviderSession.session_id`); a
  provider keeps them as metadata where it can, so what it returns can be traced back.
- `search(namespace, query, top_k=..., question_date=...)`: ranked `ProviderHit`s, each with
  the session and (where the provider can say) turn ids it came from.
- `reset(namespace)`: forget everything of that namespace.

and, for the formation audit and the read-only check, `memories(namespace)` (every memory it
holds for the namespace) and `fingerprint(namespace)` (a digest of them by default).

The graph stays the source of sessions and of evidence: the pipeline reads each namespace's
sessions from the injected graph and feeds them (`providers.ingest`), records what came back,
and scores evidence recall through the ids a provider hands back — at session level when it
cannot name a turn; a memory with no source is counted as unsourced (`providers.audit`).

A provider is built as `cls(env, **options)`: `env` (`ProviderEnv`) holds its own storage
directory (under the run's state directory, one per configuration), the model spec of the
`reconcile.model` role and a logger. Its `name`, `version` and `pins()` are comparability
pins: two runs of different provider configurations are two memories, and a re-run with the
same pins resumes (sessions already ingested are not sent again).
"""

from __future__ import annotations

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ProviderError(RuntimeError):
    """The provider failed one operation (its own fault: a miss, recorded with the reason)."""


class ProviderUnavailable(ProviderError):
    """The provider's service or dependency cannot be reached (infrastructure: unscored)."""


class ProviderTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    turn_id: str  # "<session_id>#<index>"
    role: str
    content: str


class ProviderSession(BaseModel):
    """One session as a provider receives it: turns in order, ids attached, no evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str
    started_at: str | None = None  # ISO-ish timestamp from the corpus, when it has one
    turns: tuple[ProviderTurn, ...]

    def digest(self) -> str:
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class StoredMemory(BaseModel):
    """One memory a provider holds; `session_id` None when it cannot say where it came from."""

    model_config = ConfigDict(extra="forbid")

    memory_id: str
    text: str
    session_id: str | None = None
    turn_ids: list[str] = Field(default_factory=list)


class ProviderHit(BaseModel):
    """One search result."""

    model_config = ConfigDict(extra="forbid")

    text: str
    memory_id: str | None = None
    score: float | None = None
    session_ids: list[str] = Field(default_factory=list)
    turn_ids: list[str] = Field(default_factory=list)


@dataclass
class ProviderEnv:
    """What every provider is built with."""

    storage_dir: Path  # its own, under the run's state directory, one per configuration
    model: str = "offline"  # the `reconcile.model` role's spec (offline | local[:name] | P:M)
    timeout_s: float | None = None
    concurrency: int | None = None
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("eval_pipeline.provider"))


class MemoryProvider(ABC):
    """Base class of a provider (see the module docstring). Subclasses set `name` and
    `version` and implement `ingest`, `search`, `reset` and `memories`."""

    name: str = ""
    version: str = ""
    # Namespaces ingested at once; a provider calling a local CPU model wants 1.
    concurrency: int = 1
    # Whether `search` is read-only by contract (checked anyway, by fingerprint).
    provider = True

    def __init__(self, env: ProviderEnv, **options: Any) -> None:
        self.env = env
        self.options = dict(options)

    def pins(self) -> dict[str, Any]:
        """What makes two configurations the same memory (no secrets: they are recorded)."""
        return {"name": self.name, "version": self.version, "options": self.options}

    @abstractmethod
    def ingest(self, namespace: str, session: ProviderSession) -> list[StoredMemory] | None:
        """Store one session of `namespace`; the memories it formed, when it can say."""

    @abstractmethod
    def search(
        self, namespace: str, query: str, *, top_k: int, question_date: str | None = None
    ) -> list[ProviderHit]:
        """The `top_k` best memories of `namespace` for `query`; must not write."""

    @abstractmethod
    def reset(self, namespace: str) -> None:
        """Forget everything stored under `namespace`."""

    @abstractmethod
    def memories(self, namespace: str) -> list[StoredMemory]:
        """Every memory stored under `namespace`."""

    def fingerprint(self, namespace: str) -> dict[str, Any] | None:
        """Count and digest of the namespace's memories (None: the store cannot say)."""
        rows = sorted((m.memory_id, m.text) for m in self.memories(namespace))
        digest = hashlib.sha256(json.dumps(rows).encode("utf-8")).hexdigest()[:24]
        return {"count": len(rows), "digest": digest}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the provider holds (clients, child servers)."""


PROVIDER_METHODS = ("ingest", "search", "reset", "memories")


def pins_digest(pins: dict[str, Any]) -> str:
    text = json.dumps(pins, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def is_provider(obj: Any) -> bool:
    return isinstance(obj, MemoryProvider) or (
        isinstance(obj, type) and issubclass(obj, MemoryProvider)
    )
