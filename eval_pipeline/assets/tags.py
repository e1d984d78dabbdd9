"""Run tags and job names shared by the chain, its stage runs, the schedule and the sensors.

Run retries, crash-only: the daemon re-executes a failed run only when the instance enables
`run_retries` and the run's `dagster/max_retries` allows it. A run that failed *in a step*
(`dagster/failure_reason` STEP_FAILURE) is never retried, because
`dagster/retry_on_asset_or_op_failure` is false: a step that failed half-way through wiping
or injecting the graph must be looked at, not silently re-run into a mixed graph. What is
retried is a crash of the chain run itself (its worker killed, lost, or never started), and
then the whole chain again (`ALL_STEPS`), so the graph is always built from scratch by one
chain. No op-level `RetryPolicy` is used anywhere, for the same reason.
"""

from __future__ import annotations

CHAIN_JOB_NAME = "eval_chain"
# The assets' own job: each stage of a chain is one run of it (asset and checks).
STAGE_JOB_NAME = "eval_stage"
# Deployed, a chain over several question batches runs each batch as a run of this job.
BATCH_JOB_NAME = "eval_batch"

# The chain a run belongs to: the eval_chain run's id, on every run it launches. It is also
# the holder of the graph instances' leases, and what a stage's inputs are looked up under.
CHAIN_TAG = "eval_pipeline/chain_run"
# The queued coordinator allows one run per value of this tag (dagster.yaml).
GRAPH_INSTANCE_TAG = "eval_pipeline/graph_instance"
DEFAULT_GRAPH_INSTANCE = "default"
# What started a run: lets the failure log tell nightly runs from manual ones.
TRIGGER_TAG = "eval_pipeline/trigger"
PARTITION_TAG = "dagster/partition"
# The asset a stage run of the chain materializes (what a dead batch worker was doing).
STAGE_TAG = "eval_pipeline/stage"

# scored_run's observation of the bundle it has just written (before the step ends).
BUNDLE_WRITTEN = "bundle_written"

CHAIN_RUN_TAGS: dict[str, str] = {
    "dagster/max_retries": "1",
    "dagster/retry_on_asset_or_op_failure": "false",
    "dagster/retry_strategy": "ALL_STEPS",
}
# A stage run is never retried on its own (a crashed chain is retried whole, from scratch).
STAGE_RUN_TAGS: dict[str, str] = {"dagster/max_retries": "0", "eval_pipeline/stage_run": "true"}
# The webserver a deployed chain submits its batch runs to (e.g. http://dagster_webserver:3000).
WEBSERVER_ENV = "EVAL_DAGSTER_WEBSERVER"

# Dagster 1.13's Runs list shows by default only runs without a backfill id (the runs within
# a backfill are behind "Show runs within backfills"; the run storage keeps the tag's value in
# its own column). A chain's stage runs carry it with the chain run's id, so the list shows
# one eval_chain run per chain, and its stage runs are found under the chain's tag.
GROUPED_UNDER_TAG = "dagster/backfill"


def stage_run_tags(tags: dict[str, str] | None, asset: str) -> dict[str, str]:
    """The tags of a chain's stage run of `asset`: the chain's, grouped under its run."""
    tags = dict(tags or {})
    chain = tags.get(CHAIN_TAG)
    return {
        **tags,
        **STAGE_RUN_TAGS,
        STAGE_TAG: asset,
        **({GROUPED_UNDER_TAG: chain} if chain else {}),
    }
