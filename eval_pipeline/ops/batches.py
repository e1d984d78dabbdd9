"""A chain over K question batches: each batch's graph stages side by side.

The corpus stages run once; then each batch's graph stages (injected_graph, reconciled_graph,
retrieval_results: partition `batch-NN-of-KK`, on the batch's own graph instance) run in a
process of their own, all batches at once; then one scored_run reads every batch. Each stage
is still a Dagster run of its own, so the lineage shows which batch's which stage failed.

Where a batch runs: locally, in a worker process (processes, not threads: injection,
reconciliation and retrieval are Python work beside each server, and one interpreter would
run the batches one at a time under its lock; one pool per batch, so a worker that dies takes
only its own batch down). Deployed (EVAL_DAGSTER_WEBSERVER names the webserver), as a run of
job `eval_batch` submitted through the webserver's GraphQL API: the queued coordinator admits
one run per graph instance (its tag) and the run launcher gives each batch its own process,
container or pod. Either way a batch runs `run_batch`.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import dagster as dg

from eval_pipeline import interrupts, progress
from eval_pipeline.assets.batches import ONE_BATCH
from eval_pipeline.assets.failure_log import record_failure
from eval_pipeline.assets.graph_lease import GRAPH_STEPS
from eval_pipeline.assets.tags import (
    BATCH_JOB_NAME,
    CHAIN_TAG,
    GRAPH_INSTANCE_TAG,
    PARTITION_TAG,
    STAGE_TAG,
)
from eval_pipeline.corpus.batches import BatchKey, batch_keys
from eval_pipeline.dagster_home import ensure_graph_slots
from eval_pipeline.ops.stages import OUTCOME_META, StageOutcome, run_stages

Progress = Callable[[int, int, StageOutcome], None]


def split_stages(stages: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(before the batches, per batch, after them): the graph stages are contiguous."""
    batched = [s for s in stages if s in GRAPH_STEPS]
    if not batched:
        return list(stages), [], []
    first, last = stages.index(batched[0]), stages.index(batched[-1])
    return list(stages[:first]), list(stages[first : last + 1]), list(stages[last + 1 :])


def batch_tags(tags: Mapping[str, str], batch: BatchKey) -> dict[str, str]:
    """A batch's runs name its graph instance: the queued coordinator allows one run per
    instance (dagster.yaml), and the batches of one chain are K instances."""
    return {**tags, GRAPH_INSTANCE_TAG: f"default/{batch.key}"}


def run_batched(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    stages: Sequence[str],
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    batches: int,
    progress: Progress,
    webserver: str | None = None,
    before_graph: Callable[[], None] = lambda: None,
) -> list[StageOutcome]:
    """Run `stages`, the graph ones once per batch; stop before scoring when any batch failed
    (a scored run is all of them). `before_graph` is called once the stages before the graph
    ones have succeeded, before the first graph stage (the chain takes its leases there)."""
    before, batched, after = split_stages(stages)
    n = len(before) + batches * len(batched) + len(after)
    done: list[StageOutcome] = []

    def note(stage: StageOutcome) -> None:
        done.append(stage)
        progress(len(done), n, stage)

    def sequence(names: Sequence[str], batch: BatchKey | None = None) -> bool:
        ran = run_stages(job, instance, names, run_config, tags, note, batch or ONE_BATCH)
        return not ran or not ran[-1].stopped

    if not batched:
        sequence(stages)
        return done
    if batches == 1:
        if sequence(before):
            before_graph()
            sequence([*batched, *after])
        return done
    with Workers(batches if not webserver and not instance.is_ephemeral else 0) as workers:
        # The batch workers start (interpreter, imports, the stage job) while the corpus
        # stages run: their start-up no longer sits between the corpus and the batches.
        if not sequence(before):
            return done
        before_graph()
        if instance.is_ephemeral:
            raise ValueError(
                f"a run over {batches} question batches needs a persistent Dagster instance "
                "(DAGSTER_HOME): its batches run in processes of their own"
            )
        ensure_graph_slots(instance, batches)
        keys = batch_keys(batches)
        if webserver:
            results = launch_batch_runs(webserver, instance, run_config, tags, keys, batched)
        else:
            results = workers.run(instance, run_config, tags, keys, batched)
    done.extend(s for r in results for s in r)  # each worker printed its own lines
    if all(r and not r[-1].stopped for r in results):
        sequence(after)
    return done


