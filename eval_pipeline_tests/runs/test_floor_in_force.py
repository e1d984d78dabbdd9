"""The noise floor in force is read, never rewritten, by an ordinary run (issue 27, part 7).

On synthetic bundles shaped as `run --repeat N` writes them: a floor calibrated from three
repeats stays the floor of three repeats when more repeats arrive, and the reading says how
many more exist and the `calibrate` command that would use them. The chain end to end (the
`noise_floor` asset, `run --repeat 3`, then ordinary runs) is in test_floor_only_when_asked.py.
"""

from __future__ import annotations

import pytest

from eval_pipeline.runs.calibrate import (
    NoiseFloorError,
    calibrate,
    floor_path_for,
    save_noise_floor,
)
from eval_pipeline.runs.floor_in_force import floor_in_force
from eval_pipeline.runs.load import load_run
from eval_pipeline_tests.runs.synthetic import outcomes, repeat_of, usage_snapshot, write_run

VALUES = [
    [True] * 8 + [False, False],
    [True] * 7 + [False, False, False],
    [True] * 8 + [True, False],
]


def _repeats(runs_dir, salt, values):
    return [
        load_run(
            write_run(
                runs_dir,
                outcomes("q", v),
                label=f"{salt}-repeat{k}",
                repeat=repeat_of(salt, k, len(values)),
                llm_usage={"judge": usage_snapshot(identity=f"{salt}/{k}")},
            )
        )
        for k, v in enumerate(values, start=1)
    ]


def test_no_floor_yet_says_how_to_get_one(tmp_path):
    (only,) = _repeats(tmp_path, "s0", VALUES[:1])
    status = floor_in_force(tmp_path, only)
    assert status.floor is None and status.calibrated_on == 0
    assert status.path == str(floor_path_for(tmp_path, only))
    assert "no noise floor" in status.note() and "--repeat 3" in status.note()
    assert not (tmp_path / "noise_floors").exists()  # reading wrote nothing


def test_more_repeats_are_reported_and_the_floor_is_left_as_it_was(tmp_path):
    first = _repeats(tmp_path, "s1", VALUES)
    path = save_noise_floor(calibrate(first), floor_path_for(tmp_path, first[0]))
    before = path.read_bytes()
    status = floor_in_force(tmp_path, first[-1])
    assert status.calibrated_on == 3 and status.unused == []
    assert (
        status.note().startswith(f"noise floor in force: {path}") and "3 repeats" in status.note()
    )

    later = _repeats(tmp_path, "s2", VALUES[:2])  # two more runs of the same configuration
    status = floor_in_force(tmp_path, later[-1])
    assert status.calibrated_on == 3
    assert sorted(status.unused) == sorted(r.name for r in later)
    note = status.note()
    assert "2 more independent repeat(s)" in note and "unused until asked" in note
    assert status.calibrate_command().startswith("eval-pipeline calibrate ")
    assert all(str(r.path) in status.calibrate_command() for r in [*first, *later])
    assert path.read_bytes() == before


def test_an_unreadable_floor_is_an_error_naming_the_file(tmp_path):
    (run,) = _repeats(tmp_path, "s3", VALUES[:1])
    bad = tmp_path / "broken.json"
    bad.write_text("{}")
    with pytest.raises(NoiseFloorError, match="broken.json"):
        floor_in_force(tmp_path, run, bad)
