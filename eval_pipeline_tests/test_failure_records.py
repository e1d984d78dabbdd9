"""The failure log's one writer: the record the three writers wrote, plus schema_version,
checked through its model, redacted, private."""

from __future__ import annotations

import json
import stat

import pytest

from eval_pipeline.failure_records import (
    FailedStep,
    FailureRecord,
    append_failure,
    failures_path,
    read_failures,
)
from eval_pipeline.runs.records import RecordError


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path))
    return tmp_path


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_step_failure_is_the_record_the_asset_wrapper_wrote(state):
    record = append_failure(
        run_id="r1",
        job="__ASSET_JOB",
        trigger="manual",
        failed_steps=[{"step": "goldens", "assets": ["goldens"], "error": "ValueError: x"}],
        message="ValueError: x",
    )
    assert failures_path() == state / "ops" / "failures.jsonl"
    [line] = _lines(failures_path())
    recorded_at = line.pop("recorded_at")
    assert recorded_at.endswith("Z") and recorded_at == record.recorded_at
    # What sensors.records_failures wrote before, key for key, and the version.
    assert line == {
        "schema_version": 1,
        "run_id": "r1",
        "job": "__ASSET_JOB",
        "trigger": "manual",
        "failure_reason": "STEP_FAILURE",
        "will_retry": False,
        "failed_assets": ["goldens"],
        "failed_steps": [{"step": "goldens", "assets": ["goldens"], "error": "ValueError: x"}],
        "message": "ValueError: x",
    }
    assert list(line) == sorted(line)  # sort_keys, as before
    assert stat.S_IMODE(failures_path().stat().st_mode) == 0o600


def test_a_chain_check_failure_keeps_chain_run_id_and_failed_checks(state):
    append_failure(
        run_id="r2",
        chain_run_id="cli-1",
        job="eval_chain",
        trigger="cli",
        failure_reason="CHECK_FAILURE",
        failed_checks=["goldens_valid"],
        failed_steps=[FailedStep(step="goldens", assets=["goldens"], error=None)],
        message=None,
    )
    append_failure(  # a sensor's: several steps, assets from them, no chain
        run_id="r3",
        job="eval_chain",
        trigger="schedule",
        failure_reason="UNEXPECTED_TERMINATION",
        will_retry=True,
        failed_steps=[
            {"step": "b", "assets": ["b", "a"], "error": ""},
            {"step": "c", "assets": ["a"], "error": "boom"},
        ],
        message="run worker lost",
    )
    chain, sensor = _lines(failures_path())
    assert chain["chain_run_id"] == "cli-1" and chain["failed_checks"] == ["goldens_valid"]
    assert chain["failed_steps"] == [{"step": "goldens", "assets": ["goldens"], "error": None}]
    assert "chain_run_id" not in sensor and "failed_checks" not in sensor
    assert sensor["failed_assets"] == ["a", "b"]
    assert [r.run_id for r in read_failures()] == ["r2", "r3"]


def test_a_secret_in_an_error_is_redacted(state, monkeypatch):
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    append_failure(
        run_id="r4",
        job="j",
        trigger="manual",
        failed_steps=[{"step": "s", "assets": ["s"], "error": f"401 for key {key}"}],
        message=f"401 for key {key}",
    )
    text = failures_path().read_text()
    assert key not in text and "401 for key" in text


def test_a_malformed_record_is_refused_before_it_is_appended(state):
    with pytest.raises(RecordError, match=r"failed_steps.0.assets"):
        append_failure(
            run_id="r5",
            job="j",
            trigger="manual",
            failed_steps=[{"step": "s", "assets": "s", "error": None}],
            message=None,
        )
    assert not failures_path().exists()


def test_an_old_record_reads_as_version_1_and_a_cut_line_is_skipped(state):
    path = failures_path()
    path.parent.mkdir(parents=True)
    old = {
        "recorded_at": "2026-12-01T00:00:00Z",
        "run_id": "r0",
        "job": "eval_chain",
        "trigger": "manual",
        "failure_reason": "STEP_FAILURE",
        "will_retry": False,
        "failed_assets": ["goldens"],
        "failed_steps": [{"step": "goldens", "assets": ["goldens"], "error": "x"}],
        "message": "x",
    }
    path.write_text(json.dumps(old) + "\n" + '{"recorded_at": "2026-12-01T00:0\n')
    [record] = read_failures()
    assert isinstance(record, FailureRecord) and record.schema_version == 1
