"""Failure stages: one stage per question that was not covered, and the funnel of a tier."""

from __future__ import annotations

from typing import Any

import pytest

from eval_pipeline.runs.records import ResultRow, Summary
from eval_pipeline.runs.records.base import RecordError, for_writing
from eval_pipeline.score.attribution import (
    STAGES,
    attribute,
    failure_stage,
    funnel,
    funnel_markdown,
    memory_change,
)
from eval_pipeline.score.summary import summarize, summary_markdown


def metric(passed: bool | None, *, gating: bool = True) -> dict[str, Any]:
    score = None if passed is None else float(passed)
    return {"score": score, "threshold": 1.0, "passed": passed, "gating": gating, "reason": ""}


def row(
    qid: str = "q1",
    *,
    recall: bool | None = True,
    answer: bool | None = True,
    covered: bool | None = None,
    qtype: str = "single-session-user",
    abstention: bool = False,
    retrieved: tuple[str, ...] = ("s1#0",),
    payload: int | None = 40,
    **extra: Any,
) -> dict[str, Any]:
    metrics = {"answer_judge": metric(answer)}
    if not abstention:
        metrics["evidence_recall"] = metric(recall)
    if covered is None:
        gates = [m["passed"] for m in metrics.values()]
        covered = None if None in gates else all(gates)
    return {
        "question_id": qid,
        "tier": 1,
        "question_type": qtype,
        "abstention": abstention,
        "retrieved_turn_ids": list(retrieved),
        "retrieved_session_ids": sorted({t.split("#")[0] for t in retrieved}),
        "metrics": metrics,
        "covered": covered,
        "payload_tokens": payload,
        "infra_failures": [],
        **extra,
    }


def trace(held: dict[str, str], level: str = "turn") -> dict[str, Any]:
    return {"level": level, "held": held, "nodes": {u: [f"{u}-m"] for u in held}}


def test_a_covered_question_has_no_stage():
    assert failure_stage(row(), trace({"s1#0": "live"})) is None


def test_evidence_not_returned_but_held_is_a_retrieval_miss():
    r = row(recall=False, retrieved=("s9#0",))
    assert failure_stage(r, trace({"s1#0": "live"})) == "retrieval"


def test_evidence_no_memory_holds_is_a_formation_miss():
    r = row(recall=False, retrieved=("s9#0",))
    assert failure_stage(r, trace({"s1#0": "absent"})) == "formation"
    # Held only by a fact since superseded: the right value was replaced away.
    assert failure_stage(r, trace({"s1#0": "superseded"})) == "formation"


def test_a_miss_the_reader_makes_given_the_evidence_too_is_the_readers():
    # A count across sessions: retrieval missed a session, but the reader did not cover the
    # question with every evidence session in front of it either (the ceiling arm).
    ceiling_missed = {"ceiling": {"covered": False}, "floor": {"covered": False}}
    r = row(recall=False, answer=False, retrieved=("s9#0",), arms=ceiling_missed)
    assert failure_stage(r, trace({"s1#0": "absent"})) == "reader"
    assert failure_stage(r, trace({"s1#0": "live"})) == "reader"
    # With the ceiling covered (or unscored, or not run) retrieval's miss stays retrieval's.
    for arms in ({"ceiling": {"covered": True}}, {"ceiling": {"covered": None}}, None):
        r = row(recall=False, answer=False, retrieved=("s9#0",), arms=arms)
        assert failure_stage(r, trace({"s1#0": "live"})) == "retrieval"
    # A suspect gold answer still comes first.
    r = row(recall=False, arms=ceiling_missed, errata={"status": "suspect"})
    assert failure_stage(r, trace({"s1#0": "live"})) == "gold_suspect"


def test_a_returned_unit_that_memory_lacks_is_not_a_formation_miss():
    # Retrieval returned s1#0 (through some other memory); the missing one is s1#1, held.
    r = row(recall=False, retrieved=("s1#0",))
    assert failure_stage(r, trace({"s1#0": "absent", "s1#1": "live"})) == "retrieval"


def test_session_level_traces_compare_sessions():
    r = row(recall=False, retrieved=("s9#0",))
    assert failure_stage(r, trace({"s1": "absent"}, level="session")) == "formation"
    assert failure_stage(r, trace({"s9": "absent"}, level="session")) is not None
    assert failure_stage(r, trace({"s9": "absent"}, level="session")) == "retrieval"


def test_an_empty_payload_is_a_memory_side_miss_for_an_answerable_question():
    r = row(recall=None, answer=False, covered=False, payload=0, retrieved=())
    assert failure_stage(r, trace({"s1#0": "live"})) == "retrieval"
    assert failure_stage(r, trace({"s1#0": "absent"})) == "formation"


def test_evidence_returned_and_a_wrong_answer_is_the_reader():
    assert failure_stage(row(answer=False), trace({"s1#0": "live"})) == "reader"
    # Abstention: nothing to recall; a wrong answer is the reader's.
    assert failure_stage(row(answer=False, abstention=True), None) == "reader"


def test_a_split_panel_on_a_failed_answer_is_a_judge_split():
    r = row(answer=False, panel_split=True)
    assert failure_stage(r, trace({"s1#0": "live"})) == "judge_split"
    # A split does not hide a miss retrieval already made.
    r = row(recall=False, answer=False, panel_split=True, retrieved=("s9#0",))
    assert failure_stage(r, trace({"s1#0": "live"})) == "retrieval"


