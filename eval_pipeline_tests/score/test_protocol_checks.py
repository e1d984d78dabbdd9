"""Protocol checks 1-4 (score.protocol), each broken on purpose through the real code path:
a reader that drops the date, a judge path that ignores abstention, a top_k that covers the
haystack, a retriever returning more than k."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.retrieve.protocol import RetrievalEnv, load_retriever
from eval_pipeline.retrieve.reader import (
    ABSTENTION,
    ExtractiveReader,
    ReaderReply,
    make_reader,
)
from eval_pipeline.retrieve.reader_prompts import project_prompt
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.retrieve.runner import RetrievalRunner, questions_from_goldens
from eval_pipeline.score import protocol, verdicts
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.judges import LongMemEvalJudge
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.settings import BUNDLED_CORPUS_DIR
from eval_pipeline_tests.retrieve.support import wire_layer
from eval_pipeline_tests.retrieve.test_protocol import PLUGIN, _NoStore
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

TEST_KEY = "sk-test-protocol-checks-0000"
GOLDENS = list(read_jsonl(BUNDLED_CORPUS_DIR / "sample" / "goldens.jsonl"))


def _run(reader, *, retriever: str = "EchoRetriever", top_k: int = 5, **options):
    env = RetrievalEnv(store=_NoStore())
    runner = RetrievalRunner(
        load_retriever(f"{PLUGIN}:{retriever}", env, options), reader, scope="batch", top_k=top_k
    )
    return list(runner.run(questions_from_goldens(GOLDENS[:6])))


# --- 1. the question date reaches the reader ----------------------------------------------


class DateKeepingReader:
    label = "test:keeps-date"

    def answer(self, question, question_date, context):
        return ReaderReply("an answer", project_prompt(question, question_date, context))


class DateDroppingReader:
    """memorybench#46: the prompt is built without the question date."""

    label = "test:drops-date"

    def answer(self, question, question_date, context):
        return ReaderReply("an answer", project_prompt(question, "", context).replace("Today", "A"))


def _date_check(reader) -> protocol.CheckStatus:
    results = _run(reader)
    return protocol.reader_date_check(
        {r.question_id: r.reader_saw_date for r in results},
        reader.label,
        sends_prompt=getattr(reader, "sends_prompt", True),
    )


def test_a_reader_that_drops_the_date_fails_the_date_check_and_is_not_comparable():
    kept = _date_check(DateKeepingReader())
    assert kept.status == "passed" and "all 6 reader prompt(s)" in kept.detail
    dropped = _date_check(DateDroppingReader())
    assert dropped.status == "failed"
    assert dropped.effect == "not_comparable" and dropped.refuses
    assert dropped.detail.startswith("6 of 6 reader prompt(s) lack the question date")
    # The extractive reader sends no prompt: nothing to check, never a pass by default.
    assert _date_check(ExtractiveReader()).status == "not_applicable"


