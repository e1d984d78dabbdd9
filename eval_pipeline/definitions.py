"""The whole pipeline in one place: assets, checks, resources, the IO manager, jobs, the
schedule and the sensor.

`dagster dev -m eval_pipeline.definitions` (or workspace.yaml) loads this module.
"""

import dagster as dg

from eval_pipeline.assets.jobs import ASSETS, CHECKS, RESOURCES, eval_stage
from eval_pipeline.assets.tags import (
    BATCH_JOB_NAME,
    CHAIN_JOB_NAME,
    CHAIN_RUN_TAGS,
    DEFAULT_GRAPH_INSTANCE,
    GRAPH_INSTANCE_TAG,
)
from eval_pipeline.llm import install_log_redaction
from eval_pipeline.ops.batches import run_batch_stages
from eval_pipeline.ops.chain import run_chain
from eval_pipeline.ops.schedules import OPS_SCHEDULES
from eval_pipeline.ops.sensors import OPS_SENSORS
from eval_pipeline.settings import private_umask

# Before any run logs or writes anything, whatever launched it: every log record of the process
# is redacted (Dagster's event log and compute logs included), and what it creates is private.
install_log_redaction()
private_umask()


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


defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[eval_chain, eval_stage, eval_batch],
    # "Materialize" in the UI runs an implicit asset job: in-process too, for the same reason.
    executor=dg.in_process_executor,
    schedules=OPS_SCHEDULES,
    sensors=OPS_SENSORS,
    resources=RESOURCES,
)
