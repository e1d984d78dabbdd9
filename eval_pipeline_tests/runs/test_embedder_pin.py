"""The dense retrievers' embedding model is a comparability pin, by its weights' sha256
(`retriever.embedder.sha256`): two runs that embed with different weights are refused; a run
that does not embed (fulltext) compares with one that does (the retriever is a change)."""

from __future__ import annotations

import pytest

from eval_pipeline import embed
from eval_pipeline.runs.compare import ComparisonRefused, compare
from eval_pipeline_tests.runs.synthetic import BASE_PINS, outcomes, set_pin, write_run

PIN = "retriever.embedder.sha256"


def _dense_pins(sha256: str) -> dict:
    return set_pin(
        BASE_PINS, "retriever", {"retriever": "dense", "version": 1, "embedder": {"sha256": sha256}}
    )


def test_another_embedding_model_is_refused_by_its_hash(tmp_path):
    rows = outcomes("q", [True] * 6)
    real = embed.identity()["sha256"]
    base = write_run(tmp_path, rows, label="base", pins=_dense_pins(real))
    same = write_run(tmp_path, rows, label="same", pins=_dense_pins(real))
    other = write_run(tmp_path, rows, label="other", pins=_dense_pins("0" * 64))
    assert compare(base, same).changes == []
    with pytest.raises(ComparisonRefused) as err:
        compare(base, other)
    assert err.value.pin_names == [PIN]
    assert PIN in str(err.value)


def test_fulltext_against_dense_is_a_change_not_a_refusal(tmp_path):
    rows = outcomes("q", [True] * 6)
    lexical = write_run(tmp_path, rows, label="fulltext")
    dense = write_run(tmp_path, rows, label="dense", pins=_dense_pins(embed.identity()["sha256"]))
    changes = compare(lexical, dense).changes
    assert [c["pin"] for c in changes] == ["retriever"]
    assert changes[0]["candidate"]["embedder"]["sha256"] == embed.identity()["sha256"]


def test_the_previous_comparable_run_of_a_dense_run_may_be_a_fulltext_one(tmp_path):
    """The run_comparison asset's default baseline follows compare: an earlier fulltext run
    is a baseline for dense; an earlier dense run on other weights is not."""
    from eval_pipeline.runs.load import load_run
    from eval_pipeline.runs.select import previous_comparable_run

    rows = outcomes("q", [True] * 6)
    lexical = write_run(tmp_path, rows, label="fulltext")
    write_run(tmp_path, rows, label="other-weights", pins=_dense_pins("0" * 64))
    dense = load_run(write_run(tmp_path, rows, label="dense", pins=_dense_pins("1" * 64)))
    base = previous_comparable_run(tmp_path, dense)
    assert base is not None and base.path == load_run(lexical).path
