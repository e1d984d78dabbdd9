"""Validation errors name the file, the scenario (or event) id and the field."""

from __future__ import annotations

import shutil

import pytest
import yaml

from eval_pipeline.tier2.load import load_scenarios, load_universe
from eval_pipeline.tier2.schema import Tier2SchemaError
from eval_pipeline_tests.tier2.support import make_corpus, scenario


def _issues(root) -> list[str]:
    with pytest.raises(Tier2SchemaError) as info:
        load_scenarios(root=root)
    return [str(i) for i in info.value.issues]


def _one(root, field: str) -> str:
    lines = [line for line in _issues(root) if f"field {field!r}" in line]
    assert lines, _issues(root)
    return lines[0]


def test_valid_scenario_loads(tmp_path):
    root = make_corpus(tmp_path, {"pref.yaml": [scenario()]})
    (only,) = load_scenarios(root=root)
    assert only.id == "pref-test-one"
    assert only.source_file.endswith("scenarios/pref.yaml")


def test_weights_not_summing_to_100(tmp_path):
    bad = scenario(criteria=[{"criterion": "a", "weight": 50}, {"criterion": "b", "weight": 40}])
    root = make_corpus(tmp_path, {"pref.yaml": [bad]})
    line = _one(root, "criteria")
    assert "scenarios/pref.yaml" in line and "'pref-test-one'" in line
    assert "sum to 100" in line and "50 + 40 = 90" in line


def test_unknown_event_in_must_cite(tmp_path):
    bad = scenario(must_cite=["acme-doc-adr-015", "acme-doc-nope"])
    root = make_corpus(tmp_path, {"pref.yaml": [bad]})
    line = _one(root, "must_cite[1]")
    assert "scenarios/pref.yaml" in line and "'pref-test-one'" in line
    assert "unknown event id 'acme-doc-nope'" in line


def test_combo_with_one_dimension(tmp_path):
    bad = scenario(id="combo-one", use_case="COMBO", dimensions=["BUG"])
    root = make_corpus(tmp_path, {"combo.yaml": [bad]})
    line = _one(root, "dimensions")
    assert "scenarios/combo.yaml" in line and "'combo-one'" in line
    assert "at least 2" in line


def test_dimensions_only_on_combo(tmp_path):
    root = make_corpus(tmp_path, {"pref.yaml": [scenario(dimensions=["BUG", "TIME"])]})
    assert "only COMBO" in _one(root, "dimensions")


def test_shape_errors_name_the_nested_field(tmp_path):
    bad = scenario(difficulty="extreme", questions=[{"ask": "x"}], colour="blue")
    root = make_corpus(tmp_path, {"pref.yaml": [bad]})
    assert "easy" in _one(root, "difficulty")  # lists the allowed values
    assert "missing" in _one(root, "questions[0].expected")
    assert "unknown field" in _one(root, "colour")


def test_scenario_without_id_is_named_by_position(tmp_path):
    bad = scenario()
    del bad["id"]
    root = make_corpus(tmp_path, {"pref.yaml": [scenario(id="pref-fine"), bad]})
    line = _one(root, "id")
    assert "scenarios[1]" in line and "missing" in line


def test_must_cite_outside_signal_and_must_not_cite_outside_distractors(tmp_path):
    bad = scenario(
        must_cite=["acme-doc-adr-015", "acme-chat-offsite"],
        must_not_cite=["acme-doc-go-logging"],
    )
    root = make_corpus(tmp_path, {"pref.yaml": [bad]})
    assert "not signal events" in _one(root, "must_cite")
    assert "not distractors" in _one(root, "must_not_cite")


def test_source_mix_must_match_signal(tmp_path):
    root = make_corpus(tmp_path, {"pref.yaml": [scenario(source_mix=["doc", "issue"])]})
    assert "signal events come from ['doc']" in _one(root, "source_mix")


def test_adversarial_rules(tmp_path):
    no_kind = scenario(id="pref-adv-a", difficulty="adversarial")
    no_lure = scenario(
        id="pref-adv-b", difficulty="adversarial", adversarial=["near_duplicate"], must_not_cite=[]
    )
    no_arrival = scenario(id="pref-adv-c", difficulty="adversarial", adversarial=["out_of_order"])
    in_order = scenario(
        id="pref-adv-d",
        difficulty="adversarial",
        adversarial=["out_of_order"],
        # event time order: adr-015 (Jan 15), checkout-web-88 (Jan 18), offsite (Feb 7)
        arrival=["acme-doc-adr-015", "acme-pr-checkout-web-88", "acme-chat-offsite"],
    )
    kinds_on_easy = scenario(id="pref-adv-e", adversarial=["near_duplicate"])
    root = make_corpus(
        tmp_path, {"pref.yaml": [no_kind, no_lure, no_arrival, in_order, kinds_on_easy]}
    )
    issues = _issues(root)

    def about(sid, field):
        return [i for i in issues if f"'{sid}'" in i and f"field {field!r}" in i]

    assert about("pref-adv-a", "adversarial")
    assert about("pref-adv-b", "must_not_cite")
    assert about("pref-adv-c", "arrival")
    assert "is chronological" in about("pref-adv-d", "arrival")[0]
    assert about("pref-adv-e", "adversarial")


