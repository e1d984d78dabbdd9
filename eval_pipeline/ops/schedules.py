"""The nightly run of the whole chain, off until someone turns it on.

Turn it on in the UI (Automation → nightly_schedule → toggle on) or from a shell with the
same DAGSTER_HOME as the daemon: `dagster schedule start nightly_schedule -m
eval_pipeline.definitions`. Schedules only fire while the daemon runs (`dagster dev`, or the
compose deployment's daemon service).

The run uses the code location's resource defaults (the environment decides the graph
backend, see eval_pipeline.definitions), exactly like "Materialize all" in the UI.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.assets.tags import (
    CHAIN_JOB_NAME,
    CHAIN_RUN_TAGS,
    DEFAULT_GRAPH_INSTANCE,
    GRAPH_INSTANCE_TAG,
    TRIGGER_TAG,
)

NIGHTLY_CRON = "0 2 * * *"  # 02:00 UTC: after the working day on both sides of the Atlantic

NIGHTLY_TAGS: dict[str, str] = {
    GRAPH_INSTANCE_TAG: DEFAULT_GRAPH_INSTANCE,
    TRIGGER_TAG: "nightly_schedule",
    # Repeated here so a scheduled run is crash-only-retried even if the job lost its tags.
    **CHAIN_RUN_TAGS,
}

# By job name, not by object: definitions imports this module, not the other way round.
nightly_schedule = dg.ScheduleDefinition(
    name="nightly_schedule",
    job_name=CHAIN_JOB_NAME,
    cron_schedule=NIGHTLY_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    tags=NIGHTLY_TAGS,
    description=(
        "The whole evaluation chain every night at 02:00 UTC. Off by default: turn it on in "
        "the UI or with `dagster schedule start nightly_schedule`."
    ),
)

OPS_SCHEDULES = [nightly_schedule]
