"""The run-failure sensor: records what no step could — a crashed run (worker killed, lost),
and a failed `eval_chain` run naming its stage — in `<state>/ops/failures.jsonl`
(`assets/failure_log.py` holds the one writer; assets record their own failures as they raise).

It needs the daemon (`dagster dev`, the compose daemon), watches every job, and logs one line
per failure (UI: Automation → eval_chain_failure_sensor → tick logs). Start from the asset
named there and read its lineage in the UI: with `eval_chain` (stage by stage) everything
downstream of it did not run.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.assets.failure_log import record_failure, recorded_run_ids
from eval_pipeline.failure_records import FailedStep
from eval_pipeline.ops.stages import innermost_error


def _assets_by_step(instance: dg.DagsterInstance, run_id: str) -> dict[str, list[str]]:
    """Asset keys each step planned to materialize: a step of a multi-asset is not one asset."""
    records = instance.get_records_for_run(
        run_id=run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ).records
    out: dict[str, list[str]] = {}
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None or event.step_key is None or event.asset_key is None:
            continue
        out.setdefault(event.step_key, []).append(event.asset_key.to_user_string())
    return out


# monitor_all_code_locations: runs started in-process carry no code-location origin, so a
# location-scoped sensor would never see them. Every job is watched: "Materialize all" runs
# __ASSET_JOB, a selection another job, the schedule eval_chain.
@dg.run_failure_sensor(
    name="eval_chain_failure_sensor",
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    # Every 10 s rather than Dagster's 30: a failure is on record soon after the run ends.
    minimum_interval_seconds=10,
    description="Records which asset a failed run failed in, whatever launched it (state dir "
    "ops/failures.jsonl), unless its step already did.",
)
def eval_chain_failure_sensor(context: dg.RunFailureSensorContext) -> dg.SkipReason | None:
    run = context.dagster_run
    if run.run_id in recorded_run_ids():
        return dg.SkipReason(f"run {run.run_id} is recorded already")
    assets = _assets_by_step(context.instance, run.run_id)
    steps = []
    for event in context.get_step_failure_events():
        error = event.step_failure_data.error if event.step_failure_data else None
        step = event.step_key or "?"
        # In-process asset job: the step key is the asset name when no plan says more.
        steps.append(
            FailedStep(step=step, assets=assets.get(step, [step]), error=innermost_error(error))
        )
    failed = sorted({a for s in steps for a in s.assets})
    record_failure(
        run,
        assets=failed,
        error=context.failure_event.message or "",
        # STEP_FAILURE, or a crash reason (UNEXPECTED_TERMINATION, RUN_WORKER_RESTART, ...).
        reason=run.tags.get("dagster/failure_reason"),
        steps=steps,
        will_retry=run.tags.get("dagster/will_retry") == "true",
    )
    where = ", ".join(failed) or f"no step ({run.tags.get('dagster/failure_reason')})"
    context.log.error(
        f"{run.job_name} run {run.run_id} failed at {where}"
        + "".join(f"; {s.step}: {s.error}" for s in steps if s.error)
    )
    return None


OPS_SENSORS = [eval_chain_failure_sensor]
