"""The chain: each stage a Dagster run of its own, driven by one op (`eval_chain`).

Why stage by stage: Dagster OSS reads an asset as Failed when the latest run that *planned*
it failed (1.13.27 stores no asset-failure events outside Dagster+, so the status is derived
from that run: dagster-io/dagster#28789, still open). Run as one run, a corpus error turned
every asset of the chain red. Run stage by stage — each asset with its own checks, in one run
of the assets' job `eval_stage` — only the stage that failed reads failed; the stages after
it were never planned and read as they were. A failed blocking check stops the chain as
Dagster's blocking checks would (`scored_run_complete` failing means the run is incomplete,
not broken: the bundle exists).

`eval_chain` is what the Launchpad, the nightly schedule and `eval-pipeline run` launch: its
one op checks every option (preflight) before anything runs, claims and leases every
question batch's graph instance (an embedded server that is down starts while the corpus
stages run, and is leased before the first graph stage), runs the stages, the K batches'
graph stages side by side
(`batches.py`), and the repeats, and fails naming the stage that failed. Its outcome (a
`ChainOutcome`) is in the op's output or failure metadata, for the CLI to print.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg
from pydantic import BaseModel, Field

from eval_pipeline import build, interrupts
from eval_pipeline.assets.batches import register_batches
from eval_pipeline.assets.graph_lease import run_finished
from eval_pipeline.assets.jobs import asset_order, stage_job
from eval_pipeline.assets.tags import CHAIN_TAG, TRIGGER_TAG
from eval_pipeline.config import RunConfig
from eval_pipeline.corpus.batches import batch_keys
from eval_pipeline.graph import server
from eval_pipeline.graph.errors import ForeignDataError, GraphError
from eval_pipeline.graph.lease import Lease, LeaseHeld, hold_all
from eval_pipeline.ops.batches import run_batched
from eval_pipeline.ops.pool import release_dead
from eval_pipeline.ops.stages import OUTCOME_META, StageOutcome, run_stages

# Repeats re-run only what can vary between runs of one configuration (retrieval, reading,
# judging) over the same graph, and with `repeat.reconcile` the reconciliation too.
REPEAT_STAGES = ("retrieval_results", "scored_run")
NOISE_FLOOR = "noise_floor"


class RepeatOutcome(BaseModel):
    """One pass of the chain (the first, or a repeat): its stages and its bundle."""

    stages: list[StageOutcome] = Field(default_factory=list)

    @property
    def failed(self) -> StageOutcome | None:
        return next((s for s in self.stages if s.status in ("failed", "check_failed")), None)

    @property
    def incomplete(self) -> bool:
        return any(s.status == "incomplete" for s in self.stages)

    @property
    def interrupted(self) -> StageOutcome | None:
        return next((s for s in self.stages if s.status == "interrupted"), None)

    @property
    def run_dir(self) -> str | None:
        scored = next((s for s in self.stages if s.asset == "scored_run"), None)
        return scored.metadata.get("run_dir") if scored is not None else None


class ChainOutcome(BaseModel):
    repeats: list[RepeatOutcome] = Field(default_factory=list)
    refused: str | None = None  # the graph instance is held by another chain, or foreign
    error: str | None = None  # the chain stopped before a stage (preflight, a graph error)
    salt: str | None = None
    chain: str | None = None  # the chain's id: what `eval-pipeline run --resume` takes

    @property
    def failed(self) -> StageOutcome | None:
        return next((r.failed for r in self.repeats if r.failed is not None), None)

    @property
    def incomplete(self) -> bool:
        return any(r.incomplete for r in self.repeats)

    @property
    def interrupted(self) -> StageOutcome | None:
        return next((r.interrupted for r in self.repeats if r.interrupted is not None), None)


def chain_stages(job: dg.JobDefinition, defined: list[dg.AssetKey]) -> tuple[str, ...]:
    """The chain's assets in dependency order, longmemeval_upstream and all that follows it;
    assets that do not depend on each other in the order they are `defined`."""
    graph = job.asset_layer.asset_graph
    reached = {dg.AssetKey("longmemeval_upstream")}
    for key in graph.toposorted_asset_keys:
        if graph.get(key).parent_keys & reached:
            reached.add(key)
    ordered: list[dg.AssetKey] = []
    while len(ordered) < len(reached):
        ready = next(
            k
            for k in defined
            if k in reached
            and k not in ordered
            and graph.get(k).parent_keys & reached <= set(ordered)
        )
        ordered.append(ready)
    return tuple(k.to_user_string() for k in ordered)


def stage_run_config(run: RunConfig, loggers: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run config of every stage run: each section as its resource's config, and the
    chain run's own loggers (the CLI shows Dagster's console lines only with --verbose)."""
    return {"resources": run.resources_config(), **({"loggers": loggers} if loggers else {})}


