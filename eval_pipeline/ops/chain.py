"""The chain, run stage by stage: each asset in a Dagster run of its own, then its checks.

Dagster OSS reads an asset as Failed when the latest run that planned it failed, and a check
as EXECUTION_FAILED when it was planned in a failed run: run as one run, a corpus error turned
every asset of the chain red. Run stage by stage, only the stage that failed is red; the
stages after it were never planned, so they read as not run, and their checks as not executed.
An asset's checks run in the next run, only once the asset materialized; a failed blocking
check stops the chain as Dagster's blocking checks would (`scored_run_complete` failing means
the run is incomplete, not broken: the bundle exists).

`run_stages` is used by the `eval_chain` job (the Launchpad, the nightly schedule: a driver run
whose stage runs carry its id) and by `eval-pipeline run` (which calls it directly). Every
failure is also appended to `<state>/ops/failures.jsonl` right here, daemon or not.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import dagster as dg
from pydantic import BaseModel, Field

from eval_pipeline.assets.artifacts import ARTIFACT_ASSETS
from eval_pipeline.assets.batches import BATCHED_ASSETS, ONE_BATCH, register_batches
from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.ops.sensors import (
    append_jsonl,
    failures_path,
    innermost_error,
    recorded_run_ids,
)
from eval_pipeline.ops.tags import CHAIN_PARENT_TAG, STAGE_RUN_TAGS

# The chain's assets in order; each is one stage.
CHAIN_STAGES: tuple[str, ...] = (*ARTIFACT_ASSETS, "scored_run", "run_comparison", "noise_floor")
# A failed blocking check of these means "incomplete", not "failed": the bundle was written.
COMPLETENESS_CHECKS = frozenset({"scored_run_complete"})

Status = Literal["ok", "failed", "check_failed", "incomplete"]


class StageOutcome(BaseModel):
    asset: str
    batch: str | None = None  # the question batch (partition) of a batched stage, K > 1
    status: Status
    run_ids: list[str] = Field(default_factory=list)
    error: str | None = None  # one line: what went wrong
    failed_checks: list[str] = Field(default_factory=list)
    warned_checks: list[str] = Field(default_factory=list)  # failed, but not blocking
    seconds: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)  # the asset's, plain values

    @property
    def name(self) -> str:
        """The stage as people read it: `retrieval_results [batch-02-of-04]` for a batch."""
        return f"{self.asset} [{self.batch}]" if self.batch else self.asset

    def progress(self, i: int, n: int, *, with_error: bool = True) -> str:
        """The stage's progress line: `[4/9] injected_graph: ok (1.8 s)`, and its error."""
        text = f"[{i}/{n}] {self.name}: {self.status} ({self.seconds:.1f} s)"
        return text + (f": {self.error}" if with_error and self.error else "")


class ChainOutcome(BaseModel):
    stages: list[StageOutcome]

    @property
    def failed(self) -> StageOutcome | None:
        return next((s for s in self.stages if s.status in ("failed", "check_failed")), None)

    @property
    def incomplete(self) -> bool:
        return any(s.status == "incomplete" for s in self.stages)

    def metadata(self, asset: str) -> dict[str, Any]:
        stage = next((s for s in self.stages if s.asset == asset), None)
        return stage.metadata if stage is not None else {}


def _materialization_metadata(result: Any, asset: str) -> dict[str, Any]:
    for mat in result.get_asset_materialization_events():
        if mat.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in mat.materialization.metadata.items()}
    return {}


# "eval_pipeline.corpus.errors.CorpusError: field 'x': ..." → "field 'x': ...": our own errors
# and dg.Failure say what is wrong in their message; other classes keep their short name.
_ERROR_PREFIX = re.compile(r"^(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\.)?(?P<cls>\w+): ")


def clean_error(line: str) -> str:
    match = _ERROR_PREFIX.match(line)
    if match is None:
        return line
    module = match.group("module") or ""
    if module.startswith(("eval_pipeline.", "dagster.")) or match.group("cls") == "Failure":
        return line[match.end() :]
    return f"{match.group('cls')}: {line[match.end() :]}" if module else line


