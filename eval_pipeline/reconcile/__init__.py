"""Reconciliation: memory formation over the injected graph, per session and per namespace.

Modules, by what they hold:
  schema          the graph schema reconcilers write (labels, properties, ids), versioned
  models          SessionInput (one session in) and SessionMemory (what a reconciler gives)
  protocol        the Reconciler protocol, BaseReconciler, this stage's errors
  none            built-in `none`: raw turns only
  extractive      built-in `extractive` (default): chunks, rule-based entities, episode
  llm_reconciler  built-in `llm`: facts + entities and a summary through the LLM layer
  consolidating   built-in `consolidating`: per-namespace, time-ordered, supersedes facts
  fact_rules      the statements `consolidating` finds (subject, attribute, value)
  memory_system   IngestSchema and MemorySystem (documented in eval_pipeline.memory_system)
  namespace       namespaces, NamespaceView and the ChangeSet a consolidation returns
  namespace_graph namespaces in the graph: read the view, consolidate, write one per txn
  memory_checks   memory-formation guarantees (duplicates, supersession, provenance)
  registry        load_reconciler: a built-in, a registered name or an import path, through
                  the plug-in registry (`eval_pipeline.plugins`, docs/plugins.md)
  sentences, chunking, entity_rules, value_rules, gazetteer, summary
                  the extractive rules, each testable on its own
  reader, writer  graph reads (statuses, sessions) and the one writer of SessionMemory
  indexes         per-dialect index statements for the reconciler schema
  runner          reconcile_pending: the batch, in parallel, resumable, with a report
"""

from eval_pipeline.reconcile.models import (
    MemoryChunk,
    MemoryEntity,
    MemoryEpisode,
    MemoryFact,
    SessionInput,
    SessionMemory,
    SessionTurn,
    entity_key,
)
from eval_pipeline.reconcile.protocol import (
    BaseReconciler,
    ReconcileError,
    Reconciler,
    ReconcilerLoadError,
    ReconcilerUnavailable,
    pins_of,
)
from eval_pipeline.reconcile.registry import BUILTINS, DEFAULT_RECONCILER, load_reconciler
from eval_pipeline.reconcile.runner import (
    ReconcileProgress,
    ReconcileReport,
    SessionFailure,
    reconcile_pending,
    reconcile_pending_async,
)
from eval_pipeline.reconcile.writer import mark_failed, write_session_memory

__all__ = [
    "BUILTINS",
    "DEFAULT_RECONCILER",
    "BaseReconciler",
    "MemoryChunk",
    "MemoryEntity",
    "MemoryEpisode",
    "MemoryFact",
    "ReconcileError",
    "ReconcileProgress",
    "ReconcileReport",
    "Reconciler",
    "ReconcilerLoadError",
    "ReconcilerUnavailable",
    "SessionFailure",
    "SessionInput",
    "SessionMemory",
    "SessionTurn",
    "entity_key",
    "load_reconciler",
    "mark_failed",
    "pins_of",
    "reconcile_pending",
    "reconcile_pending_async",
    "write_session_memory",
]
