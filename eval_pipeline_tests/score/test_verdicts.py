"""The verdict methods: the deterministic rules on cases written here (none from the labelled
set), how each method combines rules and model, and that cross-validation never scores a
fold with parameters tuned on it; judge-check offline end to end (the `match` method)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from eval_pipeline import cli
from eval_pipeline.score.agreement import AgreementStore, agreement_pin, read_agreement
from eval_pipeline.score.answer_match import decide
from eval_pipeline.score.answer_values import quantities
from eval_pipeline.score.judge_check import judge_agreement_pins
from eval_pipeline.score.verdicts import (
    DEFAULT_PARAMS,
    ItemInputs,
    MethodError,
    Params,
    combine,
    cross_validated,
    folds,
    judge_answer,
    method,
    method_hash,
)


def verdict(reference, response, qtype="multi-session", abstention=False, question=""):
    return decide(
        reference, response, question_type=qtype, abstention=abstention, question=question
    ).verdict


@pytest.mark.parametrize(
    ("reference", "response", "expected"),
    [
        ("A tabby cat", "It was a tabby cat named Miso.", "yes"),
        ("Lisbon", "You flew to Porto that weekend.", "no"),
        ("Two weeks", "About 14 days.", "yes"),
        ("3 hours", "Roughly three hours.", "yes"),
        ("$1,450", "1450 dollars", "yes"),
        ("4.5k followers", "4500 followers", "yes"),
        ("June 9th, 2023", "On 9 June 2023.", "yes"),
        ("2023-06-09", "June 9, 2023", "yes"),
        ("June 9th", "June 10th", "no"),
        ("7:30 pm", "At 19:30.", "yes"),
        ("Seventeen", "You have 17 of them.", "yes"),
        ("Twelve", "You have 13 of them.", "no"),
    ],
)
def test_values_and_words_decide_the_clear_cases(reference, response, expected):
    assert verdict(reference, response) == expected


def test_off_by_one_counts_pass_only_the_temporal_rule_and_only_for_days_weeks_months():
    assert verdict("9 days", "10 days", qtype="temporal-reasoning") == "yes"
    assert verdict("3 months", "4 months", qtype="temporal-reasoning") == "yes"
    assert verdict("9 days", "10 days", qtype="multi-session") == "no"
    assert verdict("9 days", "12 days", qtype="temporal-reasoning") == "no"
    assert verdict("5 years", "6 years", qtype="temporal-reasoning") == "no"


def test_refusals_abstention_and_guesses():
    ref = "The trip to Oslo was never mentioned."
    assert verdict(ref, "You never mentioned a trip to Oslo.", abstention=True) == "yes"
    assert verdict(ref, "I don't have any record of that trip.", abstention=True) == "yes"
    assert verdict(ref, "You went to Oslo in May.", abstention=True) == "no"
    # a refusal followed by a guess has answered after all (issue 38)
    guess = "I don't have a record of it, but it was probably in May."
    assert verdict(ref, guess, abstention=True) == "no"
    # an answerable question refused
    assert verdict("Basil", "You never told me what you planted.") == "no"


def test_corrections_rubrics_and_partial_answers_are_left_to_reading():
    # named, then revised away: a no; revised towards it: left to reading
    assert verdict("Maple", "You considered maple, but in the end you chose oak.") == "no"
    assert verdict("Maple", "Oak, I said first; actually it was maple.") is None
    assert verdict("Maple", "Not maple: it was oak.") == "no"  # only ever denied
    rubric = "The user would prefer suggestions that use their sourdough hobby."
    assert verdict(rubric, "Try a sourdough focaccia.", qtype="single-session-preference") is None
    assert verdict("Red and blue", "The first one was red.") == "no"  # a listed item missing
    assert verdict("Sage green", "It was a green one.") is None


def test_quantities_reads_each_value_once():
    kinds = [(q.kind, q.value) for q in quantities("On March 3rd, 2024 at 5 pm I ran 10 km")]
    assert ("date", (2024, 3, 3)) in kinds and ("clock", 17 * 60.0) in kinds
    assert ("length", 10000.0) in kinds and len(kinds) == 3  # 10 km, in metres
    assert verdict("12 km", "12 miles") == "no"  # another unit is another value
    assert verdict("8:15 am", "A quarter past eight.") == "yes"


def _inputs(rows):
    """ItemInputs from (label, rule verdict or None, coverage, model verdict)."""
    return [
        ItemInputs(
            id=f"i{n}",
            label=label,
            rubric=False,
            match={"verdict": rule, "rule": "r", "coverage": cov, "refusal": False},
            model={"reference": model},
        )
        for n, (label, rule, cov, model) in enumerate(rows)
    ]


def test_each_method_combines_rules_coverage_and_model_as_documented():
    [decided, low, mid, high] = [i.match_obj() for i in _inputs(
        [("yes", "yes", 1.0, "no"), ("no", None, 0.1, "yes"), ("no", None, 0.5, "no"),
         ("yes", None, 0.95, "no")]
    )]  # fmt: skip
    p = Params(threshold=0.6, band_low=0.3, band_high=0.8)
    assert combine("reference", decided, "no", rubric=False, params=p)[0] == "no"  # the model
    assert combine("hybrid", decided, "no", rubric=False, params=p)[0] == "yes"  # the rules
    assert combine("hybrid", mid, "no", rubric=False, params=p)[0] == "no"  # the model
    assert combine("match", mid, None, rubric=False, params=p)[0] == "no"  # 0.5 < 0.6
    assert combine("match", high, None, rubric=False, params=p)[0] == "yes"
    assert combine("cascade", low, "yes", rubric=False, params=p)[0] == "no"  # below the band
    assert combine("cascade", high, "no", rubric=False, params=p)[0] == "yes"  # above it
    assert combine("cascade", mid, "yes", rubric=False, params=p) == ("yes", "model")
    with pytest.raises(MethodError, match="one of reference, reasoned, match"):
        method("vibes")


def test_cross_validation_never_scores_a_fold_with_parameters_tuned_on_it():
    rows = [("yes" if n % 3 else "no", None, (n % 10) / 10, "yes") for n in range(60)]
    items = _inputs(rows)
    held, _ = cross_validated("match", items, k=5, seed=0)
    # flip every label of one fold: that fold's held-out verdicts cannot move
    fold = folds(items, 5, 0)[0]
    flipped = [
        i.model_copy(update={"label": {"yes": "no", "no": "yes"}[i.label]}) if n in fold else i
        for n, i in enumerate(items)
    ]
    folds_after = folds(flipped, 5, 0)
    if folds_after[0] == fold:  # stratification keeps the fold when the counts allow it
        again, _ = cross_validated("match", flipped, k=5, seed=0)
        assert [again[n] for n in fold] == [held[n] for n in fold]
    assert all(v in ("yes", "no") for v in held)


def test_every_parameter_a_method_reads_is_in_its_hash():
    assert method_hash("match") != method_hash("match", Params(threshold=0.5))
    assert method_hash("cascade") != method_hash("cascade", Params(band_low=0.0))
    assert method_hash("hybrid") == method_hash("hybrid", Params(threshold=0.5))  # not read
    assert method_hash("reference") != method_hash("reasoned")
    assert len({method_hash(m) for m in ("reference", "reasoned", "match", "hybrid")}) == 4


def test_a_model_free_method_judges_without_a_model_and_a_model_method_is_unscored():
    import asyncio

    golden = {
        "input": "Which city?",
        "expected_output": "Lisbon",
        "additional_metadata": {"question_type": "multi-session", "abstention": False},
    }
    got = asyncio.run(judge_answer("match", None, golden, "You moved to Lisbon."))
    assert got.score == 1.0 and got.gating
    golden = {**golden, "expected_output": "Sage green"}
    undecided = "It was a green one."
    none = asyncio.run(judge_answer("hybrid", None, golden, undecided))
    assert none.score is None and "needs a judge model" in none.reason
    assert asyncio.run(judge_answer("match", None, golden, None)).score is None


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_judge_check_offline_cross_validates_match_and_pins_it(home, tmp_path, capsys):
    out = tmp_path / "check"
    assert cli.main(["judge-check", "--judge", "offline", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    [row] = [x for x in lines if x.startswith("match ")]
    assert "kappa" in row and "[" in row and "cross-validated: 5 folds" in row
    result = read_agreement(out / "methods" / "match" / "agreement.json")
    assert result.method == "match" and result.judge.model == "none"
    assert result.judge.prompt_hash == method_hash("match")
    assert result.kappa.low is not None and result.kappa.low <= result.kappa.estimate
    assert result.probes is not None  # the probes, judged by the method too
    # verdicts.jsonl names the rule or the coverage that decided each item
    first = json.loads((out / "methods" / "match" / "verdicts.jsonl").read_text().split("\n")[0])
    assert first["reason"]
    # a run judged by `match` with no judge model finds this check
    pins = judge_agreement_pins("offline", method_hash("match"), needs_model=False)
    assert pins["agreement"]["status"] == "checked" and pins["agreement"]["method"] == "match"
    assert "invariant_agreement" not in pins
    stored = AgreementStore().get("none", method_hash("match"))
    assert stored is not None and stored.evaluation.startswith("cross-validated")


def test_a_probe_bias_above_ten_points_is_named_in_the_pin():
    from eval_pipeline.corpus.judge_labels import load_labels, load_probes
    from eval_pipeline.score.agreement import (
        ProbePairVerdicts,
        VerdictRecord,
        compute_agreement,
        probe_report,
    )

    labels, probes = load_labels(), load_probes()
    records = [VerdictRecord(id=i.id, label=i.label, verdict=i.label) for i in labels.items]
    # every hedged variant judged "no", every confident one as labelled
    pairs = [
        ProbePairVerdicts(
            id=p.id,
            probe=p.probe,
            label=p.label,
            a=p.label,
            b="no" if p.probe == "hedged_vs_confident" else p.label,
        )
        for p in probes.pairs
        if p.probe != "response_order"
    ]
    report = probe_report(probes, pairs, order_can_vary=False)
    result = compute_agreement(labels, records, judge_model="m", prompt_hash="h", probes=report)
    pin = agreement_pin(result)
    [bias] = pin["biased_probes"]
    assert bias.startswith("probe hedged_vs_confident: hedged answers judged yes")
    assert "less often" in bias and any(w.startswith("bias: ") for w in pin["warnings"])


def test_default_parameters_are_the_ones_tuned_on_the_whole_project_set():
    """DEFAULT_PARAMS's match fields are what `tune` picks on the committed set (the rules
    need no model, so this is checked here; the cascade's band reads the model and is
    recorded by judge-check)."""
    from eval_pipeline.corpus.judge_labels import as_golden, load_labels
    from eval_pipeline.score.verdicts import is_rubric, rules_match, tune

    items = [
        ItemInputs(
            id=i.id,
            label=i.label,
            rubric=is_rubric(as_golden(i)),
            match=asdict(rules_match(as_golden(i), i.response)),
        )
        for i in load_labels().items
    ]
    tuned = tune("match", items)
    assert (tuned.threshold, tuned.rubric_threshold) == (
        DEFAULT_PARAMS.threshold,
        DEFAULT_PARAMS.rubric_threshold,
    )


def test_every_judged_run_names_its_judges_bias(tmp_path):
    """A bias in the judge's check is printed with the run's summary and shown in its report."""
    from eval_pipeline.run_cli import judge_lines
    from eval_pipeline.runs.load import load_run
    from eval_pipeline.runs.report import render_run_report
    from eval_pipeline_tests.runs.synthetic import BASE_PINS, outcomes, set_pin, write_run

    bias = "probe hedged_vs_confident: hedged answers judged yes 43 points less often"
    pin = {"status": "checked", "kappa": 0.9, "method": "cascade", "biased_probes": [bias]}
    pins = set_pin(BASE_PINS, "judge.agreement", pin)
    run = write_run(tmp_path / "runs", outcomes("q", [True, False]), label="r", pins=pins)
    lines = judge_lines(run)
    assert "kappa 0.90" in lines[0] and lines[1] == f"  judge bias: {bias}"
    assert f"judge bias: {bias}" in render_run_report(load_run(run))
