"""Record which asset a failed run died in, however the run was launched.

Each failure becomes one JSON line in `<state dir>/ops/failures.jsonl`. Three writers, one
line per failed run (deduplicated by run id):
- every asset of the chain records its own failure as it raises (`records_failures`), so a
  step failure is recorded with or without a daemon, from the CLI, the UI or the schedule;
- the chain's stage runner records a failed blocking check (ops/chain.py);
- the run-failure sensor (needs the daemon: `dagster dev`, the compose daemon) records what
  no step could: a crashed run (worker killed, lost), and a failed `eval_chain` run naming its
  stage. It watches every job, and logs one line per failure (UI: Automation →
  eval_chain_failure_sensor → tick logs).
Start from the asset named there and read its lineage in the UI: with `eval_chain` (stage by
stage) everything downstream of it did not run.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.llm.credentials import PRIVATE_FILE, redact
from eval_pipeline.ops.tags import TRIGGER_TAG
from eval_pipeline.settings import state_dir


def failures_path() -> Path:
    return state_dir() / "ops" / "failures.jsonl"


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
    """One record, redacted (error texts can quote anything), to a private file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = redact(json.dumps(record, sort_keys=True))
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    os.chmod(path, PRIVATE_FILE)


def recorded_run_ids(path: Path | None = None) -> set[str]:
    path = path or failures_path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    out = set()
    for line in lines:
        try:
            out.add(json.loads(line).get("run_id"))
        except ValueError:
            continue
    return out


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "description", None) or str(exc)
    text = " ".join(str(text).split())
    return text if isinstance(exc, dg.Failure) else f"{type(exc).__name__}: {text}"


def records_failures(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an asset's function: a failure is appended to failures.jsonl as it happens (no
    daemon needed), then re-raised unchanged."""

    @functools.wraps(fn)
    def wrapper(context, *args, **kwargs):  # unannotated: the wrapped signature is what counts
        try:
            return fn(context, *args, **kwargs)
        except Exception as exc:
            run = context.run
            asset = context.asset_key.to_user_string()
            error = _one_line(exc)
            append_jsonl(
                failures_path(),
                {
                    "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "run_id": run.run_id,
                    "job": run.job_name,
                    "trigger": run.tags.get(
                        TRIGGER_TAG, run.tags.get("dagster/schedule_name", "manual")
                    ),
                    "failure_reason": "STEP_FAILURE",
                    "will_retry": False,
                    "failed_assets": [asset],
                    "failed_steps": [{"step": asset, "assets": [asset], "error": error}],
                    "message": error,
                },
            )
            raise

    return wrapper


# monitor_all_code_locations: runs started by `eval-pipeline run` execute in-process and carry
# no code-location origin, so a location-scoped sensor would never see them. Every job is
# watched: "Materialize all" runs __ASSET_JOB, a selection another job, the schedule eval_chain.
@dg.run_failure_sensor(
    name="eval_chain_failure_sensor",
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Records which asset a failed run failed in, whatever launched it (state dir "
    "ops/failures.jsonl), unless its step already did.",
)
def eval_chain_failure_sensor(context: dg.RunFailureSensorContext) -> dg.SkipReason | None:
    if context.dagster_run.run_id in recorded_run_ids():
        return dg.SkipReason(f"run {context.dagster_run.run_id} is recorded already")
    record = failure_record(context)
    append_jsonl(failures_path(), record)
    where = ", ".join(record["failed_assets"]) or f"no step ({record['failure_reason']})"
    context.log.error(
        f"{record['job']} run {record['run_id']} failed at {where}"
        + "".join(f"; {s['step']}: {s['error']}" for s in record["failed_steps"] if s["error"])
    )
    return None


OPS_SENSORS = [eval_chain_failure_sensor]
