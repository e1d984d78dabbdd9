"""An example memory system outside the package: "notes", one per topic, latest wins.

Load it by import path with this directory on the Python path:

    PYTHONPATH=examples/notes_memory eval-pipeline run --reconciler notes_memory:NotesMemory

Its ingest schema differs from the built-ins': it writes only facts ("notes") and entities,
no chunks or episodes, and declares only notes searchable, so retrieval searches turns and
notes. Its consolidation is its own: every first-person sentence of a user turn that names a
topic ("my <noun>") is a note on that topic; a later note on the same topic supersedes the
earlier one, whatever the rules of the built-in `consolidating` reconciler would say. Topic
words are its entities, deduplicated per namespace with their plural as an alias.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eval_pipeline.memory_system import (
    AddFact,
    ChangeSet,
    IngestSchema,
    MemorySystem,
    NamespaceEntity,
    NamespaceFact,
    NamespaceView,
    SessionInput,
    SupersedeFact,
    UpsertEntity,
    scoped_fact_id,
)

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_TOPIC = re.compile(r"\bmy\s+(?P<topic>[a-z]+)", re.IGNORECASE)
_SKIP = frozenset({"own", "way", "first", "new", "best", "favorite", "favourite", "current"})


@dataclass(frozen=True)
class Note:
    topic: str
    text: str
    turn_id: str


class NotesMemory(MemorySystem):
    name = "notes-memory"
    version = "1"
    schema = IngestSchema(
        name="notes-memory",
        version="1",
        namespaced=True,
        labels=("Entity", "Fact", "MemoryNamespace"),
        relationship_types=("HAS_FACT", "FROM_TURN", "ABOUT", "SUPERSEDED_BY"),
        searchable=("fact",),
        provenance=(("Fact", "fact_id", "FROM_TURN"),),
    )

    def __init__(self, max_note_chars: int = 300, **config: Any) -> None:
        super().__init__(max_note_chars=max_note_chars, **config)
        self.max_note_chars = int(max_note_chars)

    def extract_session(self, session: SessionInput) -> tuple[str, str | None, list[Note]]:
        notes: list[Note] = []
        for turn in session.turns:
            if turn.role != "user":
                continue
            for match in _SENTENCE.finditer(turn.text):
                sentence = match.group().strip()
                topic = next(
                    (
                        m.group("topic").lower()
                        for m in _TOPIC.finditer(sentence)
                        if m.group("topic").lower() not in _SKIP
                    ),
                    None,
                )
                if topic:
                    text = f"Note on {topic}: {sentence[: self.max_note_chars]}"
                    notes.append(Note(topic, text, turn.turn_id))
        return session.session_id, session.started_at, notes

    def consolidate(
        self, view: NamespaceView, extraction: tuple[str, str | None, list[Note]]
    ) -> ChangeSet:
        session_id, valid_at, notes = extraction
        latest = {f.attribute: f for f in view.current_facts()}
        known = {a: e.key for e in view.entities.values() for a in (e.key, *e.aliases)}
        changes: list[Any] = []
        for n, note in enumerate(notes):
            key = _topic_key(note.topic)
            if key not in known:
                alias = f"other:{note.topic}" if f"other:{note.topic}" != key else None
                entity = NamespaceEntity(
                    key=key,
                    name=key.partition(":")[2],
                    type="other",
                    aliases=(alias,) if alias else (),
                )
                changes.append(UpsertEntity(entity=entity))
                known[key] = key
                if alias:
                    known[alias] = key
            fact = NamespaceFact(
                fact_id=scoped_fact_id(view.namespace, session_id, n),
                session_id=session_id,
                text=note.text,
                fact_type="other",
                subject="user",
                attribute=key,
                value=note.text,
                valid_at=valid_at,
                turn_ids=(note.turn_id,),
                entity_keys=(known[key],),
            )
            changes.append(AddFact(fact=fact))
            if key in latest:
                changes.append(
                    SupersedeFact(fact_id=latest[key].fact_id, by=fact.fact_id, invalid_at=valid_at)
                )
            latest[key] = fact
        return ChangeSet(namespace=view.namespace, session_id=session_id, changes=tuple(changes))


def _topic_key(topic: str) -> str:
    """ "sisters" and "sister" are one topic: the singular is the entity, the plural its alias."""
    singular = topic[:-1] if topic.endswith("s") and len(topic) > 3 else topic
    return f"other:{singular}"
