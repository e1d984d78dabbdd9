"""The whole pipeline in one place: assets, checks, resources and jobs.

`dagster dev -m eval_pipeline.definitions` (or workspace.yaml) loads this module.
"""

import os

import dagster as dg

from eval_pipeline.assets.compare import COMPARE_ASSETS, COMPARE_CHECKS, COMPARE_RESOURCES
from eval_pipeline.assets.corpus import CORPUS_ASSETS, CORPUS_CHECKS
from eval_pipeline.assets.graph import GRAPH_ASSETS, GRAPH_CHECKS
from eval_pipeline.assets.judge_agreement import JUDGE_AGREEMENT_ASSETS
from eval_pipeline.assets.reconcile import RECONCILE_ASSETS, RECONCILE_CHECKS, ReconcilerSettings
from eval_pipeline.assets.resources import CorpusSettings, ProjectPaths
from eval_pipeline.assets.retrieval import RETRIEVAL_ASSETS, RETRIEVAL_CHECKS, RetrievalSettings
from eval_pipeline.assets.scoring import SCORING_ASSETS, SCORING_CHECKS, ScoringSettings
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import install_log_redaction
from eval_pipeline.ops.batch_runs import run_batch_stages
from eval_pipeline.ops.chain import run_chain_stages
from eval_pipeline.ops.schedules import OPS_SCHEDULES
from eval_pipeline.ops.sensors import OPS_SENSORS
from eval_pipeline.ops.tags import (
    BATCH_JOB_NAME,
    CHAIN_JOB_NAME,
    CHAIN_RUN_TAGS,
    STAGE_JOB_NAME,
    STAGE_RUN_TAGS,
)
from eval_pipeline.settings import private_umask

# Before any run logs or writes anything, whatever launched it: every log record of the process
# is redacted (Dagster's event log and compute logs included), and what it creates is private.
install_log_redaction()
private_umask()

ALL_ASSETS = [
    *CORPUS_ASSETS,
    *GRAPH_ASSETS,
    *RECONCILE_ASSETS,
    *RETRIEVAL_ASSETS,
    *SCORING_ASSETS,
    *COMPARE_ASSETS,
    # Beside the chain, not in it (ops/chain.py's CHAIN_STAGES): it reads the judge-check store.
    *JUDGE_AGREEMENT_ASSETS,
]
ALL_CHECKS = [
    *CORPUS_CHECKS,
    *GRAPH_CHECKS,
    *RECONCILE_CHECKS,
    *RETRIEVAL_CHECKS,
    *SCORING_CHECKS,
    *COMPARE_CHECKS,
]


def graph_store() -> GraphStore:
    """The embedded ArcadeDB unless EVAL_GRAPH_URI names another server (the compose
    deployment sets it to Memgraph); credentials only ever come from the environment."""
    if not os.environ.get("EVAL_GRAPH_URI"):
        return GraphStore()
    return GraphStore(
        backend=os.environ.get("EVAL_GRAPH_BACKEND", "memgraph"),
        uri=dg.EnvVar("EVAL_GRAPH_URI"),
        database=os.environ.get("EVAL_GRAPH_DATABASE", "memgraph"),
        user=dg.EnvVar("EVAL_GRAPH_USER") if os.environ.get("EVAL_GRAPH_USER") else None,
        password=(
            dg.EnvVar("EVAL_GRAPH_PASSWORD") if os.environ.get("EVAL_GRAPH_PASSWORD") else None
        ),
        http_url=os.environ.get("EVAL_GRAPH_HTTP_URL"),
        # A run over K question batches: one instance each (compose: memgraph-1 ... memgraph-K).
        batch_uri=os.environ.get("EVAL_GRAPH_BATCH_URI") or None,
    )


# The assets' own job: one stage of the chain runs in it (ops/chain.py), in one process (the
# multiprocess executor costs ~2.5 s per step here and buys nothing on one graph database).
eval_stage = dg.define_asset_job(
    name=STAGE_JOB_NAME,
    selection=dg.AssetSelection.all(),
    executor_def=dg.in_process_executor,
    description="One stage of the evaluation chain (launched by eval_chain, one per asset).",
    tags={"eval_pipeline/graph_instance": "default", **STAGE_RUN_TAGS},
)


# The whole chain, stage by stage: a driver run holding the graph's lease, each asset and then
# its checks in runs of their own, so the lineage shows exactly the stage that failed (Dagster
# OSS reads every asset planned in a failed run as Failed). The queued coordinator
# (deploy/dagster.yaml) allows one run per graph instance; run retries only for crashes, from
# scratch (CHAIN_RUN_TAGS): a step failure is never retried into a half-injected graph.
@dg.job(
    name=CHAIN_JOB_NAME,
    executor_def=dg.in_process_executor,
    description="The whole evaluation chain, upstream file to the scored run, stage by stage.",
    tags={"eval_pipeline/graph_instance": "default", **CHAIN_RUN_TAGS},
)
def eval_chain() -> None:
    run_chain_stages()


# Deployed, one question batch of an eval_chain run over several (ops/batch_runs.py): a run of
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
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[eval_chain, eval_stage, eval_batch],
    # "Materialize" in the UI runs an implicit asset job: in-process too, for the same reason.
    executor=dg.in_process_executor,
    schedules=OPS_SCHEDULES,
    sensors=OPS_SENSORS,
    resources={
        "paths": ProjectPaths(),
        "corpus": CorpusSettings(),
        "graph": graph_store(),
        "reconcile": ReconcilerSettings(),
        "retrieval": RetrievalSettings(),
        "scoring": ScoringSettings(),
        **COMPARE_RESOURCES,
    },
)
