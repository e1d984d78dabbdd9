"""The memory-system interface: how a team plugs its own agent memory into the evaluation.

A memory system is one class, loaded by import path like any reconciler
(`eval-pipeline run --memory mypkg.memory:MyMemory`; its constructor's keyword options in a
`--config` file's `reconcile: {options: {key: value}}`, which has no flag). A system that
owns its storage is a provider instead (`eval_pipeline.providers`, docs/memory-systems.md).
It has three
parts; the pipeline owns everything around them (injection, scheduling, the graph writes, the
checks, retrieval, scoring).

1. **The ingest schema** (`IngestSchema`, a class attribute `schema`): a name and version,
   which labels, relationship types and properties it writes, which of its texts retrieval may
   search (`searchable`: chunk, fact, episode; `turn`, the raw transcript, only for a memory that
   is the transcript), and how each memory node leads
   back to its turns (`provenance`). Sessions become graph data the pipeline's way
   (`injection_schema`: Session/Turn/Question, `eval_pipeline.graph.schema`), reach the
   memory system through the session loader (turns in order, no evidence field) and are
   grouped into namespaces by the haystack query. Evidence markers never reach the graph: a
   schema declaring one is refused, and the graph's evidence check reads what was written.
   The schema's pins (version, digest) join the reconciler pins, so they are in every
   session's `reconcile_pins`, the graph's `EvalPipelineMemory` registry (memory made under
   another schema version is redone, never kept) and the run manifest; `eval-pipeline
   compare` shows a schema change as what changed, and refuses runs whose injection schema
   differs (`graph.schema_version`, a comparability pin).

2. **Reconciliation with graph access** (`MemorySystem`):
   - `extract_session(session)`: the expensive part, per session, independent of whose
     memory it is. `MemorySystem.extract` caches it by the session's content: a distractor
     session in 500 haystacks is extracted once.
   - `consolidate(view, extraction) -> ChangeSet`: the cheap part, once per (namespace,
     session), sessions in time order. A namespace is one memory owner: one LongMemEval
     question is one user's history (`user:<question_id>`), tier 2 is one organisation
     (`org:acme`), see `namespace_of`. `view` (`NamespaceView`) is the namespace's memory so
     far (read from the graph when consolidation resumes). The change set upserts entities
     (with aliases), adds facts, supersedes a fact (`invalid_at`, `superseded_by`: it stays,
     as history) or invalidates one, and merges entities. The pipeline applies it and writes
     the namespace in one transaction (`reconcile.namespace_graph`); no two namespaces share
     an entity or a fact.
   - `reconcile(session) -> SessionMemory` (optional): a session-level layer shared by every
     namespace (chunks, an episode), written by the one session writer.
   A session-level system (no namespaces) subclasses `BaseReconciler` and implements only
   `reconcile` (`eval_pipeline.reconcile.protocol`); the built-ins `none`, `extractive` and
   `llm` are that kind, `consolidating` is a `MemorySystem`. All declare their schema.

3. **Retrieval** over what the schema declares searchable: full-text indexes are built for
   the declared kinds only, and the `fulltext` retriever searches the indexes it finds (the
   question's namespace only, for facts; current facts before the ones they superseded).
   Another retriever (`--retriever graph_agent` or `pkg.mod:Class`, `retrieve.protocol`)
   reads the same graph. Whatever text a retriever returns, an item naming memory nodes
   (`RetrievedItem.node_ids`) counts for the turns their provenance edges reach, so a system
   that rewrites text is scored on where its memory came from.

The checks on `reconciled_graph` hold every memory system to the same guarantees: no duplicate
entity within a namespace, every superseded fact has its successor, every fact and chunk has
provenance to its own session's turns. `examples/notes_memory/` is a complete plug-in with its
own schema and consolidation, run end to end in the test suite.
"""

from eval_pipeline.reconcile.memory_system import (
    NAMESPACED_SCHEMA,
    NONE_SCHEMA,
    SEARCHABLE_KINDS,
    SESSION_SCHEMA,
    IngestSchema,
    MemorySystem,
)
from eval_pipeline.reconcile.models import SessionInput, SessionMemory, SessionTurn, entity_key
from eval_pipeline.reconcile.namespace import (
    AddFact,
    Change,
    ChangeError,
    ChangeSet,
    InvalidateFact,
    MergeEntities,
    NamespaceEntity,
    NamespaceFact,
    NamespaceView,
    SupersedeFact,
    UpsertEntity,
    namespace_of,
    scoped_fact_id,
)
from eval_pipeline.reconcile.protocol import BaseReconciler

__all__ = [
    "NAMESPACED_SCHEMA",
    "NONE_SCHEMA",
    "SEARCHABLE_KINDS",
    "SESSION_SCHEMA",
    "AddFact",
    "BaseReconciler",
    "Change",
    "ChangeError",
    "ChangeSet",
    "IngestSchema",
    "InvalidateFact",
    "MemorySystem",
    "MergeEntities",
    "NamespaceEntity",
    "NamespaceFact",
    "NamespaceView",
    "SessionInput",
    "SessionMemory",
    "SessionTurn",
    "SupersedeFact",
    "UpsertEntity",
    "entity_key",
    "namespace_of",
    "scoped_fact_id",
]
