"""Comparison: refusals on every comparability pin, classification, verdict, flips,
efficiency, the CLI's exit codes and the run_comparison asset with its blocking check."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.runs import cli, outcome
from eval_pipeline.runs.calibrate import floor_path_for, save_noise_floor
from eval_pipeline.runs.compare import (
    ComparisonRefused,
    NoiseFloorMismatch,
    classify,
    compare,
    flip_line,
    stage_line,
)
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.pins import COMPARABILITY_PINS
from eval_pipeline_tests.artifacts import materialize, seed_output
from eval_pipeline_tests.runs.synthetic import (
    BASE_PINS,
    PIN_CHANGES,
    hand_floor,
    outcomes,
    row,
    set_pin,
    write_run,
)

ALL_COVERED = [True] * 20


def _pair(tmp_path, base_rows, cand_rows, *, cand_pins=None):
    base = write_run(tmp_path, base_rows, label="base")
    cand = write_run(tmp_path, cand_rows, label="cand", pins=cand_pins)
    return base, cand


# --- refusals -----------------------------------------------------------------------------


def test_every_comparability_pin_has_a_refusal_test():
    # The embedder pin refuses only between two runs that embed: test_embedder_pin.py.
    assert {p.name for p in COMPARABILITY_PINS} == {
        *PIN_CHANGES,
        "question_set",
        "retriever.embedder.sha256",
    }


@pytest.mark.parametrize("pin", sorted(PIN_CHANGES))
def test_compare_refuses_each_pin_mismatch(tmp_path, pin):
    where, value = PIN_CHANGES[pin]
    rows = outcomes("q", ALL_COVERED)
    base, cand = _pair(tmp_path, rows, rows, cand_pins=set_pin(BASE_PINS, where, value))
    with pytest.raises(ComparisonRefused) as err:
        compare(base, cand)
    assert err.value.pin_names == [pin]
    assert pin in str(err.value)


def test_a_bundle_from_before_batches_reads_as_one_batch(tmp_path):
    """Bundles written before partitioning was pinned ran on one instance: comparable with a
    run of one batch, refused against a run over two."""
    from eval_pipeline.corpus.batches import partitioning_pin

    rows = outcomes("q", ALL_COVERED)
    assert "partitioning" not in BASE_PINS
    one = set_pin(BASE_PINS, "partitioning", partitioning_pin(1))
    base, cand = _pair(tmp_path, rows, rows, cand_pins=one)
    assert compare(base, cand).changes == []
    two = write_run(tmp_path, rows, label="two", pins=set_pin(one, "partitioning.batches", 2))
    with pytest.raises(ComparisonRefused) as err:
        compare(base, two)
    assert err.value.pin_names == ["partitioning"]


def test_compare_refuses_a_different_question_set(tmp_path):
    base, cand = _pair(tmp_path, outcomes("q", [True] * 5), outcomes("x", [True] * 5))
    with pytest.raises(ComparisonRefused) as err:
        compare(base, cand)
    assert err.value.pin_names == ["question_set"]
    (line,) = err.value.lines()
    assert "5 question(s) only in base (q0, q1" in line and "5 only in candidate" in line


def test_several_mismatches_are_all_named(tmp_path):
    pins = BASE_PINS
    for pin in ("corpus.sha256", "judge.model", "reader", "tokenizer"):
        pins = set_pin(pins, *PIN_CHANGES[pin])
    base, cand = _pair(
        tmp_path, outcomes("q", [True] * 5), outcomes("q", [True] * 6), cand_pins=pins
    )
    with pytest.raises(ComparisonRefused) as err:
        compare(base, cand)
    expected = ["corpus.sha256", "question_set", "judge.model", "tokenizer", "reader"]
    assert err.value.pin_names == expected
    assert all(name in str(err.value) for name in expected)
    assert len(err.value.lines()) == len(expected)


def test_what_a_team_changes_is_not_a_refusal_but_is_listed(tmp_path):
    pins = set_pin(BASE_PINS, "reconciler.name", "llm")
    pins = set_pin(pins, "retriever.retriever", "graph_agent")
    pins = set_pin(pins, "graph.backend", "memgraph")
    pins = set_pin(pins, "code_version", "0.2.0")
    rows = outcomes("q", ALL_COVERED)
    base, cand = _pair(tmp_path, rows, rows, cand_pins=pins)
    c = compare(base, cand)
    assert {ch["pin"] for ch in c.changes} == {
        "reconciler",
        "retriever",
        "graph.backend",
        "code_version",
    }


# --- classification and verdict ------------------------------------------------------------


def test_classification_rule():
    assert classify(-10.0, 0.01, None) == "cannot tell"
    assert classify(None, 0.01, 5.0) == "cannot tell"
    assert classify(-10.0, 0.01, 5.0) == "real"
    assert classify(-10.0, 0.06, 5.0) == "not real"  # McNemar not significant
    assert classify(-5.0, 0.01, 5.0) == "not real"  # not beyond the floor (strict)
    assert classify(0.0, 1.0, 0.0) == "not real"


def test_real_loss_with_an_efficiency_gain_is_regressed(tmp_path):
    base_rows = outcomes("q", ALL_COVERED, tokens=500)
    # 8 of 20 lost (b=8, c=0: p = 2/2**8), the rest answered with a fifth of the tokens.
    cand_rows = outcomes("q", [False] * 8 + [True] * 12, tokens=100)
    base, cand = _pair(tmp_path, base_rows, cand_rows)
    c = compare(base, cand, hand_floor(base, 5.0))
    (tier,) = c.tiers
    assert tier.delta_pp == pytest.approx(-40.0)
    assert (tier.b, tier.c, tier.p_value) == (8, 0, 2 / 2**8)
    assert tier.classification == "real"
    (eff,) = c.efficiency
    assert eff.delta_tokens == -400 and eff.covered_in_both == 12
    assert c.verdict == "REGRESSED" and "tier 1" in c.verdict_reason


def test_uncalibrated_is_inconclusive_and_says_not_calibrated(tmp_path):
    base, cand = _pair(
        tmp_path, outcomes("q", ALL_COVERED), outcomes("q", [False] * 10 + [True] * 10)
    )
    c = compare(base, cand)
    assert not c.calibrated
    assert {d.classification for d in [*c.tiers, *c.by_type]} == {"cannot tell"}
    assert c.verdict == "INCONCLUSIVE" and "NOT CALIBRATED" in c.verdict_reason
    assert c.tiers[0].floor_text == "NOT CALIBRATED"


def test_real_gain_is_improved(tmp_path):
    base, cand = _pair(
        tmp_path, outcomes("q", [False] * 10 + [True] * 10), outcomes("q", ALL_COVERED)
    )
    c = compare(base, cand, hand_floor(base, 5.0))
    assert c.tiers[0].classification == "real" and c.tiers[0].delta_pp == pytest.approx(50.0)
    assert c.verdict == "IMPROVED"


def test_a_loss_within_the_floor_or_without_significance_is_inconclusive(tmp_path):
    # 3 of 20 lost: -15 pp, p = 0.25: beyond a 5 pp floor but not significant.
    base, cand = _pair(
        tmp_path, outcomes("q", ALL_COVERED), outcomes("q", [False] * 3 + [True] * 17)
    )
    c = compare(base, cand, hand_floor(base, 5.0))
    assert c.tiers[0].classification == "not real"
    assert c.verdict == "INCONCLUSIVE"
    # 8 lost is significant, but a 50 pp floor swallows a 40 pp delta.
    base2 = write_run(tmp_path, outcomes("q", ALL_COVERED))
    cand2 = write_run(tmp_path, outcomes("q", [False] * 8 + [True] * 12))
    c2 = compare(base2, cand2, hand_floor(base2, 50.0))
    assert c2.tiers[0].p_value < 0.05 and c2.tiers[0].classification == "not real"
    assert c2.verdict == "INCONCLUSIVE"


def test_a_real_loss_in_one_tier_outweighs_a_real_gain_in_another(tmp_path):
    base_rows = outcomes("a", ALL_COVERED, tier=1) + outcomes("b", [False] * 20, tier=2)
    cand_rows = outcomes("a", [False] * 10 + [True] * 10, tier=1) + outcomes(
        "b", ALL_COVERED, tier=2
    )
    base, cand = _pair(tmp_path, base_rows, cand_rows)
    c = compare(base, cand, hand_floor(base, 5.0))
    assert [(d.tier, d.classification) for d in c.tiers] == [("1", "real"), ("2", "real")]
    assert c.verdict == "REGRESSED" and "tier 1" in c.verdict_reason


def test_mcnemar_against_hand_computed_values_and_unscored_left_out(tmp_path):
    # b = 1 (covered -> not), c = 9 (not -> covered), 5 concordant, 3 unscored on one side.
    base_vals = [True] + [False] * 9 + [True] * 5 + [None, True, False]
    cand_vals = [False] + [True] * 9 + [True] * 5 + [True, None, None]
    base, cand = _pair(tmp_path, outcomes("q", base_vals), outcomes("q", cand_vals))
    (tier,) = compare(base, cand).tiers
    assert (tier.b, tier.c, tier.pairs, tier.excluded_unscored) == (1, 9, 15, 3)
    assert tier.p_value == 2 * (1 + 10) / 1024  # 2 * P[Bin(10, 1/2) <= 1]
    assert tier.base_rate == pytest.approx(6 / 15) and tier.candidate_rate == pytest.approx(14 / 15)
    assert tier.delta_pp == pytest.approx(100 * 8 / 15)


def test_per_question_type_uses_its_own_floor_and_abstention_stays_apart(tmp_path):
    base_rows = [
        *outcomes("m", [True] * 10, qtype="multi-session"),
        *outcomes("t", [True] * 10, qtype="temporal-reasoning"),
        *outcomes("x", [True] * 10, abstention=True),
    ]
    cand_rows = [
        *outcomes("m", [False] * 7 + [True] * 3, qtype="multi-session"),
        *outcomes("t", [True] * 10, qtype="temporal-reasoning"),
        *outcomes("x", [False] * 10, abstention=True),
    ]
    base, cand = _pair(tmp_path, base_rows, cand_rows)
    floor = hand_floor(base, 5.0, by_type={"multi-session": 80.0})
    c = compare(base, cand, floor)
    by_type = {d.question_type: d for d in c.by_type}
    assert by_type["multi-session"].floor_pp == 80.0
    assert by_type["multi-session"].classification == "not real"  # -70 pp within 80
    assert by_type["temporal-reasoning"].floor_pp == 5.0  # falls back to the tier's
    (ab,) = c.abstention
    assert ab.delta_pp == pytest.approx(-100.0) and ab.b == 10
    # Answerable: 7 of 20 lost, p = 2/128 < 0.05, -35 pp > 5 pp: real.
    assert c.tiers[0].classification == "real" and c.verdict == "REGRESSED"
    assert "x0" in {f.question_id for f in c.lost}


def test_flips_name_the_weakest_link_of_the_failing_run(tmp_path):
    base_rows = [
        row("lost", True, weakest=None),
        row("gained", False, weakest="contextual_recall"),
        row("same", True),
    ]
    cand_rows = [
        row("lost", False, weakest="answer_judge"),
        row("gained", True, weakest=None),
        row("same", True),
    ]
    base, cand = _pair(tmp_path, base_rows, cand_rows)
    c = compare(base, cand)
    assert [(f.question_id, f.weakest_link) for f in c.lost] == [("lost", "answer_judge")]
    assert [(f.question_id, f.weakest_link) for f in c.gained] == [("gained", "contextual_recall")]


def test_efficiency_is_over_questions_covered_in_both_runs_only(tmp_path):
    base_rows = [
        row("a", True, tokens=100),
        row("b", True, tokens=200),
        row("c", True, tokens=300),
        row("only_base", True, tokens=10_000),
        row("only_cand", False, tokens=1),
    ]
    cand_rows = [
        row("a", True, tokens=50),
        row("b", True, tokens=100),
        row("c", True, tokens=150),
        row("only_base", False, tokens=5),
        row("only_cand", True, tokens=9_999),
    ]
    base, cand = _pair(tmp_path, base_rows, cand_rows)
    (eff,) = compare(base, cand).efficiency
    assert eff.covered_in_both == 3
    assert (eff.base_median_tokens, eff.candidate_median_tokens) == (200.0, 100.0)
    assert eff.delta_tokens == -100.0 and eff.delta_pct == pytest.approx(-50.0)


def test_a_noise_floor_from_other_pins_is_rejected(tmp_path):
    rows = outcomes("q", ALL_COVERED)
    other = write_run(tmp_path, rows, pins=set_pin(BASE_PINS, *PIN_CHANGES["reader"]))
    base, cand = _pair(tmp_path, rows, rows)
    with pytest.raises(NoiseFloorMismatch, match="reader"):
        compare(base, cand, hand_floor(other, 5.0))


# --- CLI ------------------------------------------------------------------------------------


def test_cli_compare_prints_the_decision_and_exits_regressed(tmp_path, capsys):
    base, cand = _pair(
        tmp_path,
        outcomes("q", ALL_COVERED),
        outcomes("q", [False] * 8 + [True] * 12),
    )
    floor_file = save_noise_floor(hand_floor(base, 5.0), tmp_path / "floor.json")
    code = cli.main(["compare", str(base), str(cand), "--noise-floor", str(floor_file)])
    out = capsys.readouterr().out
    assert code == outcome.EXIT_REGRESSED == 5
    assert "tier 1 coverage: 100.0% → 60.0% (-40.0 pp" in out and "→ real" in out
    assert "verdict: REGRESSED" in out and "q0 (tier 1, multi-session): weakest link" in out
    report = out.strip().splitlines()[-1].removeprefix("report: ")
    assert report.endswith("comparison.html")
    assert (
        tmp_path / "comparisons" / f"{base.name}__vs__{cand.name}" / "comparison.json"
    ).is_file()

    # Uncalibrated: a completed comparison, INCONCLUSIVE, which fails only when chosen.
    assert cli.main(["compare", base.name, cand.name, "--runs-dir", str(tmp_path)]) == 0
    assert "NOT CALIBRATED" in capsys.readouterr().out


def test_cli_compare_refusal_names_every_pin_and_exits_non_zero(tmp_path, capsys):
    pins = set_pin(set_pin(BASE_PINS, *PIN_CHANGES["scope"]), *PIN_CHANGES["judge.prompt_hash"])
    rows = outcomes("q", ALL_COVERED)
    base, cand = _pair(tmp_path, rows, rows, cand_pins=pins)
    code = cli.main(["compare", str(base), str(cand)])
    err = capsys.readouterr().err.splitlines()
    assert code == cli.EXIT_REFUSED != 0
    assert "scope, judge.prompt_hash" in err[0]
    assert any(line.strip().startswith("scope:") for line in err[1:])
    assert any(line.strip().startswith("judge.prompt_hash:") for line in err[1:])
    assert not (tmp_path / "comparisons").exists()


def test_cli_compare_bad_input_exits_two(tmp_path, capsys):
    run = write_run(tmp_path, outcomes("q", [True]))
    assert cli.main(["compare", str(run), str(tmp_path / "nope")]) == cli.EXIT_BAD_INPUT
    assert "no such run directory" in capsys.readouterr().err
    assert cli.main(["compare", str(run), str(run), "--noise-floor", "/nonexistent.json"]) == 2


# --- the run_comparison asset ------------------------------------------------------------------


def _materialize(tmp_path, candidate, **comparison):
    """run_comparison alone (with its check), its input the scored_run output that wrote
    `candidate` (as the chain's scored_run hands it on), configured by `comparison`."""
    seed_output(tmp_path, "scored_run", facts={"run_dir": str(candidate)})
    return materialize(
        ["run_comparison"],
        dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
        paths={"state_dir": str(tmp_path)},
        comparison=comparison,
    )


def _meta(result):
    (mat,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in mat.materialization.metadata.items()}


def test_asset_compares_with_the_previous_run_with_the_same_pins(tmp_path):
    runs = tmp_path / "runs"
    base = write_run(runs, outcomes("q", ALL_COVERED), label="base")
    # A later run over other pins is skipped when looking for the baseline.
    write_run(runs, outcomes("q", ALL_COVERED), pins=set_pin(BASE_PINS, *PIN_CHANGES["reader"]))
    cand = write_run(runs, outcomes("q", [False] * 8 + [True] * 12), label="cand")
    result = _materialize(tmp_path, cand)
    assert result.success
    meta = _meta(result)
    assert meta["baseline"] == str(base) and meta["candidate"] == str(cand)
    assert meta["verdict"] == "INCONCLUSIVE" and meta["calibrated"] is False
    assert "NOT CALIBRATED" in meta["noise_floor"]
    assert "| tier 1 |" in meta["deltas"] and meta["tier1_coverage_delta_pp"] == -40.0
    assert meta["report"].endswith("comparison.html") and (cand / "report.html").is_file()
    (check,) = result.get_asset_check_evaluations()
    assert check.passed

    # With the floor stored for the base's configuration, the same comparison is decided.
    save_noise_floor(hand_floor(base, 5.0), floor_path_for(runs, load_run(base)))
    meta = _meta(_materialize(tmp_path, cand))
    assert meta["verdict"] == "REGRESSED" and meta["calibrated"] is True


def test_asset_records_a_refusal_and_its_blocking_check_fails(tmp_path):
    runs = tmp_path / "runs"
    pins = set_pin(BASE_PINS, *PIN_CHANGES["corpus.sha256"])
    base = write_run(runs, outcomes("q", ALL_COVERED), pins=pins)
    cand = write_run(runs, outcomes("q", ALL_COVERED))
    result = _materialize(tmp_path, cand, baseline=str(base))
    meta = _meta(result)  # the asset itself materialized
    assert meta["verdict"] == "REFUSED" and meta["refused"] is True
    assert meta["refused_pins"] == ["corpus.sha256"]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "run_comparison_pins_match" and not check.passed
    assert "corpus.sha256" in check.description
    # Blocking: the failed check (the asset's own, evaluated in its step after it
    # materialized) is what fails the run, not an error in the asset's body.
    assert not result.success
    failed = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failed] == ["run_comparison"]
    error = failed[0].event_specific_data.error
    assert error.cls_name == "DagsterAssetCheckFailedError"
    assert "run_comparison_pins_match" in error.message


