"""The noise floor changes only when asked (issue 27, part 7), end to end through the CLI.

`eval-pipeline run --repeat 3` asks: its chain calibrates the floor from its own three
repeats. Two ordinary runs of the same configuration follow: their `noise_floor` reads the
floor in force and says that two more repeats exist, and the floor file stays byte for byte
what the three repeats wrote.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest

from eval_pipeline.runs.calibrate import floor_path_for
from eval_pipeline.runs.load import load_run

pytestmark = pytest.mark.slow  # five passes of the chain


def _latest_floor_metadata(chain) -> dict:
    event = chain.instance().get_latest_materialization_event(dg.AssetKey("noise_floor"))
    meta = event.asset_materialization.metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def test_only_calibrate_or_repeat_writes_the_floor(chain):
    res = chain.run("--repeat", "3", "--sample", "10", "--label", "floor")
    assert res.returncode == 0, res.stderr[-3000:]
    repeats = res.run_dirs
    assert len(repeats) == 3
    assert any(line.startswith("[1/1] noise_floor: ok") for line in res.stage_lines)
    path = floor_path_for(chain.state / "runs", load_run(repeats[0]))
    written = json.loads(path.read_text())
    assert sorted(written["runs"]) == sorted(str(d) for d in repeats)
    meta = _latest_floor_metadata(chain)
    assert meta["written"] is True and meta["repeats"] == 3
    before = path.read_bytes()

    for n in (1, 2):  # ordinary runs of the same configuration: read, never rewrite
        res = chain.run("--sample", "10", "--label", "floor")
        assert res.returncode == 0, res.stderr[-3000:]
        assert path.read_bytes() == before
        meta = _latest_floor_metadata(chain)
        assert meta["written"] is False and meta["calibrated"] is True
        assert meta["repeats"] == 3 and len(meta["unused_repeats"]) == n
        assert f"{n} more independent repeat(s)" in meta["reason"]
        assert "eval-pipeline calibrate " in meta["reason"]
