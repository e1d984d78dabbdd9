"""The formation audit: is every memory a provider stored supported by the session it names?

Deterministic first: a memory is *supported* when at least `SUPPORT_THRESHOLD` of its content
words (stemmed; words a memory system adds about the speaker itself — "user", "assistant" —
left out) occur in the turns of its source session; *unsupported* when fewer do (nothing in
the session says it: an invented memory); *unsourced* when it names no session the namespace
holds. A memory with no content word at all is supported trivially (nothing to invent).
The shares go into the stage's facts, `summary.json` (`formation_audit`) and `compare`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.providers.base import ProviderSession, StoredMemory
from eval_pipeline.retrieve.terms import content_terms, stem

AUDIT_METHOD = "overlap-v1"
SUPPORT_THRESHOLD = 0.5
SPEAKER_WORDS = frozenset({"user", "users", "assistant", "speaker", "person", "mentioned"})
EXAMPLES_KEPT = 20


class MemoryVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    namespace: str
    memory_id: str
    session_id: str | None
    verdict: str  # supported | unsupported | unsourced
    support: float | None  # share of its content words found in its session
    text: str


class AuditSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = AUDIT_METHOD
    threshold: float = SUPPORT_THRESHOLD
    memories: int
    supported: int
    unsupported: int
    unsourced: int
    unsupported_share: float | None  # None: no memory to audit (never 0 by default)
    unsourced_share: float | None
    examples: list[MemoryVerdict]  # the first unsupported and unsourced ones


def _stems(text: str) -> set[str]:
    return {stem(w) for w in content_terms(text, max_terms=10_000) if w not in SPEAKER_WORDS}


def verdict(memory: StoredMemory, namespace: str, session: ProviderSession | None) -> MemoryVerdict:
    if session is None:
        return MemoryVerdict(
            namespace=namespace,
            memory_id=memory.memory_id,
            session_id=memory.session_id,
            verdict="unsourced",
            support=None,
            text=memory.text,
        )
    words = _stems(memory.text)
    source = _stems(" ".join(t.content for t in session.turns))
    support = 1.0 if not words else len(words & source) / len(words)
    return MemoryVerdict(
        namespace=namespace,
        memory_id=memory.memory_id,
        session_id=memory.session_id,
        verdict="supported" if support >= SUPPORT_THRESHOLD else "unsupported",
        support=round(support, 3),
        text=memory.text,
    )


def audit(
    memories: Mapping[str, Iterable[StoredMemory]],
    sessions: Mapping[str, ProviderSession],
    namespace_sessions: Mapping[str, Iterable[str]],
) -> tuple[AuditSummary, list[MemoryVerdict]]:
    """Every namespace's memories against its own sessions (a memory naming a session outside
    its namespace is unsourced: it cannot have come from this user's history)."""
    verdicts: list[MemoryVerdict] = []
    for ns, items in sorted(memories.items()):
        own = set(namespace_sessions.get(ns, ()))
        for m in items:
            session = sessions.get(m.session_id) if m.session_id in own else None
            verdicts.append(verdict(m, ns, session))
    counts = {k: sum(v.verdict == k for v in verdicts) for k in ("supported", "unsupported")}
    unsourced = sum(v.verdict == "unsourced" for v in verdicts)
    total = len(verdicts)
    shown = [v for v in verdicts if v.verdict != "supported"][:EXAMPLES_KEPT]
    summary = AuditSummary(
        memories=total,
        supported=counts["supported"],
        unsupported=counts["unsupported"],
        unsourced=unsourced,
        unsupported_share=round(counts["unsupported"] / total, 4) if total else None,
        unsourced_share=round(unsourced / total, 4) if total else None,
        examples=shown,
    )
    return summary, verdicts


def merge(parts: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One run's audit over its question batches (None when no batch had a provider)."""
    audits = [AuditSummary.model_validate(p) for p in parts if p]
    if not audits:
        return None
    total = sum(a.memories for a in audits)
    unsupported = sum(a.unsupported for a in audits)
    unsourced = sum(a.unsourced for a in audits)
    merged = AuditSummary(
        memories=total,
        supported=sum(a.supported for a in audits),
        unsupported=unsupported,
        unsourced=unsourced,
        unsupported_share=round(unsupported / total, 4) if total else None,
        unsourced_share=round(unsourced / total, 4) if total else None,
        examples=[e for a in audits for e in a.examples][:EXAMPLES_KEPT],
    )
    return merged.model_dump(mode="json")
