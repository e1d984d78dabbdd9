"""Run the eval chain headless, through the same Dagster job the UI launches."""

from __future__ import annotations

import sys

from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec


def chain_run_config(upstream: UpstreamSpec, sample: SampleSpec) -> dict:
    corpus = {
        "source": upstream.source,
        "path": upstream.path,
        "variant": upstream.variant,
        "revision": upstream.revision,
        "sha256": upstream.sha256,
        "cache_dir": upstream.cache_dir,
        **sample.model_dump(),
    }
    return {
        "resources": {"corpus": {"config": corpus}},
        "loggers": {"console": {"config": {"log_level": "INFO"}}},
    }


def run_chain(*, upstream: UpstreamSpec, sample: SampleSpec) -> int:
    from eval_pipeline.dagster_home import local_instance
    from eval_pipeline.definitions import defs

    instance = local_instance()
    job = defs.resolve_job_def("eval_chain")
    result = job.execute_in_process(
        run_config=chain_run_config(upstream, sample), instance=instance, raise_on_error=False
    )
    if not result.success:
        failed = [
            f"{ev.step_key}: {ev.step_failure_data.error.message.strip().splitlines()[-1]}"
            for ev in result.all_events
            if ev.is_step_failure and ev.step_failure_data and ev.step_failure_data.error
        ]
        print(
            f"eval-pipeline: error: run {result.run_id} failed at " + "; ".join(failed),
            file=sys.stderr,
        )
        return 1
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            level = "warning" if ev.severity.value == "WARN" else "check failed"
            print(f"{level}: {ev.asset_key.to_user_string()}:{ev.check_name}", file=sys.stderr)
    print(f"run {result.run_id} succeeded")
    return 0