def test_asset_without_a_baseline_says_so(tmp_path):
    only = write_run(tmp_path / "runs", outcomes("q", ALL_COVERED))
    result = _materialize(tmp_path, only)
    assert result.success and _meta(result)["verdict"] == "NO BASELINE"
    assert all(c.passed for c in result.get_asset_check_evaluations())


def test_compare_shows_which_stage_moved_and_what_changed_in_memory(tmp_path):
    """Issue 26: a flip carries the failing run's stage and its evidence memory's change."""
    held = {"level": "turn", "nodes": {"s1#0": ["c0"]}}
    lost_base = {**row("lost", True), "evidence_memory": {**held, "held": {"s1#0": "live"}}}
    lost_cand = {
        **row("lost", False, weakest="evidence_recall"),
        "failure_stage": "formation",
        "evidence_memory": {**held, "held": {"s1#0": "absent"}},
    }
    base_rows = [lost_base, {**row("r", False), "failure_stage": "reader"}, row("same", True)]
    cand_rows = [lost_cand, {**row("r", False), "failure_stage": "reader"}, row("same", True)]
    base, cand = _pair(tmp_path, base_rows, cand_rows)
    c = compare(base, cand)
    assert c.stages["1"]["formation"] == [0, 1] and c.stages["1"]["reader"] == [1, 1]
    (flip,) = c.lost
    assert (flip.failure_stage, flip.memory) == ("formation", "s1#0 live→absent")
    assert "failed at formation" in flip_line(flip) and "s1#0 live→absent" in flip_line(flip)
    assert "formation 0→1" in stage_line("1", c.stages["1"])
    # Bundles from before stages were kept: nothing to show, not a row of zeros.
    old_base, old_cand = _pair(tmp_path / "old", [row("a", True)], [row("a", False)])
    assert compare(old_base, old_cand).stages == {}
