"""A chain over K question batches, in parallel.

The corpus stages run once; then each batch's graph stages (injected_graph, reconciled_graph,
retrieval_results: partition `batch-NN-of-KK`) run in a worker process of their own, against
the batch's own graph instance, all batches at once; then one scored_run reads every batch
(and the comparison stages follow as usual). Each stage is still a Dagster run of its own in
the same instance, so the lineage shows which batch's which stage failed.

Workers are processes, not threads: injection, reconciliation and retrieval are Python work
beside each server, and one interpreter would run the batches one at a time under its lock.

Deployed (EVAL_DAGSTER_WEBSERVER names the webserver), each batch is instead a run of job
`eval_batch` submitted through the webserver's GraphQL API: the queued coordinator admits one
run per graph instance (its tag), and the run launcher gives each batch its own process,
container (DockerRunLauncher) or pod (K8sRunLauncher). The driver waits for them, then scores.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import dagster as dg

from eval_pipeline.assets.batches import BATCHED_ASSETS, register_batches
from eval_pipeline.corpus.batches import BatchKey, batch_keys
from eval_pipeline.dagster_home import ensure_graph_slots
from eval_pipeline.graph.lease import Lease, RunFinished, hold
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.ops.chain import (
    CHAIN_STAGES,
    RESOURCE_KEYS,
    ChainOutcome,
    StageOutcome,
    record_failure,
    run_stages,
)
from eval_pipeline.ops.tags import (
    BATCH_JOB_NAME,
    CHAIN_PARENT_TAG,
    GRAPH_INSTANCE_TAG,
    STAGE_JOB_NAME,
)

PARTITION_TAG = "dagster/partition"

OnStage = Callable[[int, int, StageOutcome], None]


def split_stages(stages: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(before the batches, per batch, after them): the batched stages are contiguous."""
    batched = [s for s in stages if s in BATCHED_ASSETS]
    if not batched:
        return list(stages), [], []
    first, last = stages.index(batched[0]), stages.index(batched[-1])
    return list(stages[:first]), list(stages[first : last + 1]), list(stages[last + 1 :])


def batch_tags(tags: Mapping[str, str], batch: BatchKey) -> dict[str, str]:
    """A batch's stage runs name its graph instance: the queued coordinator allows one run
    per instance (dagster.yaml), and the batches of one chain are K instances."""
    base = tags.get(GRAPH_INSTANCE_TAG, "default")
    return {**tags, GRAPH_INSTANCE_TAG: f"{base}/{batch.key}"}


def run_batched(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any],
    *,
    tags: Mapping[str, str],
    batches: int = 1,
    stages: Sequence[str] = CHAIN_STAGES,
    on_stage: OnStage | None = None,
    webserver: str | None = None,
) -> ChainOutcome:
    """Run `stages` with the batched ones over `batches` batches (ops.chain.run_stages for
    one batch): in worker processes, or as `eval_batch` runs launched through `webserver`.
    Stops before scoring when any batch failed: a scored run is all of them."""
    keys = batch_keys(batches)
    before, batched, after = split_stages(stages)
    if batches == 1 or not batched:
        return run_stages(job, instance, run_config, tags=tags, stages=stages, on_stage=on_stage)
    if instance.is_ephemeral:
        raise ValueError(
            f"a run over {batches} question batches needs a persistent Dagster instance "
            "(DAGSTER_HOME): its batches run in processes of their own"
        )
    outcome = run_stages(job, instance, run_config, tags=tags, stages=before, on_stage=on_stage)
    if outcome.failed is not None or outcome.incomplete:
        return outcome
    register_batches(instance, batches)
    ensure_graph_slots(instance, batches)
    if webserver:
        results = launch_batch_runs(webserver, instance, run_config, tags, keys, batched)
    else:
        results = _in_workers(instance, job.name, run_config, tags, keys, batched, on_stage)
    stages_done = [*outcome.stages, *(s for r in results for s in r.stages)]
    if any(r.failed is not None or r.incomplete for r in results):
        return ChainOutcome(stages=stages_done)
    rest = run_stages(job, instance, run_config, tags=tags, stages=after, on_stage=on_stage)
    return ChainOutcome(stages=[*stages_done, *rest.stages])


