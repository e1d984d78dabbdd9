"""The memory-system interface (implementation; documented for users in
`eval_pipeline.memory_system`, which re-exports it).

`IngestSchema` declares what a memory system puts in the graph and what of it retrieval may
search; `MemorySystem` is the base class of a namespaced memory system: per-session
extraction (shared across namespaces, cached here), per-namespace consolidation into a
`ChangeSet`, and an optional session-level layer (`reconcile`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eval_pipeline.graph import schema as graph_schema
from eval_pipeline.reconcile import schema as reconcile_schema
from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.reconcile.namespace import ChangeSet, NamespaceView
from eval_pipeline.reconcile.protocol import BaseReconciler, reconciler_pins

# What retrieval can search: the kind → (label, text property). Turns are the raw transcript:
# searched only for a memory that declares them (`none`, the raw-history baseline), so what
# is measured is the memory under test, not the transcript beside it.
SEARCHABLE_KINDS: dict[str, tuple[str, str]] = {
    "turn": (graph_schema.TURN, "text"),
    **{
        kind: (label, prop)
        for kind, (label, prop) in zip(
            ("chunk", "fact", "episode"), reconcile_schema.FULLTEXT, strict=True
        )
    },
}
DEFAULT_SEARCHABLE: tuple[str, ...] = ("chunk", "fact", "episode")
BUILTIN_PROVENANCE: tuple[tuple[str, str, str], ...] = (
    (reconcile_schema.CHUNK, "chunk_id", "FROM_TURN"),
    (reconcile_schema.FACT, "fact_id", "FROM_TURN"),
    (reconcile_schema.EPISODE, "episode_id", "COVERS"),
)
CACHE_SESSIONS = 50_000  # extractions kept in process (LongMemEval_S: ~20k unique sessions)


class IngestSchema(BaseModel):
    """What a memory system writes, declared: its version is part of the reconciler pins (so
    of every session's `reconcile_pins`, the graph's `EvalPipelineMemory` registry and the
    run manifest), and the injection schema it builds on is a comparability pin.

    - `injection_schema`: how sessions become graph data — the pipeline's own
      (:Session)-[:HAS_TURN]->(:Turn), (:Question)-[:HAYSTACK]->(:Session)
      (`eval_pipeline.graph.schema`, version `SCHEMA_VERSION`). Sessions reach the memory
      system through the session loader (`reconcile.reader.load_sessions`: turns sorted by
      index, no evidence field) and namespaces through the haystack query below.
    - `labels` / `relationship_types`: the memory it writes (the graph checks count them as
      the reconciler's; anything else is stray).
    - `searchable`: the kinds retrieval may search (full-text indexes are made for these
      only, and `fulltext` searches exactly those); `turn` (the raw transcript) only for a
      memory that is the transcript, like `none`.
    - `provenance`: (label, id property, relationship) triples: how each memory node leads
      back to its turns; evidence recall follows them (`retrieve.provenance`).
    - evidence policy: no declared name may be an evidence marker (`has_answer`,
      `holds_evidence`, answer/evidence session ids in any spelling) — refused at
      construction — and the graph's evidence check looks at what was actually written.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    injection_schema: int = graph_schema.SCHEMA_VERSION
    namespaced: bool = False
    labels: tuple[str, ...] = reconcile_schema.NODE_LABELS
    relationship_types: tuple[str, ...] = reconcile_schema.RELATIONSHIP_TYPES
    properties: tuple[str, ...] = ()  # extra properties it writes (checked by the policy)
    searchable: tuple[str, ...] = DEFAULT_SEARCHABLE
    provenance: tuple[tuple[str, str, str], ...] = BUILTIN_PROVENANCE
    haystack_statement: str = (
        f"MATCH (q:{graph_schema.QUESTION})-[:{graph_schema.HAYSTACK}]->"
        f"(s:{graph_schema.SESSION}) RETURN q.question_id AS question_id, "
        "s.session_id AS session_id, s.started_at AS started_at"
    )

    @model_validator(mode="after")
    def _policy(self) -> IngestSchema:
        unknown = sorted(set(self.searchable) - set(SEARCHABLE_KINDS))
        if unknown:
            raise ValueError(
                f"searchable kinds {unknown} unknown; retrieval can search {list(SEARCHABLE_KINDS)}"
            )
        names = [
            *((n, True) for n in self.labels),
            *((n, False) for n in (*self.relationship_types, *self.properties)),
            *((part, False) for triple in self.provenance for part in triple),
        ]
        leaks = sorted(
            {n for n, is_label in names if graph_schema.is_evidence_name(n, label=is_label)}
        )
        if leaks:
            raise ValueError(f"schema {self.name!r} declares evidence markers: {leaks}")
        if self.injection_schema != graph_schema.SCHEMA_VERSION:
            raise ValueError(
                f"schema {self.name!r} builds on injection schema {self.injection_schema}; "
                f"this pipeline injects version {graph_schema.SCHEMA_VERSION}"
            )
        return self

    def searchable_labels(self) -> set[str]:
        return {SEARCHABLE_KINDS[kind][0] for kind in self.searchable}

    def digest(self) -> str:
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def pins(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "injection_schema": self.injection_schema,
            "namespaced": self.namespaced,
            "searchable": list(self.searchable),
            "provenance": [list(p) for p in self.provenance],
            "digest": self.digest(),
        }


# The built-ins' schemas: one vocabulary (`reconcile.schema`), different declarations.
SESSION_SCHEMA = IngestSchema(
    name="eval_pipeline.session", version=str(reconcile_schema.RECONCILE_SCHEMA_VERSION)
)
NONE_SCHEMA = IngestSchema(
    name="eval_pipeline.none",
    version=str(reconcile_schema.RECONCILE_SCHEMA_VERSION),
    labels=(),
    relationship_types=(),
    searchable=("turn",),  # the raw-history baseline: retrieval over the transcript
    provenance=(),
)
NAMESPACED_SCHEMA = IngestSchema(
    name="eval_pipeline.namespaced",
    version=str(reconcile_schema.RECONCILE_SCHEMA_VERSION),
    namespaced=True,
)


class MemorySystem(BaseReconciler):
    """Base of a namespaced memory system. Implement `extract_session` and `consolidate`:

        class MyMemory(MemorySystem):
            name = "my-memory"; version = "1"
            schema = IngestSchema(name="my-memory", version="1", namespaced=True,
                                  searchable=("fact",))
            def extract_session(self, session: SessionInput) -> Any: ...   # expensive, once
            def consolidate(self, view: NamespaceView, extraction) -> ChangeSet: ...  # cheap

    `extract(session)` caches `extract_session` by the session's content, so a session in
    500 haystacks is extracted once; `consolidate` runs once per (namespace, session), in time
    order, against the namespace's memory so far. `reconcile(session)` is the session-level
    layer every namespace shares (chunks, an episode): none by default.
    """

    name = "memory-system"
    version = "0"
    namespaced = True
    schema: IngestSchema = NAMESPACED_SCHEMA

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._by_session: dict[str, str] = {}  # session id → content key, this instance's run
        self._cache_lock = threading.Lock()
        self.extractions = 0  # cache misses: sessions actually extracted

    def extract(self, session: SessionInput) -> Any:
        key = hashlib.sha256(session.model_dump_json().encode("utf-8")).hexdigest()
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self._by_session[session.session_id] = key
                return self._cache[key]
        extraction = self.extract_session(session)
        with self._cache_lock:
            self.extractions += 1
            self._cache[key] = extraction
            self._by_session[session.session_id] = key
            while len(self._cache) > CACHE_SESSIONS:
                self._cache.popitem(last=False)
        return extraction

    def extracted(self, session_id: str) -> Any | None:
        """The extraction of a session this instance already extracted, without reading the
        session again (one instance serves one run, under the graph's lease: the session's
        content cannot change meanwhile); None when it has not."""
        with self._cache_lock:
            key = self._by_session.get(session_id)
            return self._cache.get(key) if key is not None else None

    def extract_session(self, session: SessionInput) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def consolidate(self, view: NamespaceView, extraction: Any) -> ChangeSet:  # pragma: no cover
        raise NotImplementedError

    def reconcile(self, session: SessionInput) -> SessionMemory:
        return SessionMemory(session_id=session.session_id, reconciler=self.name)

    def pins(self) -> dict[str, Any]:
        return reconciler_pins(self)