def run_batch(
    instance: dg.DagsterInstance,
    stages: Sequence[str],
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    batch: BatchKey,
    say: Callable[[str], None],
) -> list[StageOutcome]:
    """One batch's stages as partition `batch`: what a worker process and an `eval_batch`
    run both do."""
    from eval_pipeline.assets.jobs import stage_job

    count = len(stages)

    def note(stage: StageOutcome) -> None:
        say(stage.progress(len(seen) + 1, count))
        seen.append(stage)

    seen: list[StageOutcome] = []
    return run_stages(stage_job(), instance, stages, run_config, tags, note, batch)


class Workers:
    """One worker process per batch, each in a pool of its own (a worker that dies breaks
    only its own pool, never the other batches'). They are spawned, and warmed by
    `warm_worker`, when the block begins, so they start while the driver still runs the
    corpus stages; `run` hands each its batch. Leaving the block ends them (at once when they
    were never used: a corpus stage failed)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._pools: list[ProcessPoolExecutor] = []
        self._used = False

    def __enter__(self) -> Workers:
        context = multiprocessing.get_context("spawn")  # no forked driver, lock or thread state
        for _ in range(self.count):
            pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
            pool.submit(warm_worker)  # its failure (if any) surfaces as the batch's own
            self._pools.append(pool)
        return self

    def __exit__(self, *exc: object) -> None:
        for pool in self._pools:
            # Unused (a corpus stage failed, an interrupt): never wait for a warm-up to end.
            pool.shutdown(wait=self._used, cancel_futures=not self._used)

    def run(
        self,
        instance: dg.DagsterInstance,
        run_config: Mapping[str, Any],
        tags: Mapping[str, str],
        keys: list[BatchKey],
        stages: list[str],
    ) -> list[list[StageOutcome]]:
        """Each batch's stages in its worker, all at once; each batch's outcomes."""
        self._used = True
        futures = []
        for pool, batch in zip(self._pools, keys, strict=True):
            try:
                futures.append(
                    pool.submit(
                        batch_worker,
                        instance.get_ref(),
                        stages,
                        dict(run_config),
                        batch_tags(tags, batch),
                        batch.key,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - its worker died warming up
                futures.append(exc)
        outcomes = []
        for future, batch in zip(futures, keys, strict=True):
            try:
                if isinstance(future, Exception):
                    raise future
                outcomes.append([StageOutcome.model_validate(s) for s in future.result()])
            except Exception as exc:  # noqa: BLE001 - a dead worker is its batch's failure
                error = f"the batch worker died ({type(exc).__name__}: {exc or 'no message'})"
                outcomes.append([_batch_failed(instance, tags, batch, stages, error)])
        return outcomes


def warm_worker() -> None:
    """What every batch's first stage would otherwise import and build in its worker, done
    while the corpus stages run: Dagster and the assets, the stage job, the graph client."""
    import neo4j  # noqa: F401

    from eval_pipeline.assets.jobs import stage_job

    stage_job()


def batch_worker(
    instance_ref: Any,
    stages: list[str],
    run_config: dict[str, Any],
    tags: dict[str, str],
    batch: str,
) -> list[dict[str, Any]]:
    """One batch's stages, in a worker process (module-level: spawn pickles it by name)."""
    instance = dg.DagsterInstance.from_ref(instance_ref)
    progress.plain_only()  # beside the other batches on one terminal: no updating line

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    key = BatchKey.parse(batch)
    # Ctrl-C reaches every worker of the terminal's process group: each stops between stages.
    with interrupts.watch(), interrupts.deferred():
        outcome = run_batch(instance, stages, run_config, tags, key, say)
    return [s.model_dump(mode="json") for s in outcome]


