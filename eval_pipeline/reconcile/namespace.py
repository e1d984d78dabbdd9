"""A namespace's memory as plain data: the read view a consolidating reconciler gets, and the
change set it hands back.

A namespace is one memory owner: one LongMemEval question is one user's history, and tier 2
is one organisation. Sessions are consolidated in time order within it; a session in several
haystacks (a shared distractor) is consolidated once per namespace, so no two users ever share
an entity or a fact.

Changes (`ChangeSet`): upsert an entity (with aliases), add a fact, supersede a fact (it gets
`invalid_at` and `superseded_by`, and stays as history), invalidate a fact, merge an entity
into another. `NamespaceView.apply` is the one place their meaning is defined; the graph
writer (`namespace_graph`) writes the resulting view.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.reconcile.models import EntityType, FactType, normalise_name

TIER2_QUESTION_PREFIX = "t2-"  # tier2.convert.QUESTION_ID_PREFIX (not imported: no cycle)
TIER2_NAMESPACE = "org:acme"


def namespace_of(question_id: str) -> str:
    """Whose memory a question reads: its own user's (tier 1), the organisation's (tier 2)."""
    if question_id.startswith(TIER2_QUESTION_PREFIX):
        return TIER2_NAMESPACE
    return f"user:{question_id}"


def scoped_key(namespace: str, local_key: str) -> str:
    """Graph-wide unique key of a namespace's entity (Entity.key is unique)."""
    return f"{namespace}|{local_key}"


def scoped_fact_id(namespace: str, session_id: str, n: int) -> str:
    return f"{namespace}|{session_id}#fact{n}"


class NamespaceEntity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # local to the namespace: "<type>:<normalised name>"
    name: str = Field(min_length=1)
    type: EntityType
    aliases: tuple[str, ...] = ()  # other local keys that name this entity


class NamespaceFact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fact_id: str
    session_id: str
    text: str = Field(min_length=1)
    fact_type: FactType = "attribute"
    subject: str | None = None
    attribute: str | None = None
    qualifier: str | None = None
    value: str | None = None
    valid_at: str | None = None
    invalid_at: str | None = None
    superseded_by: str | None = None
    turn_ids: tuple[str, ...] = Field(min_length=1)
    entity_keys: tuple[str, ...] = ()  # local keys

    @property
    def current(self) -> bool:
        return self.invalid_at is None and self.superseded_by is None


# ---- changes ------------------------------------------------------------------------------


class UpsertEntity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["upsert_entity"] = "upsert_entity"
    entity: NamespaceEntity


class AddFact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["add_fact"] = "add_fact"
    fact: NamespaceFact


class SupersedeFact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["supersede_fact"] = "supersede_fact"
    fact_id: str
    by: str  # the successor's fact_id (added in this change set or already in the view)
    invalid_at: str | None


class InvalidateFact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["invalidate_fact"] = "invalidate_fact"
    fact_id: str
    invalid_at: str | None