def _first_error(result: Any) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            return clean_error(innermost_error(event.step_failure_data.error))
    if result.dagster_run.status == dg.DagsterRunStatus.FAILURE:
        for event in result.all_events:
            if event.event_type == dg.DagsterEventType.RUN_FAILURE:
                return event.message or "run failed"
    return "failed"


def check_keys_of(job: dg.JobDefinition, asset: str) -> set[dg.AssetCheckKey]:
    key = dg.AssetKey(asset)
    return {k for k in job.asset_layer.asset_graph.asset_check_keys if k.asset_key == key}


def _blocking(job: dg.JobDefinition, check: dg.AssetCheckKey) -> bool:
    spec = job.asset_layer.asset_graph.get(check)
    return bool(getattr(spec, "blocking", False))


def record_failure(outcome: StageOutcome, tags: Mapping[str, str], job: str) -> None:
    append_jsonl(
        failures_path(),
        {
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "run_id": outcome.run_ids[-1] if outcome.run_ids else None,
            "chain_run_id": tags.get(CHAIN_PARENT_TAG),
            "job": job,
            "trigger": tags.get("eval_pipeline/trigger", "manual"),
            "failure_reason": "CHECK_FAILURE" if outcome.failed_checks else "STEP_FAILURE",
            "will_retry": False,
            "failed_assets": [outcome.asset],
            "failed_checks": outcome.failed_checks,
            "failed_steps": [
                {"step": outcome.asset, "assets": [outcome.asset], "error": outcome.error}
            ],
            "message": outcome.error,
        },
    )


def run_stages(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any],
    *,
    tags: Mapping[str, str],
    stages: Sequence[str] = CHAIN_STAGES,
    on_stage: Callable[[int, int, StageOutcome], None] | None = None,
    batch: BatchKey = ONE_BATCH,
) -> ChainOutcome:
    """Run `stages` of asset job `job` one by one; stop at the first that fails. The assets
    partitioned by question batch run as partition `batch` (the only one of a one-batch run)."""
    run_tags = {**tags, **STAGE_RUN_TAGS}
    outcomes: list[StageOutcome] = []
    if any(asset in BATCHED_ASSETS for asset in stages):
        register_batches(instance, batch.batches)
    for i, asset in enumerate(stages, 1):
        started = time.perf_counter()
        key = dg.AssetKey(asset)
        partition = batch.key if asset in BATCHED_ASSETS else None
        result = job.get_subset(
            asset_selection={key}, asset_check_selection=set()
        ).execute_in_process(
            run_config=dict(run_config),
            instance=instance,
            raise_on_error=False,
            tags=run_tags,
            partition_key=partition,
        )
        outcome = StageOutcome(asset=asset, status="ok", run_ids=[result.run_id])
        if not result.success:
            outcome.status, outcome.error = "failed", _first_error(result)
        else:
            outcome.metadata = _materialization_metadata(result, asset)
            checks = check_keys_of(job, asset)
            if checks:
                checked = job.get_subset(
                    asset_selection=set(), asset_check_selection=checks
                ).execute_in_process(
                    run_config=dict(run_config),
                    instance=instance,
                    raise_on_error=False,
                    tags=run_tags,
                    partition_key=partition,
                )
                outcome.run_ids.append(checked.run_id)
                for ev in checked.get_asset_check_evaluations():
                    if ev.passed or ev.severity == dg.AssetCheckSeverity.WARN:
                        continue
                    check = dg.AssetCheckKey(ev.asset_key, ev.check_name)
                    (
                        outcome.failed_checks if _blocking(job, check) else outcome.warned_checks
                    ).append(ev.check_name)
                if not checked.success and not outcome.failed_checks:
                    outcome.failed_checks.append("(check step failed)")
                    outcome.error = _first_error(checked)
                if outcome.failed_checks:
                    if set(outcome.failed_checks) <= COMPLETENESS_CHECKS:
                        outcome.status = "incomplete"
                    else:
                        outcome.status = "check_failed"
                        descriptions = [
                            f"{ev.check_name}: {ev.description}"
                            if ev.description
                            else ev.check_name
                            for ev in checked.get_asset_check_evaluations()
                            if ev.check_name in outcome.failed_checks
                        ]
                        outcome.error = outcome.error or "; ".join(descriptions)
        outcome.seconds = round(time.perf_counter() - started, 3)
        outcomes.append(outcome)
        if on_stage is not None:
            on_stage(i, len(stages), outcome)
        if outcome.status in ("failed", "check_failed"):
            # A step that raised recorded itself (records_failures); a check, or a run that
            # died before its step, did not.
            if outcome.run_ids[-1] not in recorded_run_ids():
                record_failure(outcome, tags, job.name)
            break
        if outcome.status == "incomplete":
            break  # the bundle is written; nothing compares or calibrates an incomplete run
    return ChainOutcome(stages=outcomes)


