"""Operating the pipeline: the nightly schedule, the run-failure sensor, crash-only run
retries (job tags) and the browser check of the Dagster UI (`eval-pipeline ui-check`).

eval_pipeline.definitions adds OPS_SCHEDULES and OPS_SENSORS to its Definitions and
CHAIN_RUN_TAGS to the eval_chain job's tags.
"""

from eval_pipeline.ops.schedules import OPS_SCHEDULES, nightly_schedule
from eval_pipeline.ops.sensors import OPS_SENSORS, eval_chain_failure_sensor
from eval_pipeline.ops.tags import CHAIN_RUN_TAGS

__all__ = [
    "CHAIN_RUN_TAGS",
    "OPS_SCHEDULES",
    "OPS_SENSORS",
    "eval_chain_failure_sensor",
    "nightly_schedule",
]
