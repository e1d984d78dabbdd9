"""The one line saying what offline coverage measures: only for a run the extractive reader
read and no model judged."""

from __future__ import annotations

from eval_pipeline.score.coverage_meaning import OFFLINE_COVERAGE, coverage_meaning

RULES = {"model": "offline", "prompt_hash": "ab12"}


def test_said_for_the_extractive_reader_under_the_rule_judge():
    assert coverage_meaning({"reader": "offline:extractive", "judge": RULES}) == OFFLINE_COVERAGE
    assert "evidence recall is the number that separates memories" in OFFLINE_COVERAGE


def test_not_said_when_a_model_read_or_judged_or_nothing_was_judged():
    model_judge = {"model": "openai:gpt-4o", "prompt_hash": "ab12"}
    assert coverage_meaning({"reader": "offline:extractive", "judge": model_judge}) is None
    assert coverage_meaning({"reader": "openai:gpt-4o-mini", "judge": RULES}) is None
    unjudged = {"model": "offline", "prompt_hash": None}  # a judge that needs a model, none given
    assert coverage_meaning({"reader": "offline:extractive", "judge": unjudged}) is None
    assert coverage_meaning(None) is None
