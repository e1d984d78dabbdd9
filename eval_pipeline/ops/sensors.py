"""Record which asset a failed eval_chain run died in.

Each failure becomes one JSON line in `<state dir>/ops/failures.jsonl` and one line in the
sensor's log (UI: Automation → eval_chain_failure_sensor → tick logs). Start from the asset
named there and read its lineage in the UI: everything downstream of it did not run.

The sensor is on by default (recording changes nothing) and needs the daemon (`dagster dev`
or the compose daemon), like any sensor.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.ops.tags import CHAIN_JOB_NAME, TRIGGER_TAG
from eval_pipeline.settings import state_dir


def failures_path() -> Path:
    return state_dir() / "ops" / "failures.jsonl"


def innermost_error(error: Any) -> str:
    """The root cause on one line: Dagster wraps user errors in its own."""
    if error is None:
        return ""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    lines = [line for line in (error.message or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


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


def failure_record(context: dg.RunFailureSensorContext) -> dict[str, Any]:
    """What failed, where, and why, from the run's own event log."""
    run = context.dagster_run
    assets = _assets_by_step(context.instance, run.run_id)
    steps = []
    for event in context.get_step_failure_events():
        error = event.step_failure_data.error if event.step_failure_data else None
        step = event.step_key or "?"
        steps.append(
            {
                "step": step,
                # In-process asset job: the step key is the asset name when no plan says more.
                "assets": assets.get(step, [step]),
                "error": innermost_error(error),
            }
        )
    return {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_id": run.run_id,
        "job": run.job_name,
        "trigger": run.tags.get(TRIGGER_TAG, run.tags.get("dagster/schedule_name", "manual")),
        # STEP_FAILURE, or a crash reason (UNEXPECTED_TERMINATION, RUN_WORKER_RESTART, ...).
        "failure_reason": run.tags.get("dagster/failure_reason"),
        "will_retry": run.tags.get("dagster/will_retry") == "true",
        "failed_assets": sorted({a for s in steps for a in s["assets"]}),
        "failed_steps": steps,
        "message": context.failure_event.message,
    }


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


# monitor_all_code_locations: runs started by `eval-pipeline run` execute in-process and carry
# no code-location origin, so a location-scoped sensor would never see them. The job name
# filter below narrows it back to eval_chain (and the job object is not importable here:
# definitions imports this module).
@dg.run_failure_sensor(
    name="eval_chain_failure_sensor",
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Records which asset a failed eval_chain run failed in (state dir "
    "ops/failures.jsonl).",
)
def eval_chain_failure_sensor(context: dg.RunFailureSensorContext) -> dg.SkipReason | None:
    if context.dagster_run.job_name != CHAIN_JOB_NAME:
        return dg.SkipReason(f"not {CHAIN_JOB_NAME}: {context.dagster_run.job_name}")
    record = failure_record(context)
    append_jsonl(failures_path(), record)
    where = ", ".join(record["failed_assets"]) or f"no step ({record['failure_reason']})"
    context.log.error(
        f"eval_chain run {record['run_id']} failed at {where}"
        + "".join(f"; {s['step']}: {s['error']}" for s in record["failed_steps"] if s["error"])
    )
    return None


OPS_SENSORS = [eval_chain_failure_sensor]
