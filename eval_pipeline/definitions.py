"""The whole pipeline in one place: assets, checks, resources, the IO manager, jobs, the
schedule and the sensor.

`dagster dev -m eval_pipeline.definitions` (or workspace.yaml) loads this module.
"""

import dagster as dg

from eval_pipeline.assets.compare import COMPARE_ASSETS
from eval_pipeline.assets.corpus import CORPUS_ASSETS
from eval_pipeline.assets.graph import GRAPH_ASSETS, GRAPH_CHECKS
from eval_pipeline.assets.handoff import stage_io_manager
from eval_pipeline.assets.judge_agreement import JUDGE_AGREEMENT_ASSETS
from eval_pipeline.assets.reconcile import RECONCILE_ASSETS, RECONCILE_CHECKS
from eval_pipeline.assets.resources import resources_for
from eval_pipeline.assets.retrieval import RETRIEVAL_ASSETS
from eval_pipeline.assets.scoring import SCORING_ASSETS
from eval_pipeline.assets.tags import (
    BATCH_JOB_NAME,
    CHAIN_JOB_NAME,
    CHAIN_RUN_TAGS,
    DEFAULT_GRAPH_INSTANCE,
    GRAPH_INSTANCE_TAG,
    STAGE_JOB_NAME,
    STAGE_RUN_TAGS,
)
from eval_pipeline.config import RunConfig
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

# The assets' own job: each stage of a chain is one run of it (one asset and its checks), in
# one process (the multiprocess executor costs ~2.5 s per step here and buys nothing on one
# graph database).
eval_stage = dg.define_asset_job(
    name=STAGE_JOB_NAME,
    selection=dg.AssetSelection.all(),
    executor_def=dg.in_process_executor,
    description="One stage of the evaluation chain (launched by eval_chain, one per asset).",
    tags={GRAPH_INSTANCE_TAG: DEFAULT_GRAPH_INSTANCE, **STAGE_RUN_TAGS},
)


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
    assets=[
        *CORPUS_ASSETS,
        *GRAPH_ASSETS,
        *RECONCILE_ASSETS,
        *RETRIEVAL_ASSETS,
        *SCORING_ASSETS,
        *COMPARE_ASSETS,
        # Beside the chain, not in it: it reads the judge-check store.
        *JUDGE_AGREEMENT_ASSETS,
    ],
    asset_checks=[*GRAPH_CHECKS, *RECONCILE_CHECKS],
    jobs=[eval_chain, eval_stage, eval_batch],
    # "Materialize" in the UI runs an implicit asset job: in-process too, for the same reason.
    executor=dg.in_process_executor,
    schedules=OPS_SCHEDULES,
    sensors=OPS_SENSORS,
    # The code location's defaults: the run configuration's, the environment naming the graph
    # server of a deployment (config.GraphConfig).
    resources={**resources_for(RunConfig()), "io_manager": stage_io_manager},
)
