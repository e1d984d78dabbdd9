"""Reference arms judged and summarised (`score.arms`): the run's own answer judge on each
arm's answer, gated on the answer alone; an arm not judged is unscored (null), never a miss;
the summary says where the system sits; the arms change no pin of the system's."""

from __future__ import annotations

import pytest

from eval_pipeline.failures import InfraFailure
from eval_pipeline.retrieve.arms import ArmAnswer
from eval_pipeline.retrieve.reader import ABSTENTION
from eval_pipeline.runs.calibrate import floor_key
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.pins import COMPARABILITY_PINS, differing_pins, pin_values
from eval_pipeline.runs.records import ResultRow, Summary
from eval_pipeline.runs.records.base import for_writing
from eval_pipeline.score import arms, protocol
from eval_pipeline.score.answer_judge import load_judge
from eval_pipeline.score.judges import offline_judge_results
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize, summary_markdown
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline_tests.runs.synthetic import outcomes, write_run
from eval_pipeline_tests.score.test_judges import _golden, _retrieval

DOWN = InfraFailure(stage="reader", cause="llm_provider", error="HTTP 500: down")


def _answer(qid: str, arm: str, answer: str | None, *, down: bool = False) -> ArmAnswer:
    return ArmAnswer(
        question_id=qid,
        arm=arm,
        reader="offline:extractive",
        answer=None if down else answer,
        context_tokens=0 if arm == "floor" else 12,
        infra_failures=[DOWN] if down else [],
    )


def _judge(verdict: str = "match"):
    return load_judge("longmemeval", {"verdict": verdict})


GOLDENS = {
    "q1": _golden("q1"),
    "q2": _golden("q2", qtype="single-session-user"),
    "q3": _golden("q3"),
    "q4_abs": _golden("q4_abs", abstention=True),
}
# (floor, ceiling) per question; None: the arm's reader provider was down.
ANSWERS = {
    "q1": (ABSTENTION, "It was blue."),
    "q2": (None, "It was blue."),
    "q3": (ABSTENTION, "a red bike"),
    "q4_abs": (ABSTENTION, "It was blue."),
}
SYSTEM = {"q1": "It was blue.", "q2": "a red bike", "q3": "a red bike", "q4_abs": ABSTENTION}


def _arm_answers() -> list[ArmAnswer]:
    return [
        _answer(q, arm, text, down=text is None)
        for q, pair in ANSWERS.items()
        for arm, text in zip(("floor", "ceiling"), pair, strict=True)
    ]


def _rows() -> list[dict]:
    tok = PayloadTokenizer()
    judge = _judge()
    out = []
    for qid, golden in GOLDENS.items():
        abst = golden["additional_metadata"]["abstention"]
        judged = judge.judge_offline(golden, SYSTEM[qid], offline_judge_results(abst))
        out.append(score_question(golden, _retrieval(qid, SYSTEM[qid]), tok, judged=judged))
    return out


def test_each_arm_is_judged_by_the_runs_judge_and_gated_on_its_answer_alone():
    answers = _arm_answers()
    results = arms.judge_arms(_judge(), None, GOLDENS, answers)
    rows = arms.row_arms(_rows(), answers, results)
    got = {r["question_id"]: {a: v["covered"] for a, v in r["arms"].items()} for r in rows}
    assert got == {
        "q1": {"floor": False, "ceiling": True},
        "q2": {"floor": None, "ceiling": True},  # the floor's reader was down: unscored
        "q3": {"floor": False, "ceiling": False},
        "q4_abs": {"floor": True, "ceiling": False},  # abstaining is right here
    }
    q1 = rows[0]["arms"]["floor"]
    assert q1["answer"] == ABSTENTION and q1["answer_judge"] == 0.0 and q1["context_tokens"] == 0
    for row in rows:
        for_writing(ResultRow, row, "results.jsonl")  # the record takes the arms field


def test_an_arms_infrastructure_failure_is_unscored_never_zero():
    answers = _arm_answers()
    results = arms.judge_arms(_judge(), None, GOLDENS, answers)
    rows = arms.row_arms(_rows(), answers, results)
    floor = rows[1]["arms"]["floor"]
    assert floor["covered"] is None and floor["answer_judge"] is None
    assert floor["infra_failures"][0]["cause"] == "llm_provider"
    summary = arms.arm_summary(rows, "floor")
    # q1 and q3 not covered, q2 left out of the rate: 0 of 2, one unscored, not 0 of 3.
    assert summary["coverage"]["n_scored"] == 2 and summary["coverage"]["n_unscored"] == 1
    assert summary["unscored"] == 1 and summary["unscored_infrastructure"] == 1
    # The system's own row is untouched: its coverage and status do not see the arm's outage.
    assert rows[1]["covered"] is not None and not rows[1]["infra_failures"]
    assert summarize(rows)["status"] == "complete"


def test_a_verdict_that_needs_a_model_leaves_the_arms_unscored_without_one():
    answers = [_answer("q1", "ceiling", "It was blue.")]
    [result] = arms.judge_arms(_judge("reference"), None, GOLDENS, answers)
    part = arms.arm_result(answers[0], result, abstention=False)
    assert part["covered"] is None and part["answer_judge"] is None
    assert "needs a judge model" in part["reason"]