class MergeEntities(BaseModel):
    """`key` disappears; its aliases, name and facts move to `into`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["merge_entities"] = "merge_entities"
    key: str
    into: str


Change = UpsertEntity | AddFact | SupersedeFact | InvalidateFact | MergeEntities


class ChangeSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    session_id: str
    changes: tuple[Change, ...] = ()


class ChangeError(ValueError):
    """A change that does not apply to the view (unknown fact, successor missing, ...)."""


class NamespaceView:
    """The namespace's memory so far: entities by local key, facts by id (insertion order)."""

    def __init__(
        self,
        namespace: str,
        entities: list[NamespaceEntity] | None = None,
        facts: list[NamespaceFact] | None = None,
        sessions: list[str] | None = None,
    ) -> None:
        self.namespace = namespace
        self.entities: dict[str, NamespaceEntity] = {e.key: e for e in entities or []}
        self.facts: dict[str, NamespaceFact] = {f.fact_id: f for f in facts or []}
        self.sessions: list[str] = list(sessions or [])  # consolidated, in time order
        self._alias: dict[str, str] = {}
        for e in self.entities.values():
            for alias in e.aliases:
                self._alias[alias] = e.key

    # ---- reads ----------------------------------------------------------------------

    def resolve(self, key: str) -> str | None:
        """The entity a local key names (itself, or the entity it is an alias of)."""
        if key in self.entities:
            return key
        return self._alias.get(key)

    def entities_named(self, name: str) -> list[NamespaceEntity]:
        norm = normalise_name(name)
        return [e for e in self.entities.values() if e.key.partition(":")[2] == norm]

    def current_facts(self) -> list[NamespaceFact]:
        return [f for f in self.facts.values() if f.current]

    def history(self, fact_id: str) -> list[NamespaceFact]:
        """The fact and the ones it superseded, newest first."""
        chain = [self.facts[fact_id]]
        by_successor = {f.superseded_by: f for f in self.facts.values() if f.superseded_by}
        while chain[-1].fact_id in by_successor:
            chain.append(by_successor[chain[-1].fact_id])
        return chain

    # ---- writes ---------------------------------------------------------------------

    def apply(self, change_set: ChangeSet) -> None:
        if change_set.namespace != self.namespace:
            raise ChangeError(
                f"change set for namespace {change_set.namespace!r} applied to {self.namespace!r}"
            )
        for change in change_set.changes:
            self._apply(change)
        if change_set.session_id not in self.sessions:
            self.sessions.append(change_set.session_id)

    def _apply(self, change: Change) -> None:
        if isinstance(change, UpsertEntity):
            entity = change.entity
            old = self.entities.get(entity.key)
            if old is not None:
                aliases = tuple(dict.fromkeys((*old.aliases, *entity.aliases)))
                entity = old.model_copy(update={"aliases": aliases})
            self.entities[entity.key] = entity
            for alias in entity.aliases:
                self._alias[alias] = entity.key
        elif isinstance(change, AddFact):
            fact = change.fact
            if fact.fact_id in self.facts:
                raise ChangeError(f"fact {fact.fact_id!r} is already in the namespace")
            keys = tuple(dict.fromkeys(self.resolve(k) or k for k in fact.entity_keys))
            missing = [k for k in keys if k not in self.entities]
            if missing:
                raise ChangeError(f"fact {fact.fact_id!r} is about unknown entities {missing}")
            self.facts[fact.fact_id] = fact.model_copy(update={"entity_keys": keys})
        elif isinstance(change, SupersedeFact):
            old_fact = self._fact(change.fact_id)
            if change.by not in self.facts:
                raise ChangeError(f"successor {change.by!r} of {change.fact_id!r} is not known")
            self.facts[old_fact.fact_id] = old_fact.model_copy(
                update={"invalid_at": change.invalid_at, "superseded_by": change.by}
            )
        elif isinstance(change, InvalidateFact):
            old_fact = self._fact(change.fact_id)
            self.facts[old_fact.fact_id] = old_fact.model_copy(
                update={"invalid_at": change.invalid_at}
            )
        elif isinstance(change, MergeEntities):
            self._merge(change.key, change.into)
        else:  # pragma: no cover - the union is closed
            raise ChangeError(f"unknown change {change!r}")

    def _fact(self, fact_id: str) -> NamespaceFact:
        if fact_id not in self.facts:
            raise ChangeError(f"fact {fact_id!r} is not in the namespace")
        return self.facts[fact_id]

    def _merge(self, key: str, into: str) -> None:
        if key == into:
            return
        if key not in self.entities or into not in self.entities:
            raise ChangeError(f"cannot merge {key!r} into {into!r}: both must exist")
        gone = self.entities.pop(key)
        target = self.entities[into]
        aliases = tuple(dict.fromkeys((*target.aliases, key, *gone.aliases)))
        self.entities[into] = target.model_copy(update={"aliases": aliases})
        for alias in aliases:
            self._alias[alias] = into
        for fid, fact in list(self.facts.items()):
            if key in fact.entity_keys:
                keys = tuple(dict.fromkeys(into if k == key else k for k in fact.entity_keys))
                self.facts[fid] = fact.model_copy(update={"entity_keys": keys})
