"""One stage of a chain: an asset and its own checks, in one run of the assets' job.

Why stage by stage, see `ops/chain.py`. `run_stage` launches the run (in this process) and
reads what happened into a `StageOutcome`: ok, failed (the asset raised), check_failed (a
blocking check failed), or incomplete (the bundle was written, some questions unscored).
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Literal

import dagster as dg
from pydantic import BaseModel, Field

from eval_pipeline import interrupts
from eval_pipeline.assets.batches import ONE_BATCH
from eval_pipeline.assets.failure_log import record_failure, recorded_run_ids
from eval_pipeline.assets.graph_lease import GRAPH_STEPS
from eval_pipeline.assets.tags import BUNDLE_WRITTEN, stage_run_tags
from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.ops import pool
from eval_pipeline.ops.resume import kept_stage

# A failed blocking check of these means "incomplete", not "failed": the bundle was written.
COMPLETENESS_CHECKS = frozenset({"scored_run_complete"})
OUTCOME_META = "outcome"
NOTE_META = "sample_note"  # an asset's note the user must see without --verbose

Status = Literal["ok", "failed", "check_failed", "incomplete", "interrupted"]


class StageOutcome(BaseModel):
    asset: str
    batch: str | None = None  # the question batch (partition) of a graph stage, K > 1
    status: Status
    run_id: str | None = None
    error: str | None = None  # one line: what went wrong
    failed_checks: list[str] = Field(default_factory=list)
    warned_checks: list[str] = Field(default_factory=list)  # failed, but not blocking
    seconds: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)  # the asset's, plain values
    kept: bool = False  # a resumed chain kept what this stage made before (`ops/resume.py`)

    @property
    def name(self) -> str:
        """The stage as people read it: `retrieval_results [batch-02-of-04]` for a batch."""
        return f"{self.asset} [{self.batch}]" if self.batch else self.asset

    @property
    def stopped(self) -> bool:
        return self.status != "ok"

    def progress(self, i: int, n: int) -> str:
        """The stage's progress line: `[4/9] injected_graph: ok (1.8 s)`."""
        if self.kept:
            return f"[{i}/{n}] {self.name}: kept (made by run {self.run_id}, resumed)"
        text = f"[{i}/{n}] {self.name}: {self.status} ({self.seconds:.1f} s)"
        if self.warned_checks:
            text += f"; check(s) failed, not blocking: {', '.join(self.warned_checks)}"
        if note := self.metadata.get(NOTE_META):  # e.g. "--sample 1000 capped to 31 ..."
            text += f"; note: {note}"
        return text


OnStage = Callable[[StageOutcome], None]

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


