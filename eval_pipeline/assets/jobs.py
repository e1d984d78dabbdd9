"""The assets, their checks, their resources and their own job, `eval_stage`: each stage of
a chain is one run of it (one asset and its checks).

`definitions.py` shows them with the chain's jobs; the chain driver (`ops/`) resolves the
stage job from here, so the Dagster layer's modules import one way only.
"""

from __future__ import annotations

import functools

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
    DEFAULT_GRAPH_INSTANCE,
    GRAPH_INSTANCE_TAG,
    STAGE_JOB_NAME,
    STAGE_RUN_TAGS,
)
from eval_pipeline.config import RunConfig

# In chain order: assets that do not depend on each other run in this order.
ASSETS = [
    *CORPUS_ASSETS,
    *GRAPH_ASSETS,
    *RECONCILE_ASSETS,
    *RETRIEVAL_ASSETS,
    *SCORING_ASSETS,
    *COMPARE_ASSETS,
    # Beside the chain, not in it: it reads the judge-check store.
    *JUDGE_AGREEMENT_ASSETS,
]
CHECKS = [*GRAPH_CHECKS, *RECONCILE_CHECKS]  # the others are their asset's own check specs
# The code location's defaults: the run configuration's, with the environment naming the
# graph server of a deployment (config.GraphConfig).
RESOURCES = {**resources_for(RunConfig()), "io_manager": stage_io_manager}

# In one process: the multiprocess executor costs ~2.5 s per step here and buys nothing on
# one graph database.
eval_stage = dg.define_asset_job(
    name=STAGE_JOB_NAME,
    selection=dg.AssetSelection.all(),
    executor_def=dg.in_process_executor,
    description="One stage of the evaluation chain (launched by eval_chain, one per asset).",
    tags={GRAPH_INSTANCE_TAG: DEFAULT_GRAPH_INSTANCE, **STAGE_RUN_TAGS},
)


@functools.cache
def stage_job() -> dg.JobDefinition:
    """`eval_stage`, resolved against the assets and their resources."""
    defs = dg.Definitions(
        assets=ASSETS, asset_checks=CHECKS, resources=RESOURCES, jobs=[eval_stage]
    )
    return defs.resolve_job_def(STAGE_JOB_NAME)


def asset_order() -> list[dg.AssetKey]:
    return [key for asset in ASSETS for key in asset.keys]