def _batch_failed(
    instance: dg.DagsterInstance,
    tags: Mapping[str, str],
    batch: BatchKey,
    stages: list[str],
    error: str,
) -> StageOutcome:
    """A batch that ended without reporting (its worker or its run killed, out of memory):
    it fails at the stage it was in, that stage's run is marked failed (it would read as
    running forever), and the failure is recorded as any stage's is."""
    runs = instance.get_runs(
        dg.RunsFilter(tags={CHAIN_TAG: tags[CHAIN_TAG], PARTITION_TAG: batch.key}), limit=1
    )
    asset, run_id = stages[0], None
    if runs:
        run = runs[0]
        run_id = run.run_id
        asset = run.tags.get(STAGE_TAG, asset)
        if not run.is_finished:
            instance.report_run_failed(run, message=error)
        record_failure(instance.get_run_by_id(run.run_id), assets=[asset], error=error)
    return StageOutcome(asset=asset, batch=batch.key, status="failed", run_id=run_id, error=error)


# --- deployed: one Dagster run per batch, through the run launcher ---------------------------


@dg.op(
    name="run_batch_stages",
    config_schema={
        "batch": dg.Field(str, description="the question batch, e.g. batch-02-of-04"),
        "stages": dg.Field([str], description="its stages, in chain order"),
    },
    description="One question batch's graph stages (each in a run of its own, with its "
    "checks), launched by an eval_chain run over several batches; it holds the leases.",
)
def run_batch_stages(context):  # unannotated: Dagster cannot read string annotations
    batch = BatchKey.parse(context.op_config["batch"])
    tags = {k: v for k, v in context.run.tags.items() if k.startswith("eval_pipeline/")}
    config = {k: v for k, v in (context.run_config or {}).items() if k in ("resources", "loggers")}
    outcome = run_batch(
        context.instance,
        context.op_config["stages"],
        config,
        tags,
        batch,
        context.log.info,
    )
    data = [s.model_dump(mode="json") for s in outcome]
    report = {OUTCOME_META: dg.MetadataValue.json(data)}
    failed = next((s for s in outcome if s.stopped), None)
    if failed is not None:
        raise dg.Failure(f"stage {failed.name} failed: {failed.error}", metadata=report)
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
) -> list[list[StageOutcome]]:
    """Submit one `eval_batch` run per batch through the webserver's GraphQL API (the
    official client), wait until every one has finished, and read each one's outcome."""
    from urllib.parse import urlsplit

    from dagster_graphql import DagsterGraphQLClient

    url = urlsplit(webserver)
    client = DagsterGraphQLClient(
        url.hostname or "localhost", port_number=url.port, use_https=url.scheme == "https"
    )
    run_ids = [
        client.submit_job_execution(
            BATCH_JOB_NAME,
            run_config={
                **run_config,
                "ops": {"run_batch_stages": {"config": {"batch": b.key, "stages": stages}}},
            },
            tags={**batch_tags(tags, b), "dagster/max_retries": "0"},
        )
        for b in keys
    ]
    while not all(
        (run := instance.get_run_by_id(run_id)) is not None and run.is_finished
        for run_id in run_ids
    ):
        time.sleep(poll_s)
    return [
        _launched(instance, tags, run_id, b, stages)
        for run_id, b in zip(run_ids, keys, strict=True)
    ]


def _launched(
    instance: dg.DagsterInstance,
    tags: Mapping[str, str],
    run_id: str,
    batch: BatchKey,
    stages: list[str],
) -> list[StageOutcome]:
    """What an `eval_batch` run reported (its op's output or failure metadata), or a failed
    first stage when the run ended without reporting (crashed, canceled)."""
    for kind in (dg.DagsterEventType.STEP_OUTPUT, dg.DagsterEventType.STEP_FAILURE):
        for record in instance.get_records_for_run(run_id, of_type=kind).records:
            event = record.event_log_entry.dagster_event
            if kind == dg.DagsterEventType.STEP_OUTPUT:
                meta = event.step_output_data.metadata
            else:
                failure = event.step_failure_data.user_failure_data
                meta = failure.metadata if failure is not None else {}
            if OUTCOME_META in meta:
                return [StageOutcome.model_validate(s) for s in meta[OUTCOME_META].value]
    run = instance.get_run_by_id(run_id)
    status = run.status.value if run is not None else "missing"
    error = f"batch run {run_id} ended {status} without reporting its stages"
    return [_batch_failed(instance, tags, batch, stages, error)]
