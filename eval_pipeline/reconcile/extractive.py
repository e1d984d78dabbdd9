"""The `extractive` reconciler: offline, deterministic, the default.

Per session: chunks (whole turns, or sentence windows of long turns) linked to their turn;
entities by rules (`entity_rules`) linked to the chunks that mention them; one episode whose
summary is the session's top sentences (`summary`). No facts: stating a fact needs a model.
Same input, same output — no clock, no randomness, no set iteration order in the result.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.chunking import chunk_spans
from eval_pipeline.reconcile.entity_rules import FoundEntity, find_entities
from eval_pipeline.reconcile.memory_system import SESSION_SCHEMA
from eval_pipeline.reconcile.models import (
    MemoryChunk,
    MemoryEntity,
    MemoryEpisode,
    SessionInput,
    SessionMemory,
    entity_key,
    normalise_name,
)
from eval_pipeline.reconcile.protocol import BaseReconciler
from eval_pipeline.reconcile.sentences import sentence_spans
from eval_pipeline.reconcile.summary import Sentence, clip, summarise

_VALUE_TYPES = frozenset({"quantity", "date"})


class ExtractiveConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_chunk_chars: int = Field(default=800, ge=80, le=100_000)
    summary_sentences: int = Field(default=3, ge=0, le=50)


class ExtractiveReconciler(BaseReconciler):
    name = "extractive"
    version = "1"
    schema = SESSION_SCHEMA
    cpu_bound = True  # pure-Python rules: run in worker processes, one per core

    def __init__(self, **config: Any) -> None:
        self.config = ExtractiveConfig(**config)  # type: ignore[assignment]

    def reconcile(self, session: SessionInput) -> SessionMemory:
        config: ExtractiveConfig = self.config  # type: ignore[assignment]
        sid = session.session_id
        turn_entities = [find_entities(turn.text) for turn in session.turns]
        retype = _session_types(turn_entities)

        chunks: list[MemoryChunk] = []
        entities: dict[str, MemoryEntity] = {}
        sentences: list[Sentence] = []
        for turn, found in zip(session.turns, turn_entities, strict=True):
            typed = [
                (e, retype.get(_name_of(e), e.type) if e.type == "other" else e.type) for e in found
            ]
            # `found` is sorted by start: the entities starting in a span are a slice of it.
            starts = [e.start for e in found]
            spans = sentence_spans(turn.text)
            for span in chunk_spans(turn.text, config.max_chunk_chars, spans):
                keys: list[str] = []
                lo, hi = bisect_left(starts, span.start), bisect_left(starts, span.end)
                for e, etype in typed[lo:hi]:
                    key = entity_key(etype, e.name) if etype != e.type else e.key
                    if key not in entities:  # the first mention names it
                        entities[key] = MemoryEntity(key=key, name=e.name, type=etype)
                    if key not in keys:
                        keys.append(key)
                chunks.append(
                    MemoryChunk(
                        chunk_id=schema.chunk_id(sid, len(chunks)),
                        index=len(chunks),
                        text=turn.text[span.start : span.end],
                        turn_ids=(turn.turn_id,),
                        entity_keys=tuple(keys),
                    )
                )
            for a, b in spans:
                count = bisect_left(starts, b) - bisect_left(starts, a)
                sentences.append(
                    Sentence(len(sentences), turn.turn_id, turn.role, turn.text[a:b], count)
                )

        top = summarise(sentences, config.summary_sentences)
        episode = MemoryEpisode(
            episode_id=schema.episode_id(sid),
            summary=" ".join(clip(s.text) for s in top),
            turn_ids=tuple(session.turn_ids),
        )
        return SessionMemory(
            session_id=sid,
            reconciler=self.name,
            chunks=tuple(chunks),
            entities=tuple(entities.values()),
            episode=episode,
        )


def _name_of(entity: FoundEntity) -> str:
    return normalise_name(entity.name)


def _session_types(turn_entities: list[list[FoundEntity]]) -> dict[str, str]:
    """Within one session, a name typed anywhere (e.g. "my friend Ana") keeps that type where
    the context said nothing ("Ana called"): the first specific type seen wins."""
    types: dict[str, str] = {}
    for found in turn_entities:
        for e in found:
            if e.type not in _VALUE_TYPES and e.type != "other":
                types.setdefault(_name_of(e), e.type)
    return types
