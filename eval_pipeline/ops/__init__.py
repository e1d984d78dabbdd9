"""Operating the pipeline: the nightly schedule (`schedules`), the run-failure sensor
(`sensors`), crash-only run retries (`tags`, the eval_chain job's tags) and the browser check
of the Dagster UI (`ui_check`, `eval-pipeline ui-check`).

Nothing is imported here: the CLI loads `ops.cli` without paying for Dagster's import.
"""
