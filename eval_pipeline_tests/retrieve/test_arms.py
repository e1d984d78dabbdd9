"""Reference arms, as the retrieval stage builds and answers them (`retrieve.arms`): the
contexts from the bundled sample's own goldens and fixtures, the run's real readers, and a
reader whose provider is down (an OpenAI-compatible server on loopback answering 500)."""

from __future__ import annotations

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.corpus.models import SessionFixture
from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy
from eval_pipeline.retrieve.arms import (
    ArmAnswer,
    answer_arm,
    ceiling_context,
    load_sessions,
    parse_arms,
    run_arms,
    write_arms,
)
from eval_pipeline.retrieve.reader import ABSTENTION, ExtractiveReader, LLMReader
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.settings import BUNDLED_CORPUS_DIR
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

SAMPLE = BUNDLED_CORPUS_DIR / "sample"
FIXTURES = SAMPLE / "fixtures.jsonl"


@pytest.fixture(scope="module")
def goldens() -> dict[str, dict]:
    return {g["name"]: g for g in read_jsonl(SAMPLE / "goldens.jsonl")}


def test_arms_parse_from_a_comma_list_or_a_list_in_a_fixed_order():
    assert parse_arms("ceiling, floor") == ["floor", "ceiling"]
    assert parse_arms(["ceiling"]) == ["ceiling"]
    assert parse_arms("") == [] and parse_arms(None) == []
    with pytest.raises(ValueError, match="unknown arm 'top'"):
        parse_arms("floor,top")
    with pytest.raises(ValueError, match="arm 'floor' given twice"):
        parse_arms("floor,floor")


def test_the_ceiling_is_every_turn_of_the_evidence_sessions_in_time_order(goldens):
    golden = goldens["c3d9e7a4"]  # multi-session: three evidence sessions
    ids = golden["additional_metadata"]["evidence_session_ids"]
    sessions = load_sessions(FIXTURES, ids)
    assert sorted(sessions) == sorted(ids)  # only the wanted ones are kept
    context, used = ceiling_context(golden, sessions)
    starts = [sessions[s].started_at for s in used]
    assert starts == sorted(starts) and sorted(used) == sorted(ids)
    expected = [
        f"[{sessions[s].started_at.replace('T', ' ')[:16]}, {t.role}] {t.content}"
        for s in used
        for t in sessions[s].turns
    ]
    # The first turn of a session is at its start; the label is the retriever's own form.
    assert context == expected
    assert len(context) == sum(len(sessions[s].turns) for s in ids)
    for evidence in golden["context"]:  # every evidence turn's text is in the context
        assert any(item.endswith(evidence) for item in context), evidence


def test_sessions_are_ordered_by_time_whatever_order_the_golden_lists_them():
    def session(sid: str, start: str) -> SessionFixture:
        return SessionFixture(
            session_id=sid,
            date="",
            started_at=start,
            turns=[
                {"role": "assistant", "content": f"{sid} b", "index": 1},
                {"role": "user", "content": f"{sid} a", "index": 0},
            ],
            question_ids=["q"],
        )

    golden = {"name": "q", "additional_metadata": {"evidence_session_ids": ["late", "early"]}}
    sessions = {
        "late": session("late", "2023-05-02T09:00:00"),
        "early": session("early", "2023-05-01T18:30:00"),
    }
    context, used = ceiling_context(golden, sessions)
    assert used == ["early", "late"]
    assert context == [
        "[2023-05-01 18:30, user] early a",
        "[2023-05-01 18:30, assistant] early b",  # index 1: one second later, same minute
        "[2023-05-02 09:00, user] late a",
        "[2023-05-02 09:00, assistant] late b",
    ]
    with pytest.raises(KeyError, match="not in fixtures"):
        ceiling_context(golden, {"late": sessions["late"]})


def test_an_abstention_question_gets_its_near_miss_sessions_and_the_floor_nothing(goldens):
    golden = goldens["91e4f2c8_abs"]
    answers = list(run_arms(["floor", "ceiling"], [golden], FIXTURES, ExtractiveReader()))
    floor, ceiling = answers
    assert (floor.arm, floor.context, floor.answer) == ("floor", [], ABSTENTION)
    assert ceiling.arm == "ceiling" and ceiling.context
    assert ceiling.sessions == golden["additional_metadata"]["evidence_session_ids"]


def test_every_arm_answers_every_question_with_the_runs_reader(goldens, tmp_path):
    chosen = [goldens["3c9e51a2"], goldens["c3d9e7a4"]]
    tokens = PayloadTokenizer()
    facts = write_arms(
        tmp_path / "arms.jsonl",
        ["floor", "ceiling"],
        chosen,
        FIXTURES,
        ExtractiveReader(),
        count_tokens=tokens.count_context,
    )
    answers = [ArmAnswer.model_validate(r) for r in read_jsonl(tmp_path / "arms.jsonl")]
    assert [(a.question_id, a.arm) for a in answers] == [
        ("3c9e51a2", "floor"),
        ("3c9e51a2", "ceiling"),
        ("c3d9e7a4", "floor"),
        ("c3d9e7a4", "ceiling"),
    ]
    assert all(a.reader == "offline:extractive" and not a.infra_failures for a in answers)
    assert [a.context_tokens for a in answers if a.arm == "floor"] == [0, 0]
    ceiling = answers[1]
    assert ceiling.context_tokens == tokens.count_context(ceiling.context) > 0
    # The extractive reader answers with the evidence's answering sentence.
    assert "Clint Yeastwood" in ceiling.answer
    assert facts["ran"] == ["floor", "ceiling"] and facts["reader"] == "offline:extractive"
    assert facts["per_arm"]["ceiling"] == {"questions": 2, "no_answer": 0, "unscored": []}


def llm_arm_answer(goldens, tmp_path, reply: ScriptedReply, context: list[str]):
    """One arm's answer from the real LLM reader over the wire, and the requests it sent."""
    with WireServer(responder=lambda r: reply) as server:
        model = f"openai_compatible:reader-model@{server.openai_base_url}"
        layer = LLMLayer(
            LLMSettings.from_specs(
                {"reader": model},
                role_overrides={"reader": {"max_retries": 0}},
                cache_path=str(tmp_path / "cache.sqlite3"),
                retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
            )
        )
        try:
            reader = LLMReader(layer.role("reader"))
            answer = answer_arm(reader, goldens["3c9e51a2"], "ceiling", context)
        finally:
            layer.close()
        return answer, list(server.requests)


def test_an_llm_readers_reply_is_the_arms_answer(goldens, tmp_path, monkeypatch):
    # The LLM reader hands back its reply with the prompt it sent; the arm keeps the text.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-arms")
    answer, requests = llm_arm_answer(
        goldens, tmp_path, ScriptedReply(text="Clint Yeastwood."), ["[2023-05-20] a turn"]
    )
    assert answer.answer == "Clint Yeastwood." and not answer.errors and not answer.infra_failures
    assert len(requests) == 1 and "a turn" in requests[0].last_user_text


def test_a_reader_whose_provider_is_down_leaves_the_arm_unscored_not_a_miss(
    goldens, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-arms")
    answer, requests = llm_arm_answer(goldens, tmp_path, ScriptedReply(status=500, text="down"), [])
    assert requests  # the reader really was called
    assert answer.answer is None and answer.errors == []  # not the reader's own failure
    assert [(f.stage, f.cause) for f in answer.infra_failures] == [("reader", "llm_provider")]