def test_question_asked_before_its_events(tmp_path):
    bad = scenario(
        questions=[{"ask": "q", "expected": "a", "asked_at": "2024-01-01T09:00:00"}],
    )
    root = make_corpus(tmp_path, {"pref.yaml": [bad]})
    assert "not after the latest haystack event" in _one(root, "questions[0].asked_at")


def test_signal_turn_out_of_range(tmp_path):
    bad = scenario(signal=[{"event": "acme-doc-adr-015", "turns": [3]}])
    root = make_corpus(tmp_path, {"pref.yaml": [bad]})
    assert "turn 3 does not exist" in _one(root, "signal")


def test_duplicate_scenario_id_across_files(tmp_path):
    root = make_corpus(tmp_path, {"a.yaml": [scenario()], "b.yaml": [scenario()]})
    line = _one(root, "id")
    assert "scenarios/b.yaml" in line and "duplicate" in line and "scenarios/a.yaml" in line


def test_duplicate_yaml_key_and_bad_yaml(tmp_path):
    dup = "scenarios:\n  - id: pref-x\n    id: pref-y\n"
    root = make_corpus(tmp_path, {"a.yaml": dup, "b.yaml": "scenarios: [unclosed\n"})
    issues = _issues(root)
    assert any("a.yaml" in i and "'id' given twice" in i for i in issues)
    assert any("b.yaml" in i and "invalid YAML" in i for i in issues)


def test_file_without_scenarios_list(tmp_path):
    root = make_corpus(tmp_path, {"a.yaml": yaml.safe_dump({"scenario": []})})
    assert "must hold a mapping with a list 'scenarios'" in _one(root, "scenarios")


def test_every_issue_is_reported_at_once(tmp_path):
    a = scenario(id="pref-a", must_cite=["acme-nope"])
    b = scenario(id="pref-b", criteria=[{"criterion": "x", "weight": 10}])
    root = make_corpus(tmp_path, {"pref.yaml": [a, b]})
    with pytest.raises(Tier2SchemaError) as info:
        load_scenarios(root=root)
    text = str(info.value)
    assert "'pref-a'" in text and "'pref-b'" in text


def test_universe_errors_name_file_event_and_field(tmp_path):
    root = make_corpus(tmp_path, {"pref.yaml": [scenario()]})
    events = root / "universe" / "events"
    (events / "zz_bad.yaml").write_text(
        yaml.safe_dump(
            {
                "events": [
                    {
                        "id": "acme-doc-bad",
                        "source": "doc",
                        "timestamp": "2024-01-01T10:00:30",
                        "author": "nobody",
                        "text": "x",
                    },
                    {
                        "id": "acme-doc-worse",
                        "source": "wiki",
                        "timestamp": "2024-01-01T10:00:00",
                        "author": "dana.kim",
                        "text": "y",
                    },
                    {
                        "id": "acme-doc-adr-015",
                        "source": "doc",
                        "timestamp": "2024-01-01T10:00:00",
                        "author": "dana.kim",
                        "text": "z",
                    },
                    {
                        "id": "acme-doc-unknown-author",
                        "source": "doc",
                        "timestamp": "2024-01-01T10:00:00",
                        "author": "ghost",
                        "text": "z",
                    },
                ]
            }
        )
    )
    with pytest.raises(Tier2SchemaError) as info:
        load_universe(root)
    issues = [str(i) for i in info.value.issues]

    def has(event, field, words):
        return any(
            "events/zz_bad.yaml" in i
            and f"'{event}'" in i
            and f"field {field!r}" in i
            and words in i
            for i in issues
        )

    assert has("acme-doc-bad", "timestamp", "whole minute"), issues
    assert has("acme-doc-worse", "source", "pull_request"), issues
    assert has("acme-doc-adr-015", "id", "duplicate"), issues
    assert has("acme-doc-unknown-author", "messages[0].author", "unknown author"), issues


def test_missing_universe_is_a_clear_error(tmp_path):
    root = make_corpus(tmp_path, {"pref.yaml": [scenario()]}, universe=False)
    with pytest.raises(Tier2SchemaError) as info:
        load_universe(root)
    text = str(info.value)
    assert "company.yaml" in text and "cannot read" in text
    assert "no event files" in text


def test_universe_copy_is_independent(tmp_path):
    # Guard for the helpers above: tests never write into the committed corpus.
    root = make_corpus(tmp_path, {"pref.yaml": [scenario()]})
    shutil.rmtree(root / "universe" / "events")
    with pytest.raises(Tier2SchemaError):
        load_universe(root)
    assert load_universe() is not None
