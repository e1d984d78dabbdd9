"""What a reconciler gets and gives: one session in (`SessionInput`), a `SessionMemory` out.

The memory is plain data: the reconciler never touches the graph. One writer
(`eval_pipeline.reconcile.writer`) turns it into graph writes, so every reconciler — built-in
or plug-in — produces the same documented schema (`eval_pipeline.reconcile.schema`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EntityType = Literal["person", "place", "organisation", "product", "quantity", "date", "other"]
ENTITY_TYPES: tuple[str, ...] = EntityType.__args__  # type: ignore[attr-defined]

FactType = Literal["preference", "event", "attribute", "plan", "relationship", "other"]
FACT_TYPES: tuple[str, ...] = FactType.__args__  # type: ignore[attr-defined]

_SPACES = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


@functools.lru_cache(maxsize=1 << 16)  # a pure function called for every name, many times
def normalise_name(name: str) -> str:
    """Case-, width- and spacing-insensitive form of a name ("New  York" → "new york").

    NFKC folds compatibility forms (full-width letters, ligatures) but keeps accents: "Zoë"
    and "Zoe" stay two names, as a person would read them.
    """
    text = unicodedata.normalize("NFKC", name).casefold()
    text = text.replace("’", "'")
    text = _SPACES.sub(" ", text).strip()
    return _EDGE_PUNCT.sub("", text)


def entity_key(entity_type: str, name: str) -> str:
    """The cross-session identity of an entity: its type and normalised name."""
    return f"{entity_type}:{normalise_name(name)}"


# ---- one session in --------------------------------------------------------------------


class SessionTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    turn_id: str
    role: str
    text: str
    index: int = Field(ge=0)
    timestamp: str | None = None


class SessionInput(BaseModel):
    """A session as the graph holds it: no evidence flags (the graph has none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str
    date: str | None = None  # upstream form, "2023/05/30 (Tue) 23:40"
    started_at: str | None = None  # ISO 8601, naive
    turns: tuple[SessionTurn, ...]

    @property
    def turn_ids(self) -> list[str]:
        return [t.turn_id for t in self.turns]


# ---- a SessionMemory out ---------------------------------------------------------------


class MemoryChunk(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_id: str
    index: int = Field(ge=0)
    text: str
    turn_ids: tuple[str, ...] = Field(min_length=1)
    entity_keys: tuple[str, ...] = ()  # the chunk → entity mentions


class MemoryEntity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    name: str = Field(min_length=1)
    type: EntityType


class MemoryFact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fact_id: str
    text: str = Field(min_length=1)
    fact_type: FactType
    valid_at: str | None  # the session's start: when the fact was stated to hold
    turn_ids: tuple[str, ...] = Field(min_length=1)
    entity_keys: tuple[str, ...] = ()


class MemoryEpisode(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: str
    summary: str
    turn_ids: tuple[str, ...]


class SessionMemory(BaseModel):
    """Everything one reconciler distilled from one session.

    Internally consistent by construction: every entity key a chunk or fact names is among
    `entities`, ids are unique. Whether the turn ids belong to the session is checked against
    the session itself (`check_against`), since the model does not hold the session.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str
    reconciler: str
    chunks: tuple[MemoryChunk, ...] = ()
    entities: tuple[MemoryEntity, ...] = ()
    facts: tuple[MemoryFact, ...] = ()
    episode: MemoryEpisode | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SessionMemory:
        keys = [e.key for e in self.entities]
        if len(set(keys)) != len(keys):
            raise ValueError("entity keys must be unique within a session memory")
        known = set(keys)
        for item in (*self.chunks, *self.facts):
            missing = set(item.entity_keys) - known
            if missing:
                raise ValueError(f"unknown entity keys {sorted(missing)} referenced")
        ids = [c.chunk_id for c in self.chunks] + [f.fact_id for f in self.facts]
        if len(set(ids)) != len(ids):
            raise ValueError("chunk and fact ids must be unique")
        return self

    def turn_ids_used(self) -> set[str]:
        used = {t for item in (*self.chunks, *self.facts) for t in item.turn_ids}
        if self.episode is not None:
            used.update(self.episode.turn_ids)
        return used

    def check_against(self, session: SessionInput) -> None:
        """Raise ValueError if this memory is for another session or cites foreign turns."""
        if self.session_id != session.session_id:
            raise ValueError(
                f"memory is for session {self.session_id!r}, not {session.session_id!r}"
            )
        foreign = self.turn_ids_used() - set(session.turn_ids)
        if foreign:
            raise ValueError(
                f"memory cites turns that are not in the session: {sorted(foreign)[:5]}"
            )

    def node_counts(self) -> dict[str, int]:
        return {
            "Chunk": len(self.chunks),
            "Entity": len(self.entities),
            "Fact": len(self.facts),
            "Episode": int(self.episode is not None),
        }
