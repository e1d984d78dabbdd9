"""The whole pipeline in one place: assets, checks, resources and jobs.

`dagster dev -m eval_pipeline.definitions` (or workspace.yaml) loads this module.
"""

import dagster as dg

from eval_pipeline.assets.corpus import CORPUS_ASSETS, CORPUS_CHECKS
from eval_pipeline.assets.resources import CorpusSettings, ProjectPaths

ALL_ASSETS = [*CORPUS_ASSETS]
ALL_CHECKS = [*CORPUS_CHECKS]

# One graph database per chain: steps run one after another in one process (the
# multiprocess executor costs ~2.5 s per step here and buys no parallelism).
eval_chain = dg.define_asset_job(
    name="eval_chain",
    selection=dg.AssetSelection.all(),
    executor_def=dg.in_process_executor,
    description="The whole evaluation chain, upstream file to the last stage.",
    # The queued coordinator (deploy/dagster.yaml) allows one run per graph instance.
    tags={"eval_pipeline/graph_instance": "default"},
)

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[eval_chain],
    resources={
        "paths": ProjectPaths(),
        "corpus": CorpusSettings(),
    },
)
