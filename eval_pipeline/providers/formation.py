"""A provider's memory formation as the reconcile stage runs it, and how later stages find the
same provider again.

`form_memory` feeds the provider from the graph (`ingest`), then reads back every namespace's
memories and audits them (`audit`); the result says what the reconcile stage vouches for.
`ProviderRecord` is what the stage hands on: the spec, options and model it was built with and
its storage directory, so retrieval searches exactly the store that was filled (never one
rebuilt from whatever the configuration says now).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.providers import load_provider
from eval_pipeline.providers.audit import AuditSummary, MemoryVerdict, audit
from eval_pipeline.providers.base import MemoryProvider, ProviderEnv, pins_digest
from eval_pipeline.providers.ingest import IngestProgress, IngestReport, ingest, read_graph
from eval_pipeline.reconcile.marker_audit import MAX_FOUND, SessionAudit, marker_paths

MEMORIES_FILE = "provider_memories.jsonl"


class ProviderRecord(BaseModel):
    """How to reach the provider a reconcile stage filled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str
    options: dict[str, Any]
    model: str
    storage_dir: str
    pins: dict[str, Any]
    pins_key: str

    def open(self, *, timeout_s: float | None = None) -> MemoryProvider:
        env = ProviderEnv(storage_dir=Path(self.storage_dir), model=self.model, timeout_s=timeout_s)
        return load_provider(self.spec, self.options, env)


class Formation(BaseModel):
    record: ProviderRecord
    report: IngestReport
    audit: AuditSummary
    namespaces: dict[str, list[str]]  # namespace → session ids, time order
    # Evidence-marker keys in the memories read back (`reconcile.marker_audit`): none, ever.
    memory_markers: list[str] = []

    def census(self) -> dict[str, Any]:
        """The `memory_census` shape (`reconcile.reader`) for a provider's memory."""
        return provider_census(self.record, self.report)


def provider_census(record: ProviderRecord, report: IngestReport) -> dict[str, Any]:
    done = report.skipped_done + report.ingested
    return {
        "configurations": [
            {
                "pins_key": record.pins_key,
                "pins": record.pins,
                "done": done,
                "failed": report.failed,
            }
        ],
        "pending": report.pairs_total - done - report.failed,
        "provider": record.pins.get("name"),
    }


def record_for(provider: MemoryProvider, spec: str, options: dict[str, Any]) -> ProviderRecord:
    pins = provider.pins()
    return ProviderRecord(
        spec=spec,
        options=dict(options),
        model=provider.env.model,
        storage_dir=str(provider.env.storage_dir),
        pins=pins,
        pins_key=pins_digest(pins),
    )


def form_memory(
    store: Any,
    provider: MemoryProvider,
    record: ProviderRecord,
    *,
    concurrency: int | None,
    progress: Callable[[IngestProgress], None] | None = None,
    memories_path: Path | None = None,
    session_audit: SessionAudit | None = None,
) -> Formation:
    """`session_audit` sees every session as it is about to be handed to the provider, and
    `Formation.memory_markers` names any evidence marker in the memories read back."""
    namespaces, sessions = read_graph(store)
    if session_audit is not None:
        for session in sessions.values():
            session_audit.see(session)
    report = ingest(
        provider,
        namespaces,
        sessions,
        Path(record.storage_dir),
        pins_key=record.pins_key,
        concurrency=concurrency,
        progress=progress,
    )
    memories = {ns: provider.memories(ns) for ns in namespaces}
    summary, verdicts = audit(memories, sessions, namespaces)
    if memories_path is not None:
        write_verdicts(memories_path, verdicts)
    markers = [f"{ns}: {p}" for ns, held in memories.items() for p in marker_paths(held)]
    return Formation(
        record=record,
        report=report,
        audit=summary,
        namespaces=namespaces,
        memory_markers=markers[:MAX_FOUND],
    )


def write_verdicts(path: Path, verdicts: list[MemoryVerdict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for v in verdicts:
            f.write(json.dumps(v.model_dump(mode="json"), sort_keys=True) + "\n")


def fingerprints(provider: MemoryProvider, namespaces: list[str]) -> dict[str, Any]:
    """Count and digest per namespace (None where the store cannot say)."""
    return {ns: provider.fingerprint(ns) for ns in sorted(namespaces)}
