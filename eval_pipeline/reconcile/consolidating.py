"""The `consolidating` reconciler: offline, rule-based, deterministic memory formation per
namespace (one user's history; tier 2's organisation).

Two parts, kept apart on purpose:

- **Extraction, per session** (`extract`): the extractive reconciler's chunks, entities and
  episode, plus rule-based statements (`fact_rules`). It depends on the session alone, so it
  is done once per session and cached by the session's content, however many haystacks share
  the session. `reconcile(session)` writes the session-level part (chunks, episode), shared by
  every namespace.
- **Consolidation, per namespace** (`consolidate`): sessions in time order against the
  namespace's memory so far (a `NamespaceView`), giving a `ChangeSet`: entities deduplicated
  across the namespace's sessions (a bare type-less name joins the typed entity of the same
  name; a single-word person name joins the one full name it is part of), and a new value for
  the same subject and attribute supersedes the current fact (`invalid_at` = the new fact's
  `valid_at`, `superseded_by` = the new fact; the old one stays, as history). Cheap: no text
  is parsed here.

The runner (`runner.reconcile_pending_async`) runs the per-session part for every session and
then `namespace_graph.consolidate_namespaces`, which feeds each namespace's sessions in time
order and writes the resulting memory, one namespace per transaction.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.reconcile.entity_rules import find_entities
from eval_pipeline.reconcile.extractive import ExtractiveConfig, ExtractiveReconciler
from eval_pipeline.reconcile.fact_rules import StatedFact, stated_facts, value_key
from eval_pipeline.reconcile.memory_system import NAMESPACED_SCHEMA, MemorySystem
from eval_pipeline.reconcile.models import (
    MemoryEntity,
    SessionInput,
    SessionMemory,
    entity_key,
    normalise_name,
)
from eval_pipeline.reconcile.namespace import (
    AddFact,
    Change,
    ChangeSet,
    MergeEntities,
    NamespaceEntity,
    NamespaceFact,
    NamespaceView,
    SupersedeFact,
    UpsertEntity,
    scoped_fact_id,
)


class ConsolidatingConfig(ExtractiveConfig):
    model_config = ConfigDict(extra="forbid", frozen=True)

    supersede: bool = Field(default=True, description="supersede facts on a new value")
    merge_aliases: bool = Field(default=True, description="dedupe entities by alias rules")


class SessionExtraction(BaseModel):
    """What one session yields, whatever namespace reads it."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    session_id: str
    valid_at: str | None
    memory: SessionMemory  # the extractive layer: chunks, entities, episode
    statements: tuple[StatedFact, ...]
    statement_entities: tuple[tuple[MemoryEntity, ...], ...]  # per statement, in its sentence


class ConsolidatingReconciler(MemorySystem):
    """A `MemorySystem`: `extract` (cached by `MemorySystem`) and `consolidate` below."""

    name = "consolidating"
    version = "1"
    schema = NAMESPACED_SCHEMA

    def __init__(self, **config: Any) -> None:
        super().__init__()
        self.config = ConsolidatingConfig(**config)  # type: ignore[assignment]
        extractive = {k: getattr(self.config, k) for k in ExtractiveConfig.model_fields}
        self._extractive = ExtractiveReconciler(**extractive)

    # ---- per session: shared and cached (by MemorySystem.extract) ------------------

    def extract_session(self, session: SessionInput) -> SessionExtraction:
        memory = self._extractive.reconcile(session)
        statements: list[StatedFact] = []
        per_statement: list[tuple[MemoryEntity, ...]] = []
        for turn in session.turns:
            for fact in stated_facts(turn.turn_id, turn.role, turn.text):
                statements.append(fact)
                found = find_entities(turn.text[fact.start : fact.end])
                entities = {
                    e.key: MemoryEntity(key=e.key, name=e.name, type=e.type)  # type: ignore[arg-type]
                    for e in found
                }
                per_statement.append(tuple(entities.values()))
        return SessionExtraction(
            session_id=session.session_id,
            valid_at=session.started_at,
            memory=memory,
            statements=tuple(statements),
            statement_entities=tuple(per_statement),
        )

    def reconcile(self, session: SessionInput) -> SessionMemory:
        """The session-level memory every namespace shares: chunks and the episode. Entities
        and facts belong to namespaces (`consolidate`)."""
        memory = self.extract(session).memory
        chunks = tuple(c.model_copy(update={"entity_keys": ()}) for c in memory.chunks)
        return SessionMemory(
            session_id=session.session_id,
            reconciler=self.name,
            chunks=chunks,
            episode=memory.episode,
        )

    # ---- per namespace: cheap ------------------------------------------------------

    def consolidate(self, view: NamespaceView, extraction: SessionExtraction) -> ChangeSet:
        config: ConsolidatingConfig = self.config  # type: ignore[assignment]
        resolver = _Resolver(view, merge_aliases=config.merge_aliases)
        changes: list[Change] = []
        for entity in extraction.memory.entities:
            changes += resolver.add(entity)

        facts = list(view.current_facts())
        for n, (stated, entities) in enumerate(
            zip(extraction.statements, extraction.statement_entities, strict=True)
        ):
            keys: list[str] = []
            for entity in entities:
                changes += resolver.add(entity)
                keys.append(resolver.key_of(entity.key))
            if stated.subject != "user":
                subject = MemoryEntity(
                    key=entity_key("person", f"the {stated.subject}"),
                    name=f"the {stated.subject}",
                    type="person",
                )
                changes += resolver.add(subject)
                keys.insert(0, resolver.key_of(subject.key))
            same_slot = [
                f
                for f in facts
                if f.current and stated.same_slot((f.subject or "", f.attribute or "", f.qualifier))
            ]
            if any(value_key(f.value or "") == value_key(stated.value) for f in same_slot):
                continue  # a restatement of what is already current: nothing changes
            fact = NamespaceFact(
                fact_id=scoped_fact_id(view.namespace, extraction.session_id, n),
                session_id=extraction.session_id,
                text=stated.text,
                fact_type="attribute",
                subject=stated.subject,
                attribute=stated.attribute,
                qualifier=stated.qualifier,
                value=stated.value,
                valid_at=extraction.valid_at,
                turn_ids=(stated.turn_id,),
                entity_keys=tuple(dict.fromkeys(keys)),
            )
            changes.append(AddFact(fact=fact))
            if config.supersede:
                for old in same_slot:
                    changes.append(
                        SupersedeFact(
                            fact_id=old.fact_id, by=fact.fact_id, invalid_at=fact.valid_at
                        )
                    )
                    facts[facts.index(old)] = old.model_copy(
                        update={"invalid_at": fact.valid_at, "superseded_by": fact.fact_id}
                    )
            facts.append(fact)
        return ChangeSet(
            namespace=view.namespace, session_id=extraction.session_id, changes=tuple(changes)
        )


