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
    """The keys of a run over `batches` batches, added to the instance's partitions."""
    keys = batch_keys(batches)
    known = set(instance.get_dynamic_partitions(QUESTION_BATCHES.name))
    missing = [b.key for b in keys if b.key not in known]
    if missing:
        instance.add_dynamic_partitions(QUESTION_BATCHES.name, missing)
    return keys
