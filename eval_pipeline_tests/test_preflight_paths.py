"""Preflight finds a runs directory no bundle can be written to before anything runs (issue
28, finding 9: a read-only runs dir was found only by scored_run, after the graph was
rebuilt). The check writes a file for real: root ignores mode bits, and neither tells a
read-only mount, so the unwritable place here is procfs, which nobody can write to."""

from __future__ import annotations

import os

import pytest

from eval_pipeline.config import RunConfig
from eval_pipeline.preflight import PreflightError, preflight


def _run(runs_dir: str, state: str) -> RunConfig:
    return RunConfig.model_validate(
        {"paths": {"state_dir": state}, "scoring": {"runs_dir": runs_dir}}
    )


def test_preflight_refuses_a_runs_dir_it_cannot_write(tmp_path):
    with pytest.raises(PreflightError) as err:
        preflight(_run("/proc/self/eval-runs", str(tmp_path)))
    message = str(err.value)
    assert message.startswith("--runs-dir: cannot write there (it would be created in /proc/self)")
    assert "\n" not in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through mode bits")
def test_preflight_refuses_a_read_only_runs_dir(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o555)
    try:
        with pytest.raises(PreflightError, match="--runs-dir: cannot write there: "):
            preflight(_run(str(runs), str(tmp_path)))
    finally:
        runs.chmod(0o755)


def test_preflight_accepts_a_runs_dir_still_to_be_made_and_leaves_nothing(tmp_path):
    preflight(_run(str(tmp_path / "new" / "runs"), str(tmp_path / "state")))
    assert sorted(os.listdir(tmp_path)) == []  # nothing created, no probe left behind
