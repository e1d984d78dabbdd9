"""The whole pipeline in one place: assets, checks, resources, the IO manager, jobs, the
schedule and the sensor.

`dagster dev -m eval_pipeline.definitions` (or workspace.yaml) loads this module.
"""

import dagster as dg

from eval_pipeline.assets.jobs import ASSETS, CHECKS, RESOURCES, eval_stage
from eval_pipeline.llm import install_log_redaction
from eval_pipeline.ops.jobs import eval_batch, eval_chain
from eval_pipeline.ops.schedules import OPS_SCHEDULES
from eval_pipeline.ops.sensors import OPS_SENSORS
from eval_pipeline.settings import private_umask

# Before any run logs or writes anything, whatever launched it: every log record of the process
# is redacted (Dagster's event log and compute logs included), and what it creates is private.
install_log_redaction()
private_umask()


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