def drive(
    instance: dg.DagsterInstance,
    run: RunConfig,
    *,
    chain: str,
    trigger: str,
    progress: Callable[[int, int, StageOutcome], None],
    loggers: Mapping[str, Any] | None = None,
    webserver: str | None = None,
) -> ChainOutcome:
    """The whole chain under one lease holder `chain`: the stages, then the repeats."""
    job = stage_job()
    # Fresh per chain, and the same when the chain is resumed (its repeats' cache entries).
    salt = run.repeat.salt or hashlib.sha256(chain.encode()).hexdigest()[:8]
    tags = {CHAIN_TAG: chain, TRIGGER_TAG: trigger}
    outcome = ChainOutcome(salt=salt if run.repeat.count > 1 else None, chain=chain)
    # A run killed earlier may still hold the graph pool's slot: freed, said (`ops/pool.py`).
    release_dead(instance, lambda line: print(line, file=sys.stderr, flush=True))
    store = build.graph_store(run.graph)
    register_batches(instance, run.corpus.batches)
    holding = False
    try:
        stores = [store.for_batch(b) for b in batch_keys(run.corpus.batches)]
        # Ctrl-C is seen wherever it lands and acted on between stages (`interrupts`).
        with (
            interrupts.watch(),
            interrupts.deferred(),
            ThreadPoolExecutor(max_workers=len(stores)) as starting,
            contextlib.ExitStack() as held,
        ):
            # Instances already up are claimed and leased before any stage. An embedded
            # server that is down (nobody can be using it: a holder's graph stages need it up)
            # starts, a JVM each, seconds, while the corpus stages run, and all K are claimed
            # and leased before the first graph stage, before any is wiped (`hold_all`).
            cold = [s for s in stores if s.embedded and not server.running_info(s.data_dir)]
            started = [starting.submit(s.ensure_running) for s in stores]

            def hold_instances() -> None:
                nonlocal holding
                if holding:
                    return
                for future in started:
                    future.result()  # a server that could not start: its GraphError
                held.enter_context(
                    hold_all(
                        stores,
                        Lease(holder=chain, run_id=chain, what="eval_chain run"),
                        wait_s=run.graph.wait_s,
                        run_finished=run_finished(instance),
                    )
                )
                holding = True

            if not cold:
                hold_instances()
            stages = chain_stages(job, asset_order())
            for k in range(1, run.repeat.count + 1):
                this = run.for_repeat(k, salt) if run.repeat.count > 1 else run
                repeat = RepeatOutcome(
                    stages=run_batched(
                        job,
                        instance,
                        stages,
                        stage_run_config(this, loggers),
                        tags,
                        batches=run.corpus.batches,
                        progress=progress,
                        webserver=webserver,
                        before_graph=hold_instances,
                    )
                )
                outcome.repeats.append(repeat)
                if repeat.failed is not None or repeat.interrupted is not None:
                    break
                stages = (
                    ("reconciled_graph", *REPEAT_STAGES) if run.repeat.reconcile else REPEAT_STAGES
                )
            if run.repeat.count > 1 and outcome.failed is None:
                # `--repeat N` asks for the floor: calibrated from this chain's own repeats.
                calibrate_repeats(job, instance, run, outcome, tags, progress, loggers)
    except (LeaseHeld, ForeignDataError) as exc:
        outcome.refused = str(exc)
    except GraphError as exc:
        outcome.error = str(exc)
    finally:
        store.close()
    return outcome