def innermost_error(error: Any) -> str:
    """The user-level error on one line: Dagster wraps user errors in its own, and a user error
    that names the problem (a dg.Failure saying which stage lost the graph server) must not be
    replaced by what caused it deep down (an ExceptionGroup)."""
    if error is None:
        return ""
    while getattr(error, "cause", None) is not None and str(
        getattr(error, "cls_name", "") or ""
    ).startswith("Dagster"):
        error = error.cause
    lines = [line for line in (error.message or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _blocking(job: dg.JobDefinition, check: dg.AssetCheckKey) -> bool:
    return bool(getattr(job.asset_layer.asset_graph.get(check), "blocking", False))


def run_stage(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    asset: str,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    batch: BatchKey = ONE_BATCH,
) -> StageOutcome:
    """One stage: `asset` and its checks in one run of the assets' job (as partition `batch`
    for a graph stage); what happened, in one outcome."""
    kept = kept_stage(instance, run_config, tags, asset, batch)
    if kept is not None:
        return StageOutcome(
            asset=asset,
            batch=batch.key if asset in GRAPH_STEPS and batch.batches > 1 else None,
            status="ok",
            run_id=kept.run_id,
            kept=True,
            metadata=kept.metadata,
        )
    started = time.perf_counter()
    key = dg.AssetKey(asset)
    checks = {k for k in job.asset_layer.asset_graph.asset_check_keys if k.asset_key == key}
    run_id = str(uuid.uuid4())  # known before it runs: the pool watch looks for its claims
    # A graph stage may wait for a pool slot: said out loud, and stoppable (`ops/pool.py`).
    waits = pool.announced_wait(instance, run_id, _say) if asset in GRAPH_STEPS else nullcontext()
    with waits:
        result = job.get_subset(
            asset_selection={key}, asset_check_selection=checks
        ).execute_in_process(
            run_config=dict(run_config),
            instance=instance,
            raise_on_error=False,
            run_id=run_id,
            tags={**stage_run_tags(dict(tags), asset), **pool.process_tags()},
            partition_key=batch.key if asset in GRAPH_STEPS else None,
        )
    outcome = StageOutcome(
        asset=asset,
        batch=batch.key if asset in GRAPH_STEPS and batch.batches > 1 else None,
        status="ok",
        run_id=result.run_id,
    )
    materialized = False
    for mat in result.get_asset_materialization_events():
        if mat.asset_key == key:
            materialized = True
            meta = mat.materialization.metadata
            outcome.metadata = {k: getattr(v, "value", v) for k, v in meta.items()}
    # The asset's own step failing (its check specs failing are evaluations, read below).
    asset_failed = any(
        e.is_step_failure and e.step_key == asset and not _is_check_failure(e)
        for e in result.all_events
    )
    described = {}
    for ev in result.get_asset_check_evaluations():
        if ev.passed:
            continue
        blocking = _blocking(job, dg.AssetCheckKey(ev.asset_key, ev.check_name))
        if ev.severity == dg.AssetCheckSeverity.WARN or not blocking:
            outcome.warned_checks.append(ev.check_name)
        else:
            outcome.failed_checks.append(ev.check_name)
            described[ev.check_name] = ev.description
    if not materialized or (asset_failed and not outcome.failed_checks):
        outcome.status, outcome.error = "failed", _first_error(result)
    elif outcome.failed_checks:
        incomplete = set(outcome.failed_checks) <= COMPLETENESS_CHECKS
        outcome.status = "incomplete" if incomplete else "check_failed"
        outcome.error = "; ".join(
            f"{name}: {text}" if text else name for name, text in described.items()
        )
    elif not result.success:  # a check step raised
        outcome.status, outcome.error = "check_failed", _first_error(result)
    if interrupts.received() or _was_interrupted(result):
        # Whatever the stage's own status: stopped by Ctrl-C, never "ok", never "failed".
        _interrupted(outcome, _bundle_written(result, key))
    outcome.seconds = round(time.perf_counter() - started, 3)
    if outcome.status in ("failed", "check_failed") and result.run_id not in recorded_run_ids():
        # A step that raised recorded itself; a failed check did not.
        record_failure(
            instance.get_run_by_id(result.run_id),
            assets=[asset],
            error=outcome.error or "failed",
            reason="CHECK_FAILURE" if outcome.failed_checks else "STEP_FAILURE",
            checks=outcome.failed_checks,
        )
    return outcome


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _was_interrupted(result: Any) -> bool:
    return any(
        e.is_step_failure
        and e.step_failure_data is not None
        and e.step_failure_data.error is not None
        and interrupts.is_interrupt(e.step_failure_data.error.cls_name)
        for e in result.all_events
    )


def _bundle_written(result: Any, key: dg.AssetKey) -> str | None:
    """The bundle the stage's asset said it wrote (scored_run's observation), if any."""
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION:
            observation = event.asset_observation_data.asset_observation
            if observation.asset_key == key and BUNDLE_WRITTEN in observation.metadata:
                return str(observation.metadata[BUNDLE_WRITTEN].value)
    return None


def _interrupted(outcome: StageOutcome, written: str | None = None) -> None:
    """Mark `outcome` interrupted; a scored_run's bundle, if it got that far, is withdrawn:
    an interrupted stage's bundle must not read as complete, wherever in the step the
    interrupt landed (before its materialization too: then `written` names the bundle)."""
    outcome.status, outcome.error = "interrupted", "interrupted (Ctrl-C)"
    run_dir = outcome.metadata.get("run_dir") or written
    if outcome.asset == "scored_run" and run_dir:
        withdrawn = interrupts.withdraw_bundle(run_dir)
        outcome.metadata["run_dir"] = None
        outcome.metadata["withdrawn"] = str(withdrawn) if withdrawn else None


def interrupted_before(asset: str, batch: BatchKey = ONE_BATCH) -> StageOutcome:
    """The stage an interrupt between stages kept from starting."""
    return StageOutcome(
        asset=asset,
        batch=batch.key if asset in GRAPH_STEPS and batch.batches > 1 else None,
        status="interrupted",
        error="interrupted (Ctrl-C) before it began",
    )


def _is_check_failure(event: Any) -> bool:
    """A step failure that is a blocking check failing (its evaluation says why)."""
    error = event.step_failure_data.error if event.step_failure_data else None
    return error is not None and "DagsterAssetCheckFailedError" in (error.cls_name or "")


def _first_error(result: Any) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            return clean_error(innermost_error(event.step_failure_data.error))
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.RUN_FAILURE:
            return event.message or "run failed"
    return "failed"


def run_stages(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    stages: Sequence[str],
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    on_stage: OnStage,
    batch: BatchKey = ONE_BATCH,
) -> list[StageOutcome]:
    """`stages` one by one; stop at the first that does not end `ok`."""
    outcomes: list[StageOutcome] = []
    for asset in stages:
        if interrupts.received():  # Ctrl-C between stages: the next one never starts
            outcome = interrupted_before(asset, batch)
            outcomes.append(outcome)
            on_stage(outcome)
            break
        outcome = run_stage(job, instance, asset, run_config, tags, batch)
        outcomes.append(outcome)
        on_stage(outcome)
        if outcome.stopped:
            break
    return outcomes