def test_suspect_gold_comes_before_every_other_stage():
    r = row(recall=False, answer=False, errata={"status": "suspect", "source": "x", "what": "y"})
    assert failure_stage(r, trace({"s1#0": "absent"})) == "gold_suspect"
    corrected = {"status": "corrected", "source": "x", "what": "y"}
    assert failure_stage(row(answer=False, errata=corrected), None) == "reader"


def test_unmeasured_and_undecided_questions_have_no_stage():
    infra = row(recall=False, covered=None)
    infra["infra_failures"] = [{"stage": "retrieval", "cause": "graph_server", "error": "x"}]
    assert failure_stage(infra, None) is None
    # No gate failed and one was not taken (no judge): undecided, not a stage.
    assert failure_stage(row(answer=None), None) is None


def test_without_a_trace_a_memory_side_miss_is_retrieval():
    assert failure_stage(row(recall=False, retrieved=("s9#0",)), None) == "retrieval"


def rows_for_funnel() -> tuple[list[dict], dict[str, dict]]:
    rows = [
        row("a"),
        row("b", recall=False, retrieved=("x#0",)),
        row("c", recall=False, retrieved=("x#0",)),
        row("d", answer=False, qtype="multi-session"),
        row("e", answer=None, qtype="multi-session"),
        row("f", answer=False, abstention=True),
        row("g", qtype="multi-session"),
    ]
    # Unmeasured: the pipeline's own failure makes coverage unknown, whatever the gates said.
    rows[-1]["infra_failures"] = [{"stage": "reader", "cause": "llm_provider", "error": "x"}]
    rows[-1]["covered"] = None
    traces = {
        "a": trace({"s1#0": "live"}),
        "b": trace({"s1#0": "live"}),
        "c": trace({"s1#0": "absent"}),
        "d": trace({"s1#0": "live"}),
    }
    return rows, traces


def test_attribute_puts_the_stage_and_the_evidence_memory_on_every_row():
    rows, traces = rows_for_funnel()
    out = {r["question_id"]: r for r in attribute(rows, traces)}
    stages = {q: r["failure_stage"] for q, r in out.items()}
    assert stages == {
        "a": None,
        "b": "retrieval",
        "c": "formation",
        "d": "reader",
        "e": None,
        "f": "reader",
        "g": None,
    }
    assert out["c"]["evidence_memory"]["held"] == {"s1#0": "absent"}
    assert out["f"]["evidence_memory"] is None  # abstention: nothing traced
    # Every not-covered question has a stage (the "done when").
    assert all(r["failure_stage"] for r in out.values() if r["covered"] is False)


def test_the_funnel_counts_by_type_and_keeps_abstention_apart():
    rows, traces = rows_for_funnel()
    f = funnel(attribute(rows, traces))
    assert f["stages"] == list(STAGES)
    assert f["by_type"]["single-session-user"] == {
        "questions": 3,
        "covered": 1,
        "gold_suspect": 0,
        "formation": 1,
        "retrieval": 1,
        "reader": 0,
        "judge_split": 0,
        "unscored": 0,
        "undecided": 0,
    }
    multi = f["by_type"]["multi-session"]
    assert (multi["reader"], multi["unscored"], multi["undecided"]) == (1, 1, 1)
    assert f["abstention"]["reader"] == 1 and f["abstention"]["questions"] == 1
    total = f["answerable"]
    assert total["questions"] == 6
    # Every answerable question is in exactly one column.
    assert sum(total[k] for k in ("covered", *STAGES, "unscored", "undecided")) == 6
    text = "\n".join(funnel_markdown(f))
    assert "| multi-session | 3 | 0 | 0 | 0 | 1 | 0 | 0 | 1 | 1 |" in text


def test_the_summary_carries_the_funnel_and_validates_as_a_record():
    from eval_pipeline.score.scorer import score_question
    from eval_pipeline.score.tokens import PayloadTokenizer
    from eval_pipeline_tests.score.test_scoring import golden, retrieval

    tokenizer = PayloadTokenizer()
    scored = [
        score_question(golden("a"), retrieval("a", ["s1#0", "s2#0"]), tokenizer),
        score_question(golden("b"), retrieval("b", ["s2#0"]), tokenizer),
    ]
    attributed = attribute(scored, {"b": trace({"s1#0": "absent"})})
    assert [r["failure_stage"] for r in attributed] == [None, "formation"]
    summary = summarize(attributed)
    assert summary["tiers"]["1"]["funnel"]["answerable"]["formation"] == 1
    for_writing(Summary, summary, "summary.json")  # strict: the writer's own check
    for r in attributed:
        for_writing(ResultRow, r, "results.jsonl")
    assert "Where the questions that were not covered failed" in summary_markdown(summary)
    with pytest.raises(RecordError, match="failure_stage"):
        for_writing(ResultRow, {**attributed[1], "failure_stage": "vibes"}, "results.jsonl")


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (trace({"s1#0": "live"}), trace({"s1#0": "absent"}), "s1#0 live→absent"),
        (trace({"s1#0": "live"}), trace({"s1#0": "live"}), "evidence memory unchanged"),
        (None, trace({"s1#0": "live"}), "not traced in both runs"),
        (
            trace({"s1#0": "live"}),
            {"level": "turn", "held": {"s1#0": "live"}, "nodes": {"s1#0": ["other"]}},
            "same evidence held, by other memory nodes",
        ),
    ],
)
def test_memory_change_says_what_moved(before, after, expected):
    assert memory_change(before, after) == expected