def test_the_summary_says_where_the_system_sits_per_tier_and_type():
    answers = _arm_answers()
    rows = arms.row_arms(_rows(), answers, arms.judge_arms(_judge(), None, GOLDENS, answers))
    summary = summarize(rows)
    tier = summary["tiers"]["1"]
    system = tier["coverage"]["rate"]
    assert system == pytest.approx(1 / 3)  # q1 of q1..q3
    ta = tier["arms"]
    assert ta["arms"]["floor"]["coverage"]["rate"] == 0.0
    assert ta["arms"]["ceiling"]["coverage"]["rate"] == pytest.approx(2 / 3)
    assert ta["position"]["overall"] == "system 33.3% between floor 0.0% and ceiling 66.7%"
    assert ta["position"]["by_type"]["single-session-user"] == (
        "system 0.0% between floor unscored and ceiling 100.0%"
    )
    # Abstention apart: the ceiling answered from its near-miss sessions instead of abstaining.
    line = "system 100.0% above the ceiling 0.0% (floor 100.0%)"
    assert ta["position"]["abstention"] == line
    assert ta["position"]["outside"] == [f"abstention: {line}"]
    for_writing(Summary, summary, "summary.json")
    text = summary_markdown(summary)
    assert "reference arms: system 33.3% between floor 0.0% and ceiling 66.7%" in text
    assert "note: abstention: system 100.0% above the ceiling" in text


def test_position_names_a_system_outside_the_arms_and_leaves_out_an_arm_not_run():
    assert arms.position(0.05, 0.10, 0.70) == "system 5.0% below the floor 10.0% (ceiling 70.0%)"
    assert arms.position(0.80, 0.10, 0.70) == "system 80.0% above the ceiling 70.0% (floor 10.0%)"
    assert arms.position(0.30, 0.10, None, ["floor"]) == "system 30.0%, floor 10.0%"
    assert (
        arms.position(None, 0.10, 0.70) == "system unscored between floor 10.0% and ceiling 70.0%"
    )
    assert arms.outside(0.05, 0.10, 0.70) and not arms.outside(0.30, 0.10, 0.70)
    assert not arms.outside(None, 0.10, 0.70)


def test_without_arms_nothing_is_added():
    rows = _rows()
    assert "arms" not in summarize(rows)["tiers"]["1"]
    assert all("arms" not in r for r in rows)


def test_arms_change_no_pin_of_the_systems_scores(tmp_path):
    """The same system rows, once with arms (rows and manifest) and once without: every
    comparability pin, the configuration key and the system's summary are the same."""
    plain = outcomes("q", [True, False, True, None])
    with_arms = [
        {**r, "arms": {"floor": {"answer": ABSTENTION, "covered": False, "answer_judge": 0.0}}}
        for r in plain
    ]
    record = {"ran": ["floor"], "version": 1, "questions": 4, "unscored": {"floor": 0}}
    a = load_run(write_run(tmp_path, plain, label="plain"))
    b = load_run(write_run(tmp_path, with_arms, label="arms", arms=record))
    assert b.manifest["arms"]["ran"] == ["floor"]
    assert differing_pins(a, b) == []
    assert pin_values(a, COMPARABILITY_PINS) == pin_values(b, COMPARABILITY_PINS)
    assert floor_key(a) == floor_key(b)
    sa, sb = a.summary["tiers"]["1"], b.summary["tiers"]["1"]
    assert {k: v for k, v in sb.items() if k != "arms"} == sa


def _summary_with(ceiling: dict[str, str | None]) -> dict:
    answers = [
        _answer(q, arm, text, down=text is None)
        for q, (floor, _) in ANSWERS.items()
        for arm, text in (("floor", floor), ("ceiling", ceiling.get(q, ANSWERS[q][1])))
    ]
    rows = arms.row_arms(_rows(), answers, arms.judge_arms(_judge(), None, GOLDENS, answers))
    return summarize(rows)


def test_the_protocol_check_passes_a_system_within_its_ceiling():
    status = protocol.within_ceiling_check(_summary_with({})["tiers"])
    assert status.status == "passed" and status.effect == "warns"
    assert "in all 3 line(s)" in status.detail  # answerable and its two question types


def test_the_protocol_check_warns_where_a_system_is_above_its_ceiling():
    # The ceiling misses q1, which the system covered: above it overall (1/3 > 0/3) and for
    # q1's type (1/2 > 0/2); abstention questions are not compared.
    status = protocol.within_ceiling_check(
        _summary_with({"q1": "a red bike", "q2": "a red bike"})["tiers"]
    )
    assert status.status == "warning" and not status.refuses
    assert status.detail.endswith(
        "in 2 of 3 line(s): tier 1 answerable: system 33.3% > ceiling 0.0%; "
        "tier 1 multi-session: system 50.0% > ceiling 0.0%"
    )


def test_the_protocol_check_does_not_apply_without_a_ceiling():
    assert protocol.within_ceiling_check(summarize(_rows())["tiers"]).status == "not_applicable"
    # A ceiling left unscored on every question (its reader down) has nothing to compare.
    down = _summary_with(dict.fromkeys(GOLDENS))
    assert protocol.within_ceiling_check(down["tiers"]).status == "not_applicable"
