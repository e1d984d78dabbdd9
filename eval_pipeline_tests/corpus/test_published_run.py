"""Published LongMemEval runs in the field's formats (`corpus.published_run`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.corpus.published_run import (
    PublishedRunError,
    as_label_set,
    load_published_run,
    load_question_set,
    looks_published,
    parse_label,
)

QUESTIONS = [
    {"question_id": "aaaa0001", "question": "What did I name my dog?", "answer": "Max",
     "question_type": "single-session-user"},
    {"question_id": "aaaa0002", "question": "How many plants did I buy?", "answer": 3,
     "question_type": "multi-session"},
    {"question_id": "aaaa0003_abs", "question": "What is my cat's name?",
     "answer": "You never mentioned a cat.", "question_type": "single-session-user"},
]  # fmt: skip


def _jsonl(path: Path, rows) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def refs(tmp_path):
    p = tmp_path / "refs.json"
    p.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    return load_question_set(p)


def test_evaluate_qa_output_with_bool_or_int_labels(tmp_path, refs):
    run = _jsonl(tmp_path / "run.eval-results-gpt-4o", [
        {"question_id": "aaaa0002", "hypothesis": "Three.",
         "autoeval_label": {"model": "gpt-4o-2024-08-06", "label": 1}, "label": 1},
        {"question_id": "aaaa0001", "hypothesis": "Max",
         "autoeval_label": {"model": "gpt-4o-2024-08-06", "label": True}},
        {"question_id": "aaaa0003_abs", "hypothesis": None,
         "autoeval_label": {"model": "gpt-4o-2024-08-06", "label": False}},
    ])  # fmt: skip
    assert looks_published(run)
    loaded = load_published_run(run)
    assert [a.label for a in loaded.answers] == [True, True, False]
    assert loaded.label_models == ["gpt-4o-2024-08-06"]
    labelled = as_label_set(loaded, refs)
    items = labelled.labels.by_id()
    assert items["aaaa0002"].reference == "3"  # a number made a string
    assert items["aaaa0003_abs"].abstention is True and items["aaaa0003_abs"].response == ""
    assert items["aaaa0001"].question_type == "single-session-user"
    assert labelled.missing == [] and labelled.unlabelled == []


def test_answers_with_labels_kept_apart_in_jsonl_or_a_json_object(tmp_path, refs):
    answers = _jsonl(tmp_path / "hyp.jsonl", [
        {"question_id": "aaaa0001", "hypothesis": "Max"},
        {"question_id": "aaaa0002", "hypothesis": "Four."},
    ])  # fmt: skip
    labels = _jsonl(tmp_path / "labels.jsonl", [
        {"question_id": "aaaa0001", "correct": True}, {"question_id": "aaaa0002", "correct": False},
    ])  # fmt: skip
    run = load_published_run(answers, labels)
    assert [a.label for a in run.answers] == [True, False]
    keyed = tmp_path / "grading.json"
    keyed.write_text(json.dumps({"aaaa0001": {"label": "yes"}, "aaaa0002": "No"}), "utf-8")
    run = load_published_run(answers, keyed)
    assert [a.label for a in run.answers] == [True, False]
    labelled = as_label_set(run, refs)
    assert labelled.missing == ["aaaa0003_abs"]  # reported, never scored as answered
    assert any("answers 2 of the 3 questions" in n for n in labelled.notes())


def test_a_json_array_and_a_named_answer_field(tmp_path):
    run = tmp_path / "results.json"
    run.write_text(json.dumps([
        {"question_id": "aaaa0001", "ground_truth": "Max", "system_answer": "Max."},
    ]), "utf-8")  # fmt: skip
    assert load_published_run(run).answer_field == "system_answer"
    run.write_text(json.dumps([{"question_id": "aaaa0001", "a": "Max", "b": "Rex"}]), "utf-8")
    with pytest.raises(PublishedRunError, match="no answer field.*--answer-field"):
        load_published_run(run)
    assert load_published_run(run, answer_field="b").answers[0].hypothesis == "Rex"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"question_id": "aaaa0001", "hypothesis": "x"}, {"question_id": "aaaa0001",
          "hypothesis": "y"}], "answered twice"),
        ([{"hypothesis": "x"}], "field 'question_id': missing"),
        ([{"question_id": "aaaa0001", "hypothesis": "x", "autoeval_label": {"label": "maybe"}}],
         "field 'autoeval_label.label': 'maybe' is not a verdict"),
        ([{"question_id": "aaaa0001", "hypothesis": 3}], "field 'hypothesis': not a string"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_what_it_says_is_one_line(tmp_path, rows, message):
    with pytest.raises(PublishedRunError, match=message) as err:
        load_published_run(_jsonl(tmp_path / "run.jsonl", rows))
    assert "\n" not in str(err.value) and "run.jsonl:" in str(err.value)


def test_ids_outside_the_question_set_are_refused(tmp_path, refs):
    run = _jsonl(tmp_path / "run.jsonl", [
        {"question_id": "aaaa0001", "hypothesis": "Max", "label": True},
        {"question_id": "zzzz9999", "hypothesis": "?", "label": False},
    ])  # fmt: skip
    with pytest.raises(PublishedRunError, match="'zzzz9999' is not in the question set"):
        as_label_set(load_published_run(run), refs)


def test_verdicts_as_the_field_writes_them():
    assert [parse_label(v) for v in (True, 1, "Yes", "no", "TRUE", "incorrect", 0.0)] == [
        True, True, True, False, True, False, False,
    ]  # fmt: skip
    assert parse_label("unsure") is None and parse_label(2) is None


def test_a_label_file_without_types_takes_them_from_the_question_set(tmp_path, refs):
    """Labels files as people write them: the five required fields, LongMemEval's ids."""
    from eval_pipeline.corpus.judge_labels import load_labels
    from eval_pipeline.score.judge_check import label_input

    rows = [
        {"id": "aaaa0002", "question": "How many plants did I buy?", "reference": "3",
         "response": "Three.", "label": "yes", "hard_case": "my_own_tag"},
        {"id": "aaaa0003_abs", "question": "What is my cat's name?", "reference": "none",
         "response": "", "label": "no"},
        {"id": "custom-1", "question": "Q?", "reference": "A", "response": "A", "label": "yes"},
    ]  # fmt: skip
    labels = _jsonl(tmp_path / "mine.jsonl", rows)
    assert load_labels(labels).composition()["own_tags"] == {"my_own_tag": 1}
    refs_path = tmp_path / "refs.json"
    refs_path.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    label_set, notes, published = label_input(labels, references=refs_path)
    items = label_set.by_id()
    assert not published
    assert items["aaaa0002"].question_type == "multi-session"
    assert items["aaaa0003_abs"].abstention is True  # LongMemEval's _abs suffix
    assert items["custom-1"].question_type is None
    assert any("warning: 1 of 3 item(s) have no question_type" in n for n in notes)
    # without these questions only the _abs suffix can be read: every item stays untyped
    label_set, notes, _ = label_input(labels)
    assert label_set.by_id()["aaaa0003_abs"].abstention is True
    assert any("warning: 3 of 3 item(s) have no question_type" in n for n in notes)