class _Resolver:
    """Entity identity within one namespace while one session is consolidated."""

    def __init__(self, view: NamespaceView, *, merge_aliases: bool) -> None:
        self.merge_aliases = merge_aliases
        self.entities: dict[str, NamespaceEntity] = dict(view.entities)
        self.alias: dict[str, str] = {a: e.key for e in view.entities.values() for a in e.aliases}

    def key_of(self, key: str) -> str:
        while key in self.alias and self.alias[key] != key:
            key = self.alias[key]
        return key

    def add(self, entity: MemoryEntity) -> list[Change]:
        key = entity.key
        if self.key_of(key) in self.entities:
            return []
        if self.merge_aliases:
            target = self._alias_target(entity)
            if target is not None:
                return self._upsert(self.entities[target], alias=key)
            absorbed = self._absorbs(entity)
            changes = self._upsert(NamespaceEntity(key=key, name=entity.name, type=entity.type))
            for old in absorbed:
                changes.append(MergeEntities(key=old, into=key))
                gone = self.entities.pop(old)
                self.entities[key] = self.entities[key].model_copy(
                    update={"aliases": (*self.entities[key].aliases, old, *gone.aliases)}
                )
                for alias in (old, *gone.aliases):
                    self.alias[alias] = key
            return changes
        return self._upsert(NamespaceEntity(key=key, name=entity.name, type=entity.type))

    def _upsert(self, entity: NamespaceEntity, alias: str | None = None) -> list[Change]:
        if alias is not None:
            entity = entity.model_copy(update={"aliases": (*entity.aliases, alias)})
            self.alias[alias] = entity.key
        self.entities[entity.key] = entity
        return [UpsertEntity(entity=entity)]

    def _alias_target(self, entity: MemoryEntity) -> str | None:
        """An existing entity this new name is another name for."""
        norm = normalise_name(entity.name)
        if entity.type == "other":  # a bare name joins the one typed entity of that name
            typed = [e.key for e in self.entities.values() if e.key.partition(":")[2] == norm]
            if len(typed) == 1:
                return typed[0]
        if entity.type == "person" and " " not in norm:  # "Ana" → the one "Ana Lopez"
            full = [
                e.key
                for e in self.entities.values()
                if e.type == "person" and _is_part_of(norm, e.key.partition(":")[2])
            ]
            if len(full) == 1:
                return full[0]
        return None

    def _absorbs(self, entity: MemoryEntity) -> list[str]:
        """Existing entities that are other names for this new one."""
        norm = normalise_name(entity.name)
        out = []
        for e in self.entities.values():
            other = e.key.partition(":")[2]
            if e.type == "other" and entity.type != "other" and other == norm:
                out.append(e.key)
            elif (
                entity.type == "person"
                and e.type == "person"
                and " " not in other
                and _is_part_of(other, norm)
                and sum(
                    1
                    for x in self.entities.values()
                    if x.type == "person" and _is_part_of(other, x.key.partition(":")[2])
                )
                == 0
            ):
                out.append(e.key)
        return sorted(out)


def _is_part_of(word: str, full: str) -> bool:
    parts = full.split()
    return len(parts) > 1 and word in (parts[0], parts[-1])