def _in_workers(
    instance: dg.DagsterInstance,
    job_name: str,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    keys: list[BatchKey],
    stages: list[str],
    on_stage: OnStage | None,
) -> list[ChainOutcome]:
    """Each batch in a worker process of its own (one pool per batch: a worker that dies
    breaks only its own pool, never the other batches')."""
    context = multiprocessing.get_context("spawn")  # no forked driver, lock or thread state
    with contextlib.ExitStack() as stack:
        futures = []
        for batch in keys:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=1, mp_context=context))
            futures.append(
                pool.submit(
                    batch_worker,
                    instance.get_ref(),
                    job_name,
                    dict(run_config),
                    batch_tags(tags, batch),
                    stages,
                    batch.model_dump(),
                    on_stage is not None,
                )
            )
        outcomes = []
        for future, batch in zip(futures, keys, strict=True):
            try:
                outcomes.append(ChainOutcome.model_validate(future.result()))
            except Exception as exc:  # noqa: BLE001 - a dead worker is its batch's failure
                outcomes.append(_died(instance, job_name, tags, batch, stages, exc))
        return outcomes


def _died(
    instance: dg.DagsterInstance,
    job_name: str,
    tags: Mapping[str, str],
    batch: BatchKey,
    stages: list[str],
    exc: BaseException,
) -> ChainOutcome:
    """A worker that died (killed, out of memory): its batch fails at the stage it was in,
    that stage's run is marked failed (it would read as running forever), and the failure is
    recorded as any stage's is."""
    error = f"the batch worker died ({type(exc).__name__}: {exc or 'no message'})"
    asset, run_ids = stages[0], []
    chain = tags.get(CHAIN_PARENT_TAG)
    runs = (
        instance.get_runs(
            dg.RunsFilter(tags={CHAIN_PARENT_TAG: chain, PARTITION_TAG: batch.key}), limit=1
        )
        if chain
        else []
    )
    if runs:
        run = runs[0]
        asset = _planned_asset(instance, run.run_id) or asset
        run_ids = [run.run_id]
        if not run.is_finished:
            instance.report_run_failed(run, message=error)
    outcome = _failed(batch, [asset], error, run_ids[0] if run_ids else None)
    record_failure(outcome.stages[0], tags, job_name)
    return outcome


