"""The nightly schedule: off by default, 02:00 UTC, asks for eval_chain with its tags."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from eval_pipeline.assets.tags import CHAIN_RUN_TAGS
from eval_pipeline.ops.schedules import OPS_SCHEDULES, nightly_schedule


def test_nightly_schedule_is_off_by_default_and_fires_at_2_utc():
    assert OPS_SCHEDULES == [nightly_schedule]
    assert nightly_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert nightly_schedule.cron_schedule == "0 2 * * *"
    assert nightly_schedule.execution_timezone == "UTC"
    assert nightly_schedule.job_name == "eval_chain"


def test_nightly_schedule_evaluates_to_one_tagged_run_request():
    when = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=when)
    data = nightly_schedule.evaluate_tick(context)
    assert data.skip_message is None
    [request] = data.run_requests
    assert request.tags["eval_pipeline/graph_instance"] == "default"
    assert request.tags["eval_pipeline/trigger"] == "nightly_schedule"
    # Crash-only retries: a step failure is never retried.
    assert request.tags["dagster/retry_on_asset_or_op_failure"] == "false"
    assert CHAIN_RUN_TAGS.items() <= request.tags.items()
    # The code location's resource defaults, like "Materialize all" in the UI.
    assert request.run_config == {}


def test_schedule_resolves_against_the_real_eval_chain_job():
    from eval_pipeline.definitions import defs

    merged = dg.Definitions.merge(defs, dg.Definitions(schedules=OPS_SCHEDULES))
    schedule = merged.resolve_schedule_def("nightly_schedule")
    assert schedule.job_name == "eval_chain"
    assert merged.resolve_job_def(schedule.job_name) is not None
