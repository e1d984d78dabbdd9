"""The `llm` reconciler: two calls per session through the LLM layer (role `reconciler`).

1. Facts and entities, as structured output validated against `ExtractedMemory` (the layer
   asks once more with the validation error, then records a failure).
2. An episode summary, as plain text.

Turns are shown to the model with short labels (`t0`, `t1`, …) that it cites; labels map back
to turn ids here, so a fact always links to turns that exist. `valid_at` is the session's
start, never a date the model made up. With the `offline` provider there is no model: the
reconciler refuses at construction (`ReconcilerUnavailable`) rather than produce fake memory.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eval_pipeline.llm import LLMLayer, OfflineRoleError
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.memory_system import SESSION_SCHEMA
from eval_pipeline.reconcile.models import (
    EntityType,
    FactType,
    MemoryEntity,
    MemoryEpisode,
    MemoryFact,
    SessionInput,
    SessionMemory,
    entity_key,
    normalise_name,
)
from eval_pipeline.reconcile.protocol import BaseReconciler, ReconcilerUnavailable, reconciler_pins

ROLE = "reconciler"
# Bump when the prompts change: it is in the pins (the cache keys change with the text anyway).
PROMPT_VERSION = "1"

FACTS_SYSTEM = (
    "You turn one conversation between a user and an AI assistant into long-term memory for "
    "the assistant. List the entities mentioned (people, places, organisations, products, "
    "quantities with units, dates) and the facts worth remembering about the user and their "
    "world: preferences, events, attributes, plans and relationships. Write each fact as one "
    "self-contained sentence about the user ('The user ...'), cite the labels of the turns it "
    "comes from (such as t0 or t3), and name the entities it is about exactly as in your entity "
    "list. Only state what the turns say; if nothing is worth remembering, return empty lists."
)
SUMMARY_SYSTEM = (
    "Summarise one conversation between a user and an AI assistant for the assistant's "
    "long-term memory in at most {sentences} sentences: what the user said, asked, decided or "
    "plans, keeping names, numbers and dates. Reply with the summary only."
)


# Spellings models commonly use for our types; anything else must validate as is.
_TYPE_SYNONYMS = {
    "organization": "organisation",
    "org": "organisation",
    "company": "organisation",
    "location": "place",
    "city": "place",
    "country": "place",
    "time": "date",
    "datetime": "date",
    "number": "quantity",
    "amount": "quantity",
    "money": "quantity",
}


class ExtractedEntity(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=200)
    type: EntityType

    @field_validator("type", mode="before")
    @classmethod
    def _known_spelling(cls, value: Any) -> Any:
        if isinstance(value, str):
            folded = value.strip().casefold()
            return _TYPE_SYNONYMS.get(folded, folded)
        return value


class ExtractedFact(BaseModel):
    model_config = ConfigDict(extra="ignore")

    statement: str = Field(min_length=1, max_length=2000)
    fact_type: FactType
    source_turns: list[str] = Field(min_length=1, description="turn labels, e.g. ['t0', 't3']")
    entities: list[str] = Field(default_factory=list, description="entity names, as listed")


class ExtractedMemory(BaseModel):
    """What call 1 must return."""

    model_config = ConfigDict(extra="ignore")

    entities: list[ExtractedEntity] = Field(default_factory=list)
    facts: list[ExtractedFact] = Field(default_factory=list)


class LLMReconcilerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    summary_sentences: int = Field(default=3, ge=1, le=20)
    max_turn_chars: int = Field(default=4000, ge=100)  # longer turns are cut in the prompt


def turn_label(position: int) -> str:
    return f"t{position}"


def transcript(session: SessionInput, max_turn_chars: int) -> str:
    """The session as the model sees it: its date, then one labelled line per turn."""
    lines = [f"Session date: {session.date or session.started_at or 'unknown'}", ""]
    for position, turn in enumerate(session.turns):
        text = turn.text if len(turn.text) <= max_turn_chars else turn.text[:max_turn_chars] + "…"
        lines.append(f"[{turn_label(position)}] {turn.role}: {text}")
    return "\n".join(lines)


def memory_from_extraction(
    session: SessionInput, extracted: ExtractedMemory, summary: str, reconciler: str
) -> SessionMemory:
    """Map labels to turn ids and names to entity keys; drop citations of unknown turns.

    A fact that cites no existing turn is dropped (it cannot be linked to its source); an
    entity a fact names but the list forgot is added with type `other`.
    """
    labels = {turn_label(i): t.turn_id for i, t in enumerate(session.turns)}
    entities: dict[str, MemoryEntity] = {}
    key_by_name: dict[str, str] = {}
    for e in extracted.entities:
        name = " ".join(e.name.split())
        key = entity_key(e.type, name)
        if not normalise_name(name) or key in entities:
            continue
        entities[key] = MemoryEntity(key=key, name=name, type=e.type)
        key_by_name.setdefault(normalise_name(name), key)

    facts: list[MemoryFact] = []
    valid_at = session.started_at or session.date
    for f in extracted.facts:
        turn_ids = tuple(
            dict.fromkeys(labels[x.strip()] for x in f.source_turns if x.strip() in labels)
        )
        if not turn_ids:
            continue
        keys: list[str] = []
        for name in f.entities:
            norm = normalise_name(name)
            if not norm:
                continue
            key = key_by_name.get(norm)
            if key is None:
                key = entity_key("other", name)
                entities.setdefault(
                    key, MemoryEntity(key=key, name=" ".join(name.split()), type="other")
                )
                key_by_name[norm] = key
            if key not in keys:
                keys.append(key)
        facts.append(
            MemoryFact(
                fact_id=schema.fact_id(session.session_id, len(facts)),
                text=f.statement.strip(),
                fact_type=f.fact_type,
                valid_at=valid_at,
                turn_ids=turn_ids,
                entity_keys=tuple(keys),
            )
        )
    return SessionMemory(
        session_id=session.session_id,
        reconciler=reconciler,
        entities=tuple(entities.values()),
        facts=tuple(facts),
        episode=MemoryEpisode(
            episode_id=schema.episode_id(session.session_id),
            summary=summary,
            turn_ids=tuple(session.turn_ids),
        ),
    )


class LLMReconciler(BaseReconciler):
    name = "llm"
    version = "1"
    schema = SESSION_SCHEMA

    def __init__(self, llm: LLMLayer | None = None, **config: Any) -> None:
        self.config = LLMReconcilerConfig(**config)  # type: ignore[assignment]
        self.layer = llm if llm is not None else LLMLayer()
        self.client = self.layer.role(ROLE)
        if self.client.is_offline:
            raise ReconcilerUnavailable(
                "the 'llm' reconciler needs a model, but the LLM role 'reconciler' is "
                "configured offline; give that role a provider (e.g. 'openai:gpt-4o-mini' or "
                "'openai_compatible:MODEL@http://host:port/v1'), or use the 'extractive' "
                "reconciler, which needs no model"
            )

    @property
    def concurrency(self) -> int:
        """The role's own limit: more sessions in flight would only queue in the layer."""
        return self.client.config.concurrency

    def pins(self) -> dict[str, Any]:
        return {
            **reconciler_pins(self),
            "prompt_version": PROMPT_VERSION,
            "llm": self.client.config.pins(),
        }

    def usage(self) -> dict[str, Any] | None:
        return self.layer.snapshot().roles[ROLE].model_dump(mode="json")

    async def aclose(self) -> None:
        await self.layer.aclose()

    async def reconcile(self, session: SessionInput) -> SessionMemory:
        config: LLMReconcilerConfig = self.config  # type: ignore[assignment]
        text = transcript(session, config.max_turn_chars)
        try:
            # The two calls are independent: in flight together, bounded by the role's limit.
            extracted, summary = await asyncio.gather(
                self.client.complete_structured(text, ExtractedMemory, system=FACTS_SYSTEM),
                self.client.complete(
                    text,
                    system=SUMMARY_SYSTEM.format(sentences=config.summary_sentences),
                    # An empty summary is refused (never cached): a re-run asks again.
                    accept=lambda c: None if c.text.split() else "an empty episode summary",
                ),
            )
        except OfflineRoleError as exc:  # configuration changed under us: say so plainly
            raise ReconcilerUnavailable(str(exc)) from None
        summary = " ".join(summary.text.split())
        if not summary:
            raise ValueError("the model returned an empty episode summary")
        return memory_from_extraction(session, extracted, summary, self.name)