def calibrate_repeats(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    run: RunConfig,
    outcome: ChainOutcome,
    tags: Mapping[str, str],
    progress: Callable[[int, int, StageOutcome], None],
    loggers: Mapping[str, Any] | None,
) -> None:
    """`noise_floor` once more, over the repeats' bundles: the floor `--repeat N` asked for
    (an ordinary run only reads it). Its outcome joins the last repeat's stages."""
    dirs = [r.run_dir for r in outcome.repeats]
    if not all(dirs) or NOISE_FLOOR not in chain_stages(job, asset_order()):
        return
    last = run.for_repeat(run.repeat.count, outcome.salt or "")
    asked = last.model_copy(
        update={"calibration": last.calibration.model_copy(update={"runs": dirs})}
    )
    config = stage_run_config(asked, loggers)
    ran = run_stages(job, instance, [NOISE_FLOOR], config, tags, lambda s: progress(1, 1, s))
    outcome.repeats[-1].stages.extend(ran)


@dg.op(
    required_resource_keys={
        "paths",
        "corpus",
        "graph",
        "reconcile",
        "retrieval",
        "scoring",
        "repeat",
        "comparison",
        "calibration",
    },
    description="Checks every option, then runs the chain stage by stage (each asset and its "
    "checks in a run of their own) holding the graph instances' leases; fails naming the "
    "stage that failed.",
)
def run_chain(context):  # unannotated: Dagster cannot read string annotations
    import os

    from eval_pipeline.assets.resources import run_config_of
    from eval_pipeline.assets.tags import WEBSERVER_ENV
    from eval_pipeline.preflight import PreflightError, preflight

    config = run_config_of(context.resources)
    # Every option checked before the first stage, so a Launchpad typo fails in seconds and
    # before anything is wiped.
    try:
        preflight(config)
    except PreflightError as exc:
        raise dg.Failure(f"preflight: {exc}") from None

    def say(i: int, n: int, stage: StageOutcome) -> None:
        # One line per stage on stderr (the CLI's progress; compute logs in the UI).
        print(stage.progress(i, n), file=sys.stderr, flush=True)
        line = stage.progress(i, n) + (f": {stage.error}" if stage.error else "")
        (context.log.info if stage.status == "ok" else context.log.error)(line)

    run = context.run
    outcome = drive(
        context.instance,
        config,
        chain=config.paths.resume or run.run_id,  # a resumed chain goes on under its own id
        trigger=run.tags.get(TRIGGER_TAG, run.tags.get("dagster/schedule_name", "manual")),
        progress=say,
        loggers=(context.run_config or {}).get("loggers"),
        webserver=os.environ.get(WEBSERVER_ENV) or None,
    )
    report = {OUTCOME_META: dg.MetadataValue.json(outcome.model_dump(mode="json"))}
    failed = outcome.failed
    if outcome.interrupted is not None:
        raise dg.Failure(f"interrupted at stage {outcome.interrupted.name}", metadata=report)
    if outcome.refused or outcome.error:
        raise dg.Failure(outcome.refused or outcome.error, metadata=report)
    if failed is not None:
        raise dg.Failure(f"stage {failed.name} failed: {failed.error}", metadata=report)
    if outcome.incomplete:
        scored = next(s for r in outcome.repeats for s in r.stages if s.status == "incomplete")
        raise dg.Failure(
            f"run incomplete: {scored.metadata.get('unscored_infrastructure')} question(s) "
            f"unscored by infrastructure failures {scored.metadata.get('unscored_by_cause')}; "
            f"bundle {scored.metadata.get('run_dir')}",
            metadata=report,
        )
    return dg.Output(None, metadata=report)


def outcome_of(result: Any) -> ChainOutcome | None:
    """The ChainOutcome an eval_chain run reported (its op's output or failure metadata)."""
    for event in result.all_events:
        meta = None
        if event.is_successful_output and event.step_output_data is not None:
            meta = event.step_output_data.metadata
        elif event.is_step_failure and event.step_failure_data.user_failure_data is not None:
            meta = event.step_failure_data.user_failure_data.metadata
        if meta and OUTCOME_META in meta:
            return ChainOutcome.model_validate(meta[OUTCOME_META].value)
    return None
