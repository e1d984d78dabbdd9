"""Canaries scored apart, in process: the bundled set's questions, retrievals as a retriever
would return them, the real scorer and the real offline answer judge (`match`)."""

from __future__ import annotations

import pytest

from eval_pipeline import build
from eval_pipeline.config import ScoringConfig
from eval_pipeline.corpus.canaries import canary_goldens, load_canaries
from eval_pipeline.failures import InfraFailure
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.runs.records import CanaryRow, for_writing
from eval_pipeline.score.canaries import BROKEN, canary_row, canary_summary, canary_verdict
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.tokens import PayloadTokenizer


@pytest.fixture(scope="module")
def planted() -> dict[str, dict]:
    canaries = load_canaries()
    rows = canary_goldens(canaries, [])
    return {r["name"]: r for r in rows}


def _turn_text(golden: dict, turn: str) -> str:
    """The text of a canary's own turn, as the bundled set states it."""
    canaries = load_canaries()
    q = next(q for q in canaries.questions if q.question_id == golden["name"])
    return q.sessions[0].turns[int(turn.split("#")[1])]["content"]


def _retrieval(qid: str, turns: list[tuple[str, str]], answer: str | None, **extra):
    items = [
        RetrievedItem(text=text, turn_ids=[t], session_ids=[t.split("#")[0]], score=1.0)
        for t, text in turns
    ]
    return QuestionRetrieval(
        question_id=qid,
        tier=0,
        scope="question",
        retriever="test",
        items=items,
        retrieval_context=[i.text for i in items],
        answer=answer,
        reader="offline:extractive",
        **extra,
    )


def _score(golden: dict, retrieval: QuestionRetrieval, batch: str | None = None) -> dict:
    judge = build.answer_judge(ScoringConfig())
    judged = judge.unscored(False, "unscored: no judge")
    if not retrieval.infra_failures:
        judged = judge.judge_offline(golden, retrieval.answer, judged)
    scored = score_question(golden, retrieval, PayloadTokenizer(), judged=judged, gate_k=10)
    row = canary_row(golden, scored, judged, batch=batch, gate_k=10, level="turn")
    for_writing(CanaryRow, row, "canaries.jsonl")  # what the bundle would refuse, refused here
    return row


def test_a_returned_and_answered_canary(planted):
    golden = planted["canary_locker"]
    evidence = golden["additional_metadata"]["evidence_turn_ids"][0]
    text = _turn_text(golden, evidence)
    other = ("canary_s_ferry#0", _turn_text(planted["canary_ferry"], "canary_s_ferry#0"))
    row = _score(golden, _retrieval("canary_locker", [other, (evidence, text)], text))
    assert row["returned"] is True and row["status"] == "returned"
    assert row["evidence_rank"] == 2
    assert row["answered"] is True  # "7352" is in the answer: the match verdict says yes


def test_a_fact_outside_the_top_k_is_not_returned_and_says_the_system_is_broken(planted):
    golden = planted["canary_padlock"]
    evidence = golden["additional_metadata"]["evidence_turn_ids"][0]
    filler = [(f"canary_s_padlock#{i}", "something else") for i in (0, 1, 3)]
    rows = [
        _score(golden, _retrieval("canary_padlock", filler, "I don't know.")),
        _score(
            planted["canary_ferry"],
            _retrieval(
                "canary_ferry",
                [("canary_s_ferry#0", "The booking reference is TQV-5583.")],
                "TQV-5583",
            ),
        ),
    ]
    assert rows[0]["returned"] is False and rows[0]["status"] == "failed"
    assert rows[0]["evidence_rank"] is None and evidence not in rows[0]["retrieved_turn_ids"]
    assert rows[0]["answered"] is False
    summary = canary_summary(rows, {"version": 1, "sha256": "x"})
    assert summary["planted"] == 2 and summary["returned"] == 1 and summary["answered"] == 1
    assert summary["failed"] == ["canary_padlock"] and summary["unanswered"] == ["canary_padlock"]
    verdict, line = canary_verdict(summary)
    assert verdict == "broken" and "1 of 2" in line and "canary_padlock" in line
    assert line.endswith(BROKEN)


def test_an_infrastructure_failure_leaves_a_canary_unscored_never_broken(planted):
    golden = planted["canary_tortoise"]
    down = InfraFailure(stage="retrieval", cause="graph_server", error="connection refused")
    row = _score(golden, _retrieval("canary_tortoise", [], None, infra_failures=[down]), "b-1")
    assert row["returned"] is None and row["answered"] is None and row["status"] == "unscored"
    assert row["key"] == "canary_tortoise@b-1"
    summary = canary_summary([row], None)
    # Nothing scored: the counts are null, never 0, and nothing is called a failure.
    assert summary["returned"] is None and summary["answered"] is None
    assert summary["failed"] == [] and summary["unscored_ids"] == ["canary_tortoise@b-1"]
    verdict, line = canary_verdict(summary)
    assert verdict == "unchecked" and "unscored by infrastructure" in line
    assert canary_verdict(None)[0] == "off"


def test_a_judge_failure_leaves_the_answer_unjudged_but_the_recall_decided(planted):
    from eval_pipeline.score.gate import MetricResult

    golden = planted["canary_ferry"]
    [evidence] = golden["additional_metadata"]["evidence_turn_ids"]
    retrieval = _retrieval("canary_ferry", [(evidence, _turn_text(golden, evidence))], "TQV-5583")
    judged = {"answer_judge": MetricResult.unscored("judge down", gating=True, error="HTTP 500")}
    scored = score_question(golden, retrieval, PayloadTokenizer(), judged=judged, gate_k=10)
    row = canary_row(golden, scored, judged, batch=None, gate_k=10, level="turn")
    assert scored["infra_failures"] and row["infra_failures"]  # the judge's, not retrieval's
    assert row["returned"] is True and row["answered"] is None and row["status"] == "returned"
    summary = canary_summary([row], None)
    assert summary["returned"] == 1 and summary["answered"] is None
    assert canary_verdict(summary) == ("ok", "canaries: 1 of 1 planted facts returned, not judged")