def test_the_llm_reader_over_the_wire_holds_the_date(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with WireServer() as wire:
        layer = wire_layer(wire, tmp_path, "reader")
        try:
            wire.enqueue(*(ScriptedReply(text="A red Trek.") for _ in range(6)))
            results = _run(make_reader("llm", layer))
        finally:
            layer.close()
        assert [r.reader_saw_date for r in results] == [True] * 6
        dates = [g["additional_metadata"]["question_date"] for g in GOLDENS[:6]]
        sent = [req.messages[-1]["content"] for req in wire.requests]
        assert all(d in text for d, text in zip(dates, sent, strict=True))


def test_a_reader_returning_a_plain_string_leaves_the_date_unverified():
    class Silent:
        label = "test:silent"

        def answer(self, question, question_date, context):
            return "an answer"

    assert _date_check(Silent()).status == "warning"


# --- 2. abstention questions get the abstention rubric ------------------------------------


def _scored_rows() -> list[dict]:
    """The bundled goldens judged by the built-in judge with no model (`match`): abstention
    questions answered with a refusal, the others with their expected answer."""
    judge = LongMemEvalJudge(verdict="match")
    tokenizer = PayloadTokenizer()
    rows = []
    for g in GOLDENS:
        abstains = g["additional_metadata"]["abstention"]
        answer = ABSTENTION if abstains else str(g["expected_output"])
        retrieval = QuestionRetrieval(
            question_id=g["name"],
            scope="question",
            retriever="test",
            items=[RetrievedItem(text=answer, turn_ids=[], session_ids=[])],
            retrieval_context=[answer],
            answer=answer,
            reader="test",
        )
        judged = judge.judge_offline(g, answer, judge.unscored(abstains))
        rows.append(score_question(g, retrieval, tokenizer, judged=judged))
    return rows


def test_abstention_questions_and_only_they_get_the_abstention_rubric():
    rows = _scored_rows()
    abstaining = {r["question_id"] for r in rows if r["abstention"]}
    assert len(abstaining) == 4
    # Recorded per judged row, on its answer_judge metric.
    for r in rows:
        expected = "abstention" if r["abstention"] else "answer"
        assert r["metrics"]["answer_judge"]["rubric"] == expected, r["question_id"]
    status = protocol.abstention_rubric_check(rows, "longmemeval")
    assert status.status == "passed"
    assert status.detail == (
        "31 judged row(s): 4 under the abstention rubric, 27 under the answer rubric"
    )


def test_a_judge_path_that_ignores_abstention_fails_the_run(monkeypatch):
    real = verdicts.decide

    def ignoring_abstention(reference, response, *, abstention, **kw):
        return real(reference, response, abstention=False, **kw)  # memorybench#82

    monkeypatch.setattr(verdicts, "decide", ignoring_abstention)
    rows = _scored_rows()
    status = protocol.abstention_rubric_check(rows, "longmemeval")
    assert status.status == "failed" and status.effect == "fails_run" and status.refuses
    assert status.detail.startswith(
        "4 of 31 judged row(s) under the wrong rubric: 4 abstention question(s) not under "
        "the abstention rubric, 0 other question(s) under it"
    )
    abstaining = sorted(r["question_id"] for r in rows if r["abstention"])
    assert all(q in status.detail for q in abstaining)


def test_the_model_verdict_records_the_rubric_it_was_sent(tmp_path, monkeypatch):
    """The reference method: the rubric is read from the instruction the model was sent; an
    instruction builder that ignores abstention is caught."""
    from eval_pipeline.score import judge_prompt

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    golden = next(g for g in GOLDENS if g["additional_metadata"]["abstention"])

    def judged(wire, layer) -> MetricResult:
        wire.enqueue(ScriptedReply(text='{"verdict": "yes", "reason": "refused"}'))
        role = layer.role("judge")
        return asyncio.run(verdicts.judge_answer("reference", role, golden, "no idea"))

    with WireServer() as wire:
        layer = wire_layer(wire, tmp_path, "judge")
        try:
            assert judged(wire, layer).rubric == "abstention"
            real = judge_prompt.judge_instruction
            monkeypatch.setattr(
                judge_prompt,
                "judge_instruction",
                lambda qtype, abstention, tier=1: real(qtype, False, tier),
            )
            assert judged(wire, layer).rubric == "answer"
        finally:
            layer.close()


def test_a_judge_that_reports_no_rubric_is_a_warning_not_a_pass():
    rows = _scored_rows()
    for r in rows:
        r["metrics"]["answer_judge"]["rubric"] = None
    status = protocol.abstention_rubric_check(rows, "my-judge")
    assert status.status == "warning" and not status.refuses
    assert "reported no rubric for 31 of 31" in status.detail


# --- 3. top_k below the haystack ----------------------------------------------------------


def _haystacks() -> dict[str, int]:
    return {g["name"]: len(g["additional_metadata"]["haystack_session_ids"]) for g in GOLDENS}


ABSTAINING = [g["name"] for g in GOLDENS if g["additional_metadata"]["abstention"]]


def test_a_top_k_covering_the_haystack_is_flagged_with_the_questions_affected():
    # The bundled sample's haystacks hold 4 to 8 sessions: k=10 returns all of any of them.
    status = protocol.top_k_check(_haystacks(), 10, scope="question", abstention=ABSTAINING)
    assert status.status == "warning" and status.effect == "warns" and not status.refuses
    assert status.detail.startswith(
        "27 of 27 answerable question(s) have a haystack of at most top_k=10 sessions"
    )
    some = protocol.top_k_check(_haystacks(), 5, scope="question", abstention=ABSTAINING)
    assert some.status == "warning"
    affected = sum(1 for q, n in _haystacks().items() if n <= 5 and q not in ABSTAINING)
    assert some.detail.startswith(f"{affected} of 27 answerable")
    assert protocol.top_k_check(_haystacks(), 3, scope="question").status == "passed"
    # At batch scope a question can be given any session of the batch.
    batch = protocol.top_k_check(dict.fromkeys(_haystacks(), 67), 10, scope="batch")
    assert batch.status == "passed" and "batch's sessions" in batch.detail


# --- 4. no question gets more than k items ------------------------------------------------


def test_a_retriever_returning_more_than_k_fails_the_run():
    results = _run(ExtractiveReader(), retriever="ManyRetriever", top_k=10, count=30)
    returned = {r.question_id: max(len(r.items), len(r.retrieval_context)) for r in results}
    status = protocol.within_top_k_check(returned, 10, "many")
    assert status.status == "failed" and status.effect == "fails_run"
    assert status.detail.startswith(
        "retriever many returned more than top_k=10 items for 6 question(s), up to 30"
    )
    within = _run(ExtractiveReader(), retriever="ManyRetriever", top_k=10, count=10)
    ok = protocol.within_top_k_check({r.question_id: len(r.items) for r in within}, 10, "many")
    assert ok.status == "passed"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["passed", "passed"], "passed"),
        (["passed", "warning"], "warning"),
        (["warning", "failed"], "failed"),
    ],
)
def test_batches_merge_to_their_worst_status(statuses, expected):
    merged = protocol.merge(
        [
            (f"batch-0{i}", protocol.outcome(protocol.WITHIN_TOP_K, s, f"detail {i}"))
            for i, s in enumerate(statuses, 1)
        ]
    )
    assert merged.status == expected
    assert merged.detail == "batch-01: detail 1; batch-02: detail 2"
