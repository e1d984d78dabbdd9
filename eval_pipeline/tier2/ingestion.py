"""Tier 2's ingestion axis: after reconciliation, does the organisation's memory hold what a
scenario expects, and avoid what it forbids?

Scenarios declare `expected_entities` (names), `expected_claims` and `forbidden_claims`
(`{claim, terms}`: every term appears in one memory text). Memory is read from the graph
only through what the memory system declared searchable (`IngestSchema.searchable`, found in
the pins of the configuration that reconciled the tier-2 sessions): the texts retrieval could
search, never raw turns (turns are the input, not memory) and never hard-coded labels.

- Namespaced memory (facts, entities) is read in the tier-2 namespace (`org:acme`) only;
  session-level memory (chunks, episodes, a session-level system's facts) of the tier-2
  sessions. A system without namespaces: all its searchable memory of those sessions.
- An expected entity or claim counts when any memory text holds it, current or history.
- A forbidden claim counts as held when a *current* text holds it: a fact marked
  `invalid_at` / `superseded_by` is history, which is what a memory should make of a stale
  claim.

    score = 100 · (entities found + claims found + forbidden claims avoided) / declared

None (never 0) when the scenario declares nothing, the memory system declares no searchable
texts (reconciler `none`) or the graph holds no memory for the tier-2 sessions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.reconcile.memory_system import SEARCHABLE_KINDS
from eval_pipeline.reconcile.namespace import TIER2_NAMESPACE
from eval_pipeline.reconcile.reader import READ_MEMORY, read_states
from eval_pipeline.tier2.terms import claim_in, term_in

INGESTION_FILE = "ingestion.json"
INGESTION_VERSION = 1
_MAX_ROWS = 1_000_000


class MemoryText(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str  # a searchable kind: chunk | fact | episode
    text: str
    session_id: str | None = None
    current: bool = True


class MemoryRead(BaseModel):
    """What the ingestion axis read: the texts, and what decided which."""

    searchable: list[str]  # the kinds the memory systems declared (union)
    namespaced: bool
    namespace: str | None
    texts: list[MemoryText]
    reason: str = ""  # why nothing was read, when nothing was


def _schemas(store: Any, sessions: set[str]) -> list[dict[str, Any]]:
    """The ingest-schema pins of the configurations that reconciled `sessions`."""
    keys = {s.pins_key for sid, s in read_states(store).items() if sid in sessions}
    out = []
    for row in store.read(READ_MEMORY, timeout_s=60, max_rows=10_000):
        if row["pins_key"] in keys:
            pins = json.loads(row["pins"]) if isinstance(row["pins"], str) else row["pins"]
            out.append((pins or {}).get("schema") or {})
    return out


def read_memory(
    store: Any, sessions: Iterable[str], *, namespace: str = TIER2_NAMESPACE
) -> MemoryRead:
    """Every searchable memory text of `sessions` (tier 2: its events) in `namespace`."""
    sessions = set(sessions)
    schemas = _schemas(store, sessions)
    # Formed memory only: the transcript (`turn`, what `none` searches) is not ingestion.
    searchable = sorted({k for s in schemas for k in s.get("searchable") or []} - {"turn"})
    namespaced = any(s.get("namespaced") for s in schemas)
    ns = namespace if namespaced else None
    if not searchable:
        why = (
            "no memory configuration reconciled the tier-2 sessions"
            if not schemas
            else "the memory system declares no searchable texts"
        )
        return MemoryRead(searchable=[], namespaced=namespaced, namespace=ns, texts=[], reason=why)
    texts: list[MemoryText] = []
    for kind in searchable:
        label, prop = SEARCHABLE_KINDS[kind]
        # Session-level nodes have no namespace; namespaced ones must be this namespace's.
        where = "n.session_id IN $sessions"
        if ns is not None:
            where += " AND (n.namespace IS NULL OR n.namespace = $ns)"
        rows = store.read(
            f"MATCH (n:{label}) WHERE {where} RETURN n.{prop} AS text, "
            "n.session_id AS session_id, n.invalid_at AS invalid_at, "
            "n.superseded_by AS superseded_by",
            {"sessions": sorted(sessions), "ns": ns},
            timeout_s=300,
            max_rows=_MAX_ROWS,
        )
        texts += [
            MemoryText(
                kind=kind,
                text=r["text"],
                session_id=r["session_id"],
                current=r["invalid_at"] is None and r["superseded_by"] is None,
            )
            for r in rows
            if isinstance(r["text"], str) and r["text"].strip()
        ]
    return MemoryRead(
        searchable=searchable,
        namespaced=namespaced,
        namespace=ns,
        texts=texts,
        reason="" if texts else "the graph holds no searchable memory of the tier-2 sessions",
    )


class IngestionResult(BaseModel):
    scenario_id: str
    score: float | None  # 0..100; None = not taken
    reason: str
    entities_missing: list[str] = []
    claims_missing: list[str] = []
    forbidden_held: list[str] = []
    declared: int = 0


def ingestion_score(spec: Mapping[str, Any], memory: MemoryRead) -> IngestionResult:
    """One scenario's ingestion score; `spec` holds `scenario_id`, `expected_entities`,
    `expected_claims` and `forbidden_claims` (as in the goldens' tier-2 metadata)."""
    sid = spec["scenario_id"]
    entities = list(spec.get("expected_entities") or [])
    claims = list(spec.get("expected_claims") or [])
    forbidden = list(spec.get("forbidden_claims") or [])
    declared = len(entities) + len(claims) + len(forbidden)
    if not declared:
        return IngestionResult(scenario_id=sid, score=None, reason="declares no expectations")
    if not memory.texts:
        return IngestionResult(scenario_id=sid, score=None, reason=memory.reason, declared=declared)
    every = [t.text for t in memory.texts]
    current = [t for t in memory.texts if t.current]
    e_missing = [e for e in entities if not any(term_in(e, t) for t in every)]
    c_missing = [c["claim"] for c in claims if not any(claim_in(c["terms"], t) for t in every)]
    held_in = {
        c["claim"]: sorted({t.kind for t in current if claim_in(c["terms"], t.text)})
        for c in forbidden
    }
    f_held = [claim for claim, kinds in held_in.items() if kinds]
    good = declared - len(e_missing) - len(c_missing) - len(f_held)
    problems = [
        *(f"entity missing: {e}" for e in e_missing),
        *(f"claim missing: {c}" for c in c_missing),
        *(f"forbidden claim held as current ({', '.join(held_in[c])}): {c}" for c in f_held),
    ]
    return IngestionResult(
        scenario_id=sid,
        score=100.0 * good / declared,
        reason="; ".join(problems) or f"all {declared} expectation(s) met",
        entities_missing=e_missing,
        claims_missing=c_missing,
        forbidden_held=f_held,
        declared=declared,
    )


def scenario_specs(goldens: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Scenario id → its ingestion declarations, from tier-2 golden rows (one per question,
    the declarations are the scenario's)."""
    out: dict[str, dict[str, Any]] = {}
    for g in goldens:
        meta = g["additional_metadata"]
        if meta.get("tier") == 2:
            out.setdefault(
                meta["scenario_id"],
                {
                    "scenario_id": meta["scenario_id"],
                    "expected_entities": meta.get("expected_entities") or [],
                    "expected_claims": meta.get("expected_claims") or [],
                    "forbidden_claims": meta.get("forbidden_claims") or [],
                },
            )
    return out


def tier2_ingestion(
    store: Any, goldens: Iterable[Mapping[str, Any]], *, namespace: str = TIER2_NAMESPACE
) -> dict[str, Any] | None:
    """The ingestion axis of every tier-2 scenario in `goldens`, read from the graph; None
    when the goldens hold no tier-2 question."""
    goldens = list(goldens)  # read twice (a jsonl reader is a generator)
    specs = scenario_specs(goldens)
    if not specs:
        return None
    sessions = {
        s
        for g in goldens
        if g["additional_metadata"].get("tier") == 2
        for s in g["additional_metadata"]["haystack_session_ids"]
    }
    memory = read_memory(store, sessions, namespace=namespace)
    results = [ingestion_score(spec, memory) for spec in specs.values()]
    return {
        "version": INGESTION_VERSION,
        "searchable": memory.searchable,
        "namespace": memory.namespace,
        "texts_read": len(memory.texts),
        "reason": memory.reason,
        "scenarios": {r.scenario_id: r.model_dump(exclude={"scenario_id"}) for r in results},
    }