def _planned_asset(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The asset a stage run was materializing or checking, from its planned events."""
    for kind in (
        dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED,
    ):
        for record in instance.get_records_for_run(run_id, of_type=kind).records:
            event = record.event_log_entry.dagster_event
            key = getattr(event, "asset_key", None) if event is not None else None
            if key is not None:
                return key.to_user_string()
    return None


def _failed(
    batch: BatchKey, stages: list[str], error: str, run_id: str | None = None
) -> ChainOutcome:
    return ChainOutcome(
        stages=[
            StageOutcome(
                asset=stages[0],
                batch=batch.key,
                status="failed",
                run_ids=[run_id] if run_id else [],
                error=error,
            )
        ]
    )


def batch_worker(
    instance_ref: Any,
    job_name: str,
    run_config: dict[str, Any],
    tags: dict[str, str],
    stages: list[str],
    batch: dict[str, Any],
    progress: bool,
) -> dict[str, Any]:
    """One batch's stages, in a worker process (module-level: spawn pickles it by name)."""
    key = BatchKey.model_validate(batch)

    def say(i: int, n: int, stage: StageOutcome) -> None:
        print(f"[{key.key}] {stage.progress(i, n)}", file=sys.stderr, flush=True)

    instance = dg.DagsterInstance.from_ref(instance_ref)
    on_stage = say if progress else None
    outcome = run_batch(instance, job_name, run_config, tags, stages, key, on_stage)
    return outcome.model_dump(mode="json")


def run_batch(
    instance: dg.DagsterInstance,
    job_name: str,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    stages: list[str],
    batch: BatchKey,
    on_stage: OnStage | None,
) -> ChainOutcome:
    """One batch's stages as partition `batch`, each stage outcome naming its batch: what a
    worker process and an `eval_batch` run both do."""
    from eval_pipeline.definitions import defs

    outcome = run_stages(
        defs.resolve_job_def(job_name),
        instance,
        run_config,
        tags=tags,
        stages=stages,
        on_stage=on_stage,
        batch=batch,
    )
    for stage in outcome.stages:
        stage.batch = batch.key
    return outcome


@contextlib.contextmanager
def holding_instances(
    graph: GraphStore,
    batches: int,
    lease: Lease,
    *,
    wait_s: float,
    run_finished: RunFinished,
) -> Iterator[list[GraphStore]]:
    """Every batch's graph instance started (or reached), claimed, and its lease held for
    the block under one holder; a refusal on any releases those already taken."""
    stores = [graph.for_batch(batch) for batch in batch_keys(batches)]
    # K embedded servers start at once (each JVM takes seconds), then each is claimed.
    with ThreadPoolExecutor(max_workers=len(stores)) as starting:
        list(starting.map(lambda store: store.ensure_running(), stores))
    with contextlib.ExitStack() as stack:
        for store in stores:
            store.claim()
            stack.enter_context(
                hold(
                    store,
                    lease,
                    wait_s=wait_s,
                    run_finished=run_finished,
                    release_after=True,
                    where=store.where,
                )
            )
        yield stores


# --- deployed: one Dagster run per batch, through the run launcher ---------------------------

OUTCOME_META = "outcome"


BATCH_OP_NAME = "run_batch_stages"


@dg.op(
    name=BATCH_OP_NAME,
    # A schema, not a Config class: this module's annotations are strings (future import).
    config_schema={
        "batch": dg.Field(str, description="the question batch, e.g. batch-02-of-04"),
        "stages": dg.Field([str], description="its stages, in chain order"),
    },
    required_resource_keys=set(RESOURCE_KEYS),
    description="One question batch's graph stages (each in a run of its own, then its "
    "checks), launched by an eval_chain run over several batches; it holds the leases.",
)
def run_batch_stages(context):  # unannotated: Dagster cannot read string annotations
    batch = BatchKey.parse(context.op_config["batch"])
    tags = {k: v for k, v in context.run.tags.items() if k.startswith("eval_pipeline/")}

    def log(i: int, n: int, stage: StageOutcome) -> None:
        line = f"[{batch.key}] {stage.progress(i, n)}"
        (context.log.info if stage.status == "ok" else context.log.error)(line)

    config = {k: v for k, v in (context.run_config or {}).items() if k in ("resources", "loggers")}
    outcome = run_batch(
        context.instance, STAGE_JOB_NAME, config, tags, context.op_config["stages"], batch, log
    )
    report = {OUTCOME_META: dg.MetadataValue.json(outcome.model_dump(mode="json"))}
    if outcome.failed is not None:
        raise dg.Failure(
            f"stage {outcome.failed.name} failed: {outcome.failed.error}", metadata=report
        )
    return dg.Output(None, metadata=report)


def launch_batch_runs(
    webserver: str,
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    keys: list[BatchKey],
    stages: list[str],
    *,
    poll_s: float = 2.0,
) -> list[ChainOutcome]:
    """Submit one `eval_batch` run per batch through the webserver's GraphQL API (the
    official client), wait until every one has finished, and read each one's outcome."""
    from urllib.parse import urlsplit

    from dagster_graphql import DagsterGraphQLClient

    url = urlsplit(webserver)
    client = DagsterGraphQLClient(
        url.hostname or "localhost", port_number=url.port, use_https=url.scheme == "https"
    )
    run_ids = []
    for batch in keys:
        config = {
            **run_config,
            "ops": {BATCH_OP_NAME: {"config": {"batch": batch.key, "stages": list(stages)}}},
        }
        run_tags = {**batch_tags(tags, batch), "dagster/max_retries": "0"}
        run_ids.append(
            client.submit_job_execution(BATCH_JOB_NAME, run_config=config, tags=run_tags)
        )
    while True:
        runs = [instance.get_run_by_id(run_id) for run_id in run_ids]
        if all(run is not None and run.is_finished for run in runs):
            break
        time.sleep(poll_s)
    return [
        _launched_outcome(instance, run_id, batch, stages)
        for run_id, batch in zip(run_ids, keys, strict=True)
    ]


def _launched_outcome(
    instance: dg.DagsterInstance, run_id: str, batch: BatchKey, stages: list[str]
) -> ChainOutcome:
    """What an `eval_batch` run reported (its op's output or failure metadata), or a failed
    first stage when the run ended without reporting (crashed, canceled)."""
    for kind in (dg.DagsterEventType.STEP_OUTPUT, dg.DagsterEventType.STEP_FAILURE):
        for record in instance.get_records_for_run(run_id, of_type=kind).records:
            event = record.event_log_entry.dagster_event
            data = event.step_output_data if kind == dg.DagsterEventType.STEP_OUTPUT else None
            meta = data.metadata if data is not None else {}
            if kind == dg.DagsterEventType.STEP_FAILURE:
                failure = event.step_failure_data.user_failure_data
                meta = failure.metadata if failure is not None else {}
            if OUTCOME_META in meta:
                return ChainOutcome.model_validate(meta[OUTCOME_META].value)
    run = instance.get_run_by_id(run_id)
    status = run.status.value if run is not None else "missing"
    return _failed(
        batch, stages, f"batch run {run_id} ended {status} without reporting its stages", run_id
    )
