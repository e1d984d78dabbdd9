"""Question batches as Dagster partitions: the graph-bound assets are partitioned by batch,
and each partition runs on a graph instance of its own (`GraphStore.for_batch`).

A run of K batches materializes partitions `batch-01-of-K` … `batch-K-of-K` of
injected_graph, reconciled_graph and retrieval_results, then one scored_run over all of them.
A run of one batch is the partition `batch-01-of-01`, on the default instance.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from eval_pipeline.corpus.batches import BatchKey, batch_keys

QUESTION_BATCHES = dg.DynamicPartitionsDefinition(name="question_batches")
ONE_BATCH = BatchKey(index=1, batches=1)
_S = dg.DagsterRunStatus
NOT_FINISHED = (_S.QUEUED, _S.NOT_STARTED, _S.STARTING, _S.STARTED, _S.CANCELING)


def batch_of(context: Any) -> BatchKey:
    """The batch an execution (asset or check) works on: its partition's; a materialization
    without a partition (a script's `dg.materialize`) is a run of one batch."""
    if not getattr(context, "has_partition_key", False):
        return ONE_BATCH
    try:
        return BatchKey.parse(context.partition_key)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from None


def register_batches(instance: dg.DagsterInstance, batches: int) -> list[BatchKey]:
    """The keys of a run over `batches` batches, added to the instance's partitions; another
    K's keys are removed unless a run still in progress uses them (`partitions_in_use`), so
    the UI's partition picker ("Materialize all" → All) offers the current K's batches only,
    never K=1's and K=2's mixed. Their materializations stay in the event log."""
    keys = batch_keys(batches)
    known = set(instance.get_dynamic_partitions(QUESTION_BATCHES.name))
    missing = [b.key for b in keys if b.key not in known]
    if missing:
        instance.add_dynamic_partitions(QUESTION_BATCHES.name, missing)
    stale = known - {b.key for b in keys} - partitions_in_use(instance)
    for key in sorted(stale):
        instance.delete_dynamic_partition(QUESTION_BATCHES.name, key)
    return keys


def partitions_in_use(instance: dg.DagsterInstance) -> set[str]:
    """Batch keys a run not yet finished works on: its partition, or every batch of a chain
    still running (its later stage runs will name them)."""
    from eval_pipeline.assets.tags import CHAIN_JOB_NAME, PARTITION_TAG

    busy = instance.get_runs(dg.RunsFilter(statuses=list(NOT_FINISHED)))
    used: set[str] = set()
    for run in busy:
        if run.tags.get(PARTITION_TAG):
            used.add(run.tags[PARTITION_TAG])
        if run.job_name == CHAIN_JOB_NAME:
            corpus = ((run.run_config or {}).get("resources") or {}).get("corpus") or {}
            count = int((corpus.get("config") or {}).get("batches") or 1)
            used.update(b.key for b in batch_keys(count))
    return used
