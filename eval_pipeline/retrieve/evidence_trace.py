"""What memory holds of each question's evidence: the formation step of the diagnosis.

A question that was not covered failed somewhere; to tell *formation* (the memory never held
its evidence) from *retrieval* (it held it, retrieval did not return it) the diagnosis needs to
know, per evidence turn, whether any memory the system formed traces to it. This module reads
that after retrieval, from the same graph (or provider store) retrieval read — never through the
retriever, which must not know the evidence.

"Traces to" is exactly what evidence recall credits (`retrieve.provenance`): a memory node with
a provenance edge to the turn (chunks and facts `FROM_TURN`, episodes `COVERS`, whatever a
memory system declared), in the question's namespace or in the session-level layer every
namespace shares; a raw turn when the memory under test declares the transcript searchable
(`none`, or a graph no reconciler registered memory in). A fact that was superseded or
invalidated still traces to its turn but no longer holds the current value: `superseded`.
A provider's memories trace by the turn ids they name, or by session when they name none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.graph.schema import TURN
from eval_pipeline.reconcile.namespace import namespace_of
from eval_pipeline.reconcile.reader import declared_searchable, memory_census
from eval_pipeline.retrieve.provenance import (
    BUILTIN_SOURCES,
    MAX_IDS_PER_QUERY,
    ProvenanceSource,
    declared_sources,
)

TRACE_FILE = "evidence_trace.jsonl"
NODES_KEPT = 5  # memory ids named per evidence unit (enough to say what changed)
# A distractor turn shared by many haystacks can have a fact per namespace: generous limits.
READ_LIMITS = {"timeout_s": 120, "max_rows": 500_000}

Held = Literal["live", "superseded", "absent"]


class EvidenceTrace(BaseModel):
    """One question: per evidence unit (turn id, or session id at session level), whether
    memory holds it, and the first few memory ids that trace to it."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    level: Literal["turn", "session"] = "turn"
    held: dict[str, Held] = Field(default_factory=dict)
    nodes: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def formed(self) -> bool | None:
        """Every evidence unit held live; None with no evidence to hold."""
        if not self.held:
            return None
        return all(v == "live" for v in self.held.values())


def _statement(source: ProvenanceSource) -> str:
    # Properties a label lacks read as null on both backends; `superseded_by` and
    # `invalid_at` are the namespaced facts' (reconcile.schema).
    return (
        f"MATCH (n:{source.label})-[:{source.link}]->(t:{TURN}) WHERE t.turn_id IN $ids\n"
        f"RETURN t.turn_id AS turn_id, n.{source.id_property} AS id, "
        "n.namespace AS namespace, n.superseded_by AS superseded_by, "
        "n.invalid_at AS invalid_at"
    )


def _chunks(ids: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(ids), MAX_IDS_PER_QUERY):
        yield ids[start : start + MAX_IDS_PER_QUERY]


def graph_traces(
    store: Any, questions: Mapping[str, Sequence[str]], configurations: Sequence[Mapping]
) -> list[EvidenceTrace]:
    """Traces for `questions` (question id -> evidence turn ids) from graph memory."""
    wanted = sorted({t for turns in questions.values() for t in turns})
    kinds = declared_searchable(configurations)
    # turn id -> [(namespace or None, node id, superseded)]
    holders: dict[str, list[tuple[str | None, str, bool]]] = {}
    if wanted and "turn" in kinds:
        for ids in _chunks(wanted):
            for r in store.read(
                f"MATCH (t:{TURN}) WHERE t.turn_id IN $ids RETURN t.turn_id AS turn_id",
                {"ids": ids},
                **READ_LIMITS,
            ):
                holders.setdefault(str(r["turn_id"]), []).append((None, str(r["turn_id"]), False))
    if wanted:
        rows = store.read(
            "MATCH (m:EvalPipelineMemory) RETURN m.pins AS pins", timeout_s=60, max_rows=10_000
        )
        sources = list(
            dict.fromkeys([*BUILTIN_SOURCES, *declared_sources(r["pins"] for r in rows)])
        )
        for source in sources:
            for ids in _chunks(wanted):
                for r in store.read(_statement(source), {"ids": ids}, **READ_LIMITS):
                    superseded = r["superseded_by"] is not None or r["invalid_at"] is not None
                    holders.setdefault(str(r["turn_id"]), []).append(
                        (r["namespace"], str(r["id"]), superseded)
                    )
    out = []
    for qid, turns in questions.items():
        own = namespace_of(qid)
        trace = EvidenceTrace(question_id=qid)
        for turn in turns:
            mine = [h for h in holders.get(turn, []) if h[0] in (None, own)]
            live = [h[1] for h in mine if not h[2]]
            trace.held[turn] = "live" if live else "superseded" if mine else "absent"
            trace.nodes[turn] = sorted(live or [h[1] for h in mine])[:NODES_KEPT]
        out.append(trace)
    return out


def provider_traces(
    memories: Mapping[str, Sequence[Any]],
    questions: Mapping[str, Sequence[str]],
    sessions_of: Mapping[str, Sequence[str]],
) -> list[EvidenceTrace]:
    """Traces from a provider's memories (namespace -> `StoredMemory`s). A memory holds the
    turns it names; a provider none of whose memories names a turn is traced at session
    level, as scoring measures it (`score.scorer.evidence_level`). `sessions_of` is question
    id -> evidence session ids."""
    names_turns = any(m.turn_ids for mems in memories.values() for m in mems)
    level: Literal["turn", "session"] = "turn" if names_turns else "session"
    out = []
    for qid, turns in questions.items():
        mems = memories.get(namespace_of(qid), [])
        units = list(turns) if level == "turn" else list(sessions_of.get(qid, []))
        trace = EvidenceTrace(question_id=qid, level=level)
        for unit in units:
            ids = sorted(
                m.memory_id
                for m in mems
                if (unit in m.turn_ids if level == "turn" else m.session_id == unit)
            )
            trace.held[unit] = "live" if ids else "absent"
            trace.nodes[unit] = ids[:NODES_KEPT]
        out.append(trace)
    return out


def evidence_traces(
    store: Any,
    goldens: Sequence[Mapping[str, Any]],
    provider: Any | None,
    namespaces: Sequence[str],
) -> list[EvidenceTrace]:
    """Every answerable golden's trace (abstention questions have no evidence to hold), from
    the provider's memories when the memory under test is a provider, else from the graph."""
    questions: dict[str, list[str]] = {}
    sessions_of: dict[str, list[str]] = {}
    for g in goldens:
        meta = g["additional_metadata"]
        if meta["abstention"]:
            continue
        questions[g["name"]] = list(meta["evidence_turn_ids"])
        sessions_of[g["name"]] = list(meta["evidence_session_ids"])
    if provider is not None:
        memories = {ns: provider.memories(ns) for ns in namespaces}
        return provider_traces(memories, questions, sessions_of)
    return graph_traces(store, questions, memory_census(store)["configurations"])