PREFLIGHT_RESOURCES = ("corpus", "graph", "reconcile", "retrieval", "scoring")
RESOURCE_KEYS = frozenset(
    {"paths", "corpus", "graph", "reconcile", "retrieval", "scoring", "comparison", "calibration"}
)


@dg.op(
    required_resource_keys=set(RESOURCE_KEYS),
    description="Runs the chain stage by stage (each asset, then its checks, in runs of their "
    "own), holding the graph instance's lease throughout; fails naming the stage that failed.",
)
def run_chain_stages(context) -> None:  # unannotated: Dagster cannot read string annotations
    # Imported here: definitions imports this module to build the eval_chain job.
    from eval_pipeline.assets.graph_lease import run_finished
    from eval_pipeline.definitions import defs
    from eval_pipeline.graph.lease import Lease
    from eval_pipeline.ops.batch_runs import holding_instances, run_batched
    from eval_pipeline.ops.tags import (
        LEASE_HOLDER_TAG,
        STAGE_JOB_NAME,
        TRIGGER_TAG,
        WEBSERVER_ENV,
    )
    from eval_pipeline.preflight import PreflightError, preflight

    run = context.run
    config = {k: v for k, v in (context.run_config or {}).items() if k in ("resources", "loggers")}
    tags = {
        LEASE_HOLDER_TAG: run.run_id,
        CHAIN_PARENT_TAG: run.run_id,
        TRIGGER_TAG: run.tags.get(TRIGGER_TAG, run.tags.get("dagster/schedule_name", "manual")),
    }
    graph = context.resources.graph
    # Every option checked before the first stage, so a Launchpad typo fails in seconds and
    # before anything is wiped.
    try:
        preflight({name: getattr(context.resources, name) for name in PREFLIGHT_RESOURCES})
    except PreflightError as exc:
        raise dg.Failure(f"preflight: {exc}") from None

    def log(i: int, n: int, stage: StageOutcome) -> None:
        (context.log.info if stage.status == "ok" else context.log.error)(stage.progress(i, n))

    batches = context.resources.corpus.batches
    lease = Lease(holder=run.run_id, run_id=run.run_id, what=f"{run.job_name} run")
    with holding_instances(
        graph,
        batches,
        lease,
        wait_s=graph.lease_wait_s,
        run_finished=run_finished(context.instance),
    ):
        outcome = run_batched(
            defs.resolve_job_def(STAGE_JOB_NAME),
            context.instance,
            config,
            tags=tags,
            batches=batches,
            on_stage=log,
            webserver=os.environ.get(WEBSERVER_ENV) or None,
        )
    failed = outcome.failed
    if failed is not None:
        raise dg.Failure(
            f"stage {failed.name} failed: {failed.error}",
            metadata={"failed_stage": failed.asset, "stage_runs": failed.run_ids},
        )
    if outcome.incomplete:
        meta = outcome.metadata("scored_run")
        raise dg.Failure(
            f"run incomplete: {meta.get('unscored_infrastructure')} question(s) unscored by "
            f"infrastructure failures {meta.get('unscored_by_cause')}; bundle "
            f"{meta.get('run_dir')}",
            metadata={"run_dir": str(meta.get("run_dir"))},
        )
