"""Preflight finds input no run can use before anything runs (issue 28).

- Finding 5: a record too large for the graph, in a local file nobody pinned, is exit 2 with
  one line; it used to be refused after the wipe (535 nodes down to 76).
- Finding 9: a runs directory no bundle can be written to (a read-only one was found only by
  scored_run, after the graph was rebuilt). The check writes a file for real: root ignores
  mode bits, and neither tells a read-only mount, so the unwritable place here is procfs,
  which nobody can write to.
"""

from __future__ import annotations

import os

import pytest

from eval_pipeline.config import RunConfig
from eval_pipeline.corpus import limits
from eval_pipeline.preflight import PreflightError, preflight
from eval_pipeline_tests.corpus.records import record, session, write_upstream


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


def test_preflight_refuses_an_oversized_record_of_an_unpinned_file(tmp_path):
    recs = [record("q1"), record("q2", "multi-session")]
    recs[1]["haystack_sessions"][1] = session("d", n_turns=limits.MAX_SESSION_TURNS + 1)
    up = write_upstream(tmp_path / "mine.json", recs)
    run = RunConfig.model_validate(
        {"paths": {"state_dir": str(tmp_path / "state")}, "corpus": {"upstream": str(up)}}
    )
    with pytest.raises(PreflightError) as err:
        preflight(run)
    assert str(err.value) == (
        f"--upstream {up}: record 'q2', field 'haystack_sessions[1]': 2,001 turns, over the "
        "limit of 2,000 per session"
    )


def test_a_reader_prompt_without_a_reader_model_is_refused(tmp_path):
    # The offline reader sends no prompt: a run pinned to LongMemEval's would claim a reading
    # nobody did.
    run = RunConfig.model_validate(
        {
            "paths": {"state_dir": str(tmp_path)},
            "retrieval": {"reader_prompt": "longmemeval-cot"},
        }
    )
    with pytest.raises(PreflightError, match="--reader-prompt longmemeval-cot: the offline"):
        preflight(run)
