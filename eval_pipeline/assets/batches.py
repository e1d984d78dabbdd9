"""Question batches as Dagster partitions: the graph-bound assets are partitioned by batch,
and each partition runs on a graph instance of its own (`GraphStore.for_batch`).

A run of K batches materializes partitions `batch-01-of-K` … `batch-K-of-K` of
injected_graph, reconciled_graph and retrieval_results, then one scored_run over all of them.
A run of one batch is the partition `batch-01-of-01`, on the default instance.
"""

from __future__ import annotations

import hashlib
from typing import Any

import dagster as dg

from eval_pipeline.assets.artifacts import StageRecord, batch_record
from eval_pipeline.assets.graph_lease import GRAPH_STEPS
from eval_pipeline.corpus.batches import BatchKey, batch_keys
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.ops.tags import CHAIN_PARENT_TAG

QUESTION_BATCHES = dg.DynamicPartitionsDefinition(name="question_batches")
# The assets partitioned by question batch: those that read or write the graph instance.
BATCHED_ASSETS = frozenset(GRAPH_STEPS)
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


def batch_graph(context: Any, graph: GraphStore) -> GraphStore:
    """The graph instance of this execution's batch."""
    return graph.for_batch(batch_of(context))


def register_batches(instance: dg.DagsterInstance, batches: int) -> list[BatchKey]:
    """The keys of a run over `batches` batches, added to the instance's partitions."""
    keys = batch_keys(batches)
    known = set(instance.get_dynamic_partitions(QUESTION_BATCHES.name))
    missing = [b.key for b in keys if b.key not in known]
    if missing:
        instance.add_dynamic_partitions(QUESTION_BATCHES.name, missing)
    return keys


def batch_retrievals(context: Any, batches: int) -> list[StageRecord]:
    """The retrieval_results record of every batch of this run, in batch order, checked to
    belong together: one chain (when run as one), one goldens file, each graph current."""
    records = [
        batch_record(context, "retrieval_results", b.key, unpartitioned_ok=batches == 1)
        for b in batch_keys(batches)
    ]
    chain = context.run.tags.get(CHAIN_PARENT_TAG)
    if len({r.inputs["goldens"].facts.get("goldens_sha256") for r in records}) > 1:
        raise dg.Failure(
            "the batches' retrieval_results were made for different goldens: materialize "
            "every batch again"
        )
    for batch, record in zip(batch_keys(batches), records, strict=True):
        if batches > 1 and chain is not None:
            run = context.instance.get_run_by_id(record.run_id)
            theirs = run.tags.get(CHAIN_PARENT_TAG) if run is not None else None
            if theirs != chain:
                raise dg.Failure(
                    f"retrieval_results {batch.key} is from chain {theirs}, not this chain "
                    f"({chain}): that batch did not finish in this run"
                )
        if not record.facts.get("graph_current"):
            raise dg.Failure(
                f"retrieval_results {batch.key} (run {record.run_id}) retrieved nothing: "
                f"{record.facts.get('graph_current_reason')}"
            )
    return records


def merged_graph_pins(records: list[StageRecord]) -> dict[str, Any]:
    """What the graphs held when retrieval read them: one instance's pins as they are; K
    instances' backend and versions (the same for all, else a list) and one fingerprint over
    theirs, in batch order (each batch's own is in the manifest's `batches`)."""
    graphs = [r.facts.get("graph") or {} for r in records]
    if len(graphs) == 1:
        return graphs[0]
    out: dict[str, Any] = {}
    for key in ("backend", "server_version", "schema_version"):
        values = [g.get(key) for g in graphs]
        out[key] = values[0] if len(set(map(str, values))) == 1 else values
    joined = "\n".join(str(g.get("fingerprint")) for g in graphs)
    out["fingerprint"] = "batches:" + hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]
    return out


def merged_memory(records: list[StageRecord]) -> dict[str, Any]:
    """The memory census of K instances as one: configurations summed by pins key."""
    memories = [r.facts.get("memory") or {} for r in records]
    if len(memories) == 1:
        return memories[0]
    by_key: dict[str, dict[str, Any]] = {}
    for memory in memories:
        for c in memory.get("configurations") or []:
            entry = by_key.setdefault(c["pins_key"], {**c, "done": 0, "failed": 0})
            entry["done"] += c.get("done", 0)
            entry["failed"] += c.get("failed", 0)
    return {
        "configurations": sorted(by_key.values(), key=lambda e: -e["done"]),
        "pending": sum(m.get("pending", 0) for m in memories),
        "sessions": sum(m.get("sessions", 0) for m in memories),
    }


def batch_provenance(records: list[StageRecord]) -> list[dict[str, Any]]:
    """Per batch: its instance, what it held, its questions, and the runs that made it."""
    out = []
    for record in records:
        reconciled = record.find("reconciled_graph")
        injected = record.find("injected_graph")
        batch = BatchKey.model_validate(record.facts.get("batch") or ONE_BATCH.model_dump())
        out.append(
            {
                "batch": batch.key,
                "graph": record.facts.get("graph"),
                "questions": record.facts.get("questions"),
                "sessions": ((injected.facts.get("counts") or {}).get("sessions"))
                if injected
                else None,
                "runs": {
                    "injected_graph": injected.run_id if injected else None,
                    "reconciled_graph": reconciled.run_id if reconciled else None,
                    "retrieval_results": record.run_id,
                },
                "seconds": {
                    "injected_graph": injected.facts.get("seconds") if injected else None,
                    "reconciled_graph": reconciled.facts.get("seconds") if reconciled else None,
                    "retrieval_results": record.facts.get("seconds"),
                },
            }
        )
    return out
