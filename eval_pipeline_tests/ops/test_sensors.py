"""The run-failure sensor names the failed asset; retries are for crashes only."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from dagster._core.events import RunFailureReason  # private: the retry daemon's own decision
from dagster._core.execution.retries import auto_reexecution_should_retry_run

from eval_pipeline.assets.tags import CHAIN_RUN_TAGS
from eval_pipeline.ops.sensors import OPS_SENSORS, eval_chain_failure_sensor


@dg.asset
def upstream_ok() -> int:
    return 1


@dg.asset
def half_injected(upstream_ok: int) -> int:
    raise RuntimeError("graph server went away mid-injection")


@dg.asset
def downstream(half_injected: int) -> int:
    return half_injected


def _failed_run(job_name: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """A real failed run of a tiny in-process asset job (the shape of eval_chain)."""
    job = dg.define_asset_job(job_name, executor_def=dg.in_process_executor, tags=CHAIN_RUN_TAGS)
    defs = dg.Definitions(assets=[upstream_ok, half_injected, downstream], jobs=[job])
    result = defs.resolve_job_def(job_name).execute_in_process(
        instance=instance, raise_on_error=False
    )
    assert not result.success
    return result


def _failure_context(result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance):
    [event] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE]
    return dg.build_run_status_sensor_context(
        sensor_name=eval_chain_failure_sensor.name,
        dagster_event=event,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
    ).for_run_failure()


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path))
    return tmp_path


def test_failure_sensor_records_the_failed_asset(state):
    assert OPS_SENSORS == [eval_chain_failure_sensor]
    assert eval_chain_failure_sensor.default_status == dg.DefaultSensorStatus.RUNNING
    instance = dg.DagsterInstance.ephemeral()
    result = _failed_run("eval_chain", instance)

    assert eval_chain_failure_sensor(_failure_context(result, instance)) is None

    [line] = (state / "ops" / "failures.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["run_id"] == result.run_id
    assert record["job"] == "eval_chain"
    assert record["failed_assets"] == ["half_injected"]
    assert record["failed_steps"] == [
        {
            "step": "half_injected",
            "assets": ["half_injected"],
            "error": "RuntimeError: graph server went away mid-injection",
        }
    ]
    assert record["failure_reason"] == "STEP_FAILURE"
    assert record["will_retry"] is False


def test_failure_sensor_records_every_job_once(state):
    """ "Materialize all" runs __ASSET_JOB: its failures are recorded too, and a run already
    recorded (by its own step, or an earlier tick) is not recorded again."""
    instance = dg.DagsterInstance.ephemeral()
    result = _failed_run("__ASSET_JOB", instance)
    assert eval_chain_failure_sensor(_failure_context(result, instance)) is None
    again = eval_chain_failure_sensor(_failure_context(result, instance))
    assert isinstance(again, dg.SkipReason)
    [line] = (state / "ops" / "failures.jsonl").read_text().splitlines()
    assert json.loads(line)["job"] == "__ASSET_JOB"


def test_a_failing_asset_records_itself_without_a_daemon(state, tmp_path):
    """No sensor runs here: the chain's own asset records its failure as it raises."""
    from eval_pipeline_tests.artifacts import materialize

    bad = tmp_path / "truncated.json"
    bad.write_text('[{"question_id": "q1", "question_type"')
    result = materialize(
        ["longmemeval_upstream"],
        dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
        paths={"state_dir": str(tmp_path / "s")},
        corpus={"upstream": str(bad)},
    )
    assert not result.success
    [line] = (state / "ops" / "failures.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["run_id"] == result.run_id and record["failed_assets"] == ["longmemeval_upstream"]
    assert "truncated" in record["message"] or "JSON" in record["message"]


def test_retry_tags_retry_crashes_but_never_step_failures():
    """What the retry daemon would decide for a failed eval_chain run with CHAIN_RUN_TAGS."""
    instance = dg.DagsterInstance.ephemeral()
    run = _failed_run("eval_chain", instance).dagster_run
    assert CHAIN_RUN_TAGS.items() <= run.tags.items()
    assert not auto_reexecution_should_retry_run(instance, run, RunFailureReason.STEP_FAILURE)
    for crash in (RunFailureReason.UNEXPECTED_TERMINATION, RunFailureReason.RUN_WORKER_RESTART):
        assert auto_reexecution_should_retry_run(instance, run, crash)


def test_no_op_level_retry_policy_in_the_chain():
    """An op RetryPolicy would re-run a half-done step in place: none is allowed."""
    from eval_pipeline.definitions import defs

    job = defs.resolve_job_def("eval_chain")
    policies = {n.name: n.retry_policy for n in job.graph.node_dict.values()}
    assert job.op_retry_policy is None
    assert {k: v for k, v in policies.items() if v is not None} == {}
