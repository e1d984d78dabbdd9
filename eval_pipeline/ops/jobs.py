"""The chain's own jobs: `eval_chain`, the one driver (`ops/chain.py`), and `eval_batch`, one
question batch of a deployed chain (`ops/batches.py`). The assets' job, `eval_stage`, is in
`assets/jobs.py`."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.assets.jobs import RESOURCES
from eval_pipeline.assets.tags import (
    BATCH_JOB_NAME,
    CHAIN_JOB_NAME,
    CHAIN_RUN_TAGS,
    DEFAULT_GRAPH_INSTANCE,
    GRAPH_INSTANCE_TAG,
    TRIGGER_TAG,
)
from eval_pipeline.config import RunConfig
from eval_pipeline.ops.batches import run_batch_stages
from eval_pipeline.ops.chain import run_chain
from eval_pipeline.ops.pool import process_tags


# The whole chain, stage by stage (ops/chain.py). The queued coordinator (deploy/dagster.yaml)
# allows one run per graph instance; run retries only for crashes, from scratch
# (CHAIN_RUN_TAGS): a step failure is never retried into a half-injected graph.
@dg.job(
    name=CHAIN_JOB_NAME,
    executor_def=dg.in_process_executor,
    description="The whole evaluation chain, upstream file to the scored run, stage by stage.",
    tags={GRAPH_INSTANCE_TAG: DEFAULT_GRAPH_INSTANCE, **CHAIN_RUN_TAGS},
)
def eval_chain() -> None:
    run_chain()


# Deployed, one question batch of an eval_chain run over several (ops/batches.py): a run of
# its own, so the run launcher gives each batch its own process, container or pod.
@dg.job(
    name=BATCH_JOB_NAME,
    executor_def=dg.in_process_executor,
    description="One question batch's graph stages, launched by an eval_chain run.",
    tags={"dagster/max_retries": "0"},
)
def eval_batch() -> None:
    run_batch_stages()


def launch(
    instance: dg.DagsterInstance, run: RunConfig, *, verbose: bool = False, trigger: str = "cli"
) -> dg.ExecuteInProcessResult:
    """`eval_chain` on `instance`, in this process: the job the UI and the schedule launch,
    with this configuration (Dagster's own console lines only when `verbose`)."""
    level = "INFO" if verbose else "CRITICAL"
    return eval_chain.execute_in_process(
        run_config={
            "resources": run.resources_config(),
            "loggers": {"console": {"config": {"log_level": level}}},
        },
        instance=instance,
        raise_on_error=False,
        tags={TRIGGER_TAG: trigger, **process_tags()},
        resources=RESOURCES,
    )
