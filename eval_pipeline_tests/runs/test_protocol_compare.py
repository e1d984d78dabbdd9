"""Compare refuses what the protocol checks rule out (runs.protocol): a run that failed a
check that fails it or makes it not comparable, and two runs of different retrieval budgets
(memorybench#64), each with a one-line reason. Real bundles, written and read back."""

from __future__ import annotations

import pytest

from eval_pipeline.runs.compare import ComparisonRefused, check_comparable, compare
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.select import previous_comparable_run
from eval_pipeline.score import protocol
from eval_pipeline_tests.runs.synthetic import BASE_PINS, outcomes, set_pin, write_run

VALUES = [True, False, True, True, False, True]


def _protocol(**statuses: str) -> dict:
    return protocol.as_map(
        {name: protocol.outcome(name, s, f"{name} was {s}") for name, s in statuses.items()}
    )


def test_a_run_that_failed_a_not_comparable_check_is_refused_with_its_reason(tmp_path):
    base = load_run(write_run(tmp_path, outcomes("q", VALUES)))
    failed = _protocol(protocol_reader_date="failed", protocol_top_k_below_haystack="warning")
    cand = load_run(write_run(tmp_path, outcomes("q", VALUES), protocol=failed))
    with pytest.raises(ComparisonRefused) as refused:
        compare(base, cand)
    assert refused.value.pin_names == ["protocol.protocol_reader_date"]
    [line] = refused.value.lines()
    assert line == (
        f"protocol.protocol_reader_date: the candidate {cand.name} failed it (not "
        "comparable): protocol_reader_date was failed"
    )
    # Either side: the base failing refuses as well.
    with pytest.raises(ComparisonRefused) as reversed_:
        check_comparable(cand, base)
    assert reversed_.value.lines()[0].startswith(
        f"protocol.protocol_reader_date: the base {cand.name} failed it"
    )


def test_warnings_and_passes_never_refuse(tmp_path):
    ok = _protocol(
        protocol_reader_date="not_applicable",
        protocol_top_k_below_haystack="warning",
        protocol_within_top_k="passed",
    )
    base = load_run(write_run(tmp_path, outcomes("q", VALUES), protocol=ok))
    cand = load_run(write_run(tmp_path, outcomes("q", VALUES), protocol=ok))
    assert compare(base, cand).verdict == "INCONCLUSIVE"


def test_a_failed_run_failing_check_is_refused_too(tmp_path):
    base = load_run(write_run(tmp_path, outcomes("q", VALUES)))
    failed = _protocol(protocol_abstention_rubric="failed")
    cand = load_run(write_run(tmp_path, outcomes("q", VALUES), protocol=failed))
    with pytest.raises(ComparisonRefused) as refused:
        check_comparable(base, cand)
    assert "(fails run): protocol_abstention_rubric was failed" in refused.value.lines()[0]


@pytest.mark.parametrize(
    ("dotted", "left", "right", "name"),
    [
        ("top_k", 10, 30, "budget.top_k"),
        ("llm_roles.reader.max_tokens", 256, 1024, "budget.reader_max_tokens"),
        ("retriever.payload_cap_tokens", 4000, 8000, "budget.context_cap_tokens"),
    ],
)
def test_runs_of_different_budgets_are_refused(tmp_path, dotted, left, right, name):
    left_pins = set_pin(BASE_PINS, dotted, left)
    base = load_run(write_run(tmp_path, outcomes("q", VALUES), pins=left_pins))
    pins = set_pin(BASE_PINS, dotted, right)
    cand = load_run(write_run(tmp_path, outcomes("q", VALUES), pins=pins))
    with pytest.raises(ComparisonRefused) as refused:
        check_comparable(base, cand)
    assert refused.value.pin_names == [name]
    assert refused.value.lines() == [f"{name}: base {left!r} ≠ candidate {right!r}"]
    # `previous` never picks a baseline of another budget.
    assert previous_comparable_run(tmp_path, cand) is None


def test_a_context_cap_on_one_side_only_is_a_change_of_retriever_not_a_refusal(tmp_path):
    base = load_run(write_run(tmp_path, outcomes("q", VALUES)))
    pins = set_pin(BASE_PINS, "retriever", {"retriever": "graph_agent", "payload_cap_tokens": 4000})
    cand = load_run(write_run(tmp_path, outcomes("q", VALUES), pins=pins))
    assert any(c["pin"] == "retriever" for c in compare(base, cand).changes)
