"""Calibration: refusals, the floor on constructed repeats, pass rates and stability, the
saved file compare uses, the CLI and the noise_floor asset."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from eval_pipeline.runs import cli
from eval_pipeline.runs.calibrate import (
    CalibrationRefused,
    calibrate,
    default_noise_floor_path,
    estimate_floor,
    floor_path_for,
    load_noise_floor,
    save_noise_floor,
)
from eval_pipeline.runs.compare import compare
from eval_pipeline.runs.load import load_run
from eval_pipeline_tests.artifacts import materialize, seed_output
from eval_pipeline_tests.runs.synthetic import (
    BASE_PINS,
    PIN_CHANGES,
    outcomes,
    set_pin,
    write_run,
)

# Three repeats over 10 answerable questions: q7 and q8 flip, the rest are stable.
REPEATS = [
    [True] * 8 + [False, False],  # 80%
    [True] * 7 + [False, False, False],  # 70%
    [True] * 8 + [True, False],  # 90%
]


def _repeats(tmp_path, values=REPEATS, **kw):
    return [
        write_run(tmp_path, outcomes("q", v, **kw), label=f"rep{i}") for i, v in enumerate(values)
    ]


def test_refuses_fewer_than_two_runs(tmp_path):
    (one,) = _repeats(tmp_path, REPEATS[:1])
    for runs in ([], [one]):
        with pytest.raises(CalibrationRefused, match="at least two"):
            calibrate(runs)


def test_refuses_the_same_run_twice(tmp_path):
    (one,) = _repeats(tmp_path, REPEATS[:1])
    with pytest.raises(CalibrationRefused, match="given twice"):
        calibrate([one, one])


def test_refuses_different_question_sets(tmp_path):
    a = write_run(tmp_path, outcomes("q", [True] * 5))
    b = write_run(tmp_path, outcomes("x", [True] * 5))
    with pytest.raises(CalibrationRefused) as err:
        calibrate([a, b])
    assert err.value.pin_names == ["question_set"]


def test_refuses_different_pins_naming_every_one(tmp_path):
    rows = outcomes("q", [True] * 5)
    a = write_run(tmp_path, rows)
    pins = set_pin(BASE_PINS, *PIN_CHANGES["judge.model"])
    b = write_run(tmp_path, rows, pins=pins)
    c = write_run(tmp_path, rows, pins=set_pin(BASE_PINS, "reconciler.name", "llm"))
    with pytest.raises(CalibrationRefused) as err:
        calibrate([a, b, c])
    assert err.value.pin_names == ["judge.model", "reconciler"]
    text = str(err.value)
    assert b.name in text and c.name in text


def test_floor_on_constructed_repeats(tmp_path):
    floor = calibrate(_repeats(tmp_path))
    tier = floor.tiers["1"].coverage
    assert tier.rates == [0.8, 0.7, 0.9]
    assert tier.spread_pp == pytest.approx(20.0)  # 70% vs 90%
    # q7 passes 2/3, q8 1/3: |difference| = 20 pp with probability 8/81 ≈ 9.9% > 5%, so the
    # 95th percentile of the simulated differences is 20 pp.
    assert tier.bootstrap_half_width_pp == pytest.approx(20.0)
    assert tier.floor_pp == pytest.approx(20.0) and tier.unstable == 2
    assert floor.questions["q7"].pass_rate == pytest.approx(2 / 3)
    assert floor.questions["q8"].pass_rate == pytest.approx(1 / 3)
    assert floor.questions["q0"].pass_rate == 1.0 and floor.questions["q9"].pass_rate == 0.0
    s = floor.stability["1"]
    assert (s.answerable, s.always_pass, s.ever_pass, s.never_pass) == (10, 7, 9, 1)
    assert "7 of 10 answerable questions always pass, 9 ever pass" in floor.stability_line
    assert floor.floor_for("1", "multi-session") == pytest.approx(20.0)
    assert floor.floor_for("2") is None


def test_a_deterministic_configuration_has_floor_zero(tmp_path):
    floor = calibrate(_repeats(tmp_path, [REPEATS[0]] * 3))
    tier = floor.tiers["1"].coverage
    assert (tier.floor_pp, tier.spread_pp, tier.bootstrap_half_width_pp) == (0.0, 0.0, 0.0)


def test_the_bootstrap_can_exceed_the_observed_spread():
    # Two repeats that happen to agree in rate (one question up, one down): spread 0, yet
    # runs of this configuration can differ by 10 pp.
    runs = [
        {f"q{i}": i != 0 for i in range(10)},
        {f"q{i}": i != 1 for i in range(10)},
    ]
    est = estimate_floor(runs, [f"q{i}" for i in range(10)])
    assert est.spread_pp == 0.0
    assert est.bootstrap_half_width_pp == pytest.approx(20.0)
    assert est.floor_pp == est.bootstrap_half_width_pp


def test_unscored_outcomes_are_left_out_of_the_spread(tmp_path):
    runs = _repeats(tmp_path, [[True, True, None, False], [True, True, True, False]])
    tier = calibrate(runs).tiers["1"].coverage
    # Over the questions scored in both (q0, q1, q3), both runs cover 2 of 3.
    assert tier.spread_pp == 0.0 and tier.rates == [pytest.approx(2 / 3), 0.75]
    assert calibrate(runs).stability["1"].unscored_in_some == 1


def test_saved_floor_loads_back_and_compare_uses_it(tmp_path):
    runs = _repeats(tmp_path)
    floor = calibrate(runs)
    path = save_noise_floor(floor, default_noise_floor_path(runs))
    # One file per configuration, named by its key, in the runs directory's noise_floors/.
    assert path == floor_path_for(tmp_path, load_run(runs[0])) == default_noise_floor_path(runs)
    assert path.parent == tmp_path / "noise_floors" and path.stem == floor.key
    assert json.loads(path.read_text())["tiers"]["1"]["coverage"]["floor_pp"] == pytest.approx(20)
    assert load_noise_floor(path) == floor
    c = compare(runs[1], runs[2], path)
    assert c.calibrated and c.tiers[0].floor_pp == pytest.approx(20.0)
    assert c.tiers[0].classification == "not real"  # +20 pp is within the floor
    assert c.noise_floor == str(path)


def test_cli_calibrate(tmp_path, capsys):
    runs = _repeats(tmp_path)
    out = tmp_path / "floors" / "nf.json"
    assert cli.main(["calibrate", *map(str, runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tier 1: noise floor 20.0 pp" in printed and f"noise floor: {out}" in printed
    assert load_noise_floor(out).tiers["1"].coverage.floor_pp == pytest.approx(20.0)

    assert cli.main(["calibrate", str(runs[0])]) == cli.EXIT_REFUSED
    assert "at least two" in capsys.readouterr().err
    other = write_run(tmp_path, outcomes("x", [True] * 3))
    assert cli.main(["calibrate", str(runs[0]), str(other)]) == cli.EXIT_REFUSED
    assert "question_set" in capsys.readouterr().err


# --- the noise_floor asset ------------------------------------------------------------------


def _materialize(tmp_path, latest, **calibration):
    """noise_floor alone, its input the scored_run output that wrote `latest` (the chain's
    latest run), configured by the `calibration` section."""
    seed_output(tmp_path, "scored_run", facts={"run_dir": str(latest)})
    return materialize(
        ["noise_floor"],
        dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
        paths={"state_dir": str(tmp_path)},
        calibration=calibration,
    )


def _meta(result):
    (mat,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in mat.materialization.metadata.items()}


def test_asset_calibrates_over_the_runs_it_is_given_and_only_then(tmp_path):
    runs_dir = tmp_path / "runs"
    first = write_run(runs_dir, outcomes("q", REPEATS[0]), label="lone")
    write_run(runs_dir, outcomes("q", REPEATS[1]), pins=set_pin(BASE_PINS, "top_k", 3))
    repeats = _repeats(runs_dir, REPEATS[1:])
    # Not asked (no runs named): the floor in force is read, nothing is written.
    meta = _meta(_materialize(tmp_path, repeats[-1]))
    assert meta["calibrated"] is False and meta["written"] is False
    assert not (runs_dir / "noise_floors").exists()

    names = [first.name, *(r.name for r in repeats)]
    meta = _meta(_materialize(tmp_path, repeats[-1], runs=names))
    assert meta["calibrated"] is True and meta["written"] is True and meta["repeats"] == 3
    assert meta["runs"] == names
    assert meta["tier1_floor_pp"] == pytest.approx(20.0)
    assert "| 1 | all answerable | 20.0 |" in meta["floors"]
    # Stored per configuration, under the key of its pins; never one shared file.
    floor = load_noise_floor(floor_path_for(runs_dir, load_run(first)))
    assert floor.tiers["1"].coverage.floor_pp == 20.0
    assert not (runs_dir / "noise_floor.json").exists()


def test_asset_with_explicit_runs_that_are_not_repeats_fails(tmp_path):
    a = write_run(tmp_path / "runs", outcomes("q", [True] * 3))
    b = write_run(
        tmp_path / "runs", outcomes("q", [True] * 3), pins=set_pin(BASE_PINS, "scope", "batch")
    )
    result = _materialize(tmp_path, b, runs=[a.name, str(b)])
    assert not result.success
    assert not (tmp_path / "runs" / "noise_floors").exists()
