"""Judged metrics through the real openai SDK against a local wire-format server.

No real provider is reached. A scripted judge answers each schema it is asked for; an
outage (HTTP 500 on every call) must leave the judged metrics unscored, never 0.
"""

from __future__ import annotations

import json

import pytest

from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.score.judges import judge_batch, judge_instruction, prompt_hash
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

KEY = "sk-test-judge-LEAKCANARY-424242"


def _answers(request: RecordedRequest) -> ScriptedReply:
    """A deterministic judge: picks its reply by the JSON schema the caller asked for."""
    text = " ".join(str(m.get("content", "")) for m in request.messages)
    if '"JudgeVerdict"' in text:
        verdict = "yes" if "blue" in request.last_user_text.split("response:")[-1] else "no"
        return ScriptedReply(text=json.dumps({"verdict": verdict, "reason": "compared"}))
    if '"Verdicts"' in text:
        return ScriptedReply(text=json.dumps({"verdicts": [{"verdict": "yes", "reason": "r"}]}))
    if '"Steps"' in text:
        return ScriptedReply(text=json.dumps({"steps": ["compare facts"]}))
    if '"ReasonScore"' in text:
        return ScriptedReply(text=json.dumps({"reason": "fine", "score": 8}))
    return ScriptedReply(text=json.dumps({"reason": "because"}))


def _layer(server: WireServer, tmp_path) -> LLMLayer:
    settings = LLMSettings.from_specs(
        {"judge": f"openai_compatible:judge-model@{server.openai_base_url}"},
        role_overrides={"judge": {"api_key_env": "JUDGE_KEY", "max_retries": 1}},
        cache_path=str(tmp_path / "cache.sqlite3"),
        retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
    )
    return LLMLayer(settings)


def _golden(qid, qtype="multi-session", abstention=False, expected="blue"):
    return {
        "name": qid,
        "input": "What colour was the bike?",
        "expected_output": expected,
        "additional_metadata": {
            "tier": 1,
            "question_type": qtype,
            "question_date": "2023/05/30 (Tue) 23:40",
            "abstention": abstention,
            "evidence_turn_ids": [] if abstention else ["s1#0"],
            "evidence_turn_roles": [] if abstention else ["user"],
            "evidence_session_ids": [] if abstention else ["s1"],
            "haystack_session_ids": ["s1"],
        },
    }


def _retrieval(qid, answer):
    item = RetrievedItem(text="I bought a blue bike", turn_ids=["s1#0"], session_ids=["s1"])
    return QuestionRetrieval(
        question_id=qid,
        scope="question",
        retriever="fulltext",
        items=[item],
        retrieval_context=[item.text],
        answer=answer,
        reader="offline:extractive",
    )


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    monkeypatch.setenv("JUDGE_KEY", KEY)


def test_judged_metrics_and_gate(env, tmp_path):
    goldens = [_golden("q1"), _golden("q2"), _golden("q3_abs", abstention=True)]
    answers = ["It was blue.", "It was red.", "You never told me."]
    with WireServer(responder=_answers) as server:
        layer = _layer(server, tmp_path)
        judged = judge_batch(
            layer, [(g, ["I bought a blue bike"], a) for g, a in zip(goldens, answers, strict=True)]
        )
        calls = server.request_count
        again = judge_batch(
            layer, [(g, ["I bought a blue bike"], a) for g, a in zip(goldens, answers, strict=True)]
        )
        assert server.request_count == calls  # the re-run came from the cache
        layer.close()
    assert [j["answer_judge"].score for j in judged] == [1.0, 0.0, 0.0]
    assert [j["answer_judge"].score for j in again] == [1.0, 0.0, 0.0]
    assert judged[0]["contextual_recall"].score == 1.0 and judged[0]["contextual_recall"].gating
    assert judged[2]["contextual_recall"].score is None  # no evidence for abstention
    assert judged[0]["answer_coverage"].score is not None
    tok = PayloadTokenizer()
    rows = [
        score_question(g, _retrieval(g["name"], a), tok, judged=j)
        for g, a, j in zip(goldens, answers, judged, strict=True)
    ]
    assert [r["covered"] for r in rows] == [True, False, False]
    assert rows[1]["weakest_link"] == "answer_judge"


def test_judge_outage_is_unscored_not_zero(env, tmp_path):
    goldens = [_golden("q1"), _golden("q2", "temporal-reasoning")]
    with WireServer(responder=lambda r: ScriptedReply(status=500, text="boom")) as server:
        layer = _layer(server, tmp_path)
        judged = judge_batch(layer, [(g, ["ctx"], "blue") for g in goldens])
        layer.close()
    for j in judged:
        for name, metric in j.items():
            assert metric.score is None and metric.passed is None, name
        assert j["answer_judge"].error and KEY not in j["answer_judge"].error
    tok = PayloadTokenizer()
    rows = [
        score_question(g, _retrieval(g["name"], "blue"), tok, judged=j)
        for g, j in zip(goldens, judged, strict=True)
    ]
    summary = summarize(rows)["tiers"]["1"]
    assert summary["coverage"] is None  # a None rate, not 0%
    assert summary["counts"]["unscored"] == 2
    assert summary["metrics"]["answer_judge"]["n_unscored"] == 2
    assert summary["metrics"]["answer_judge"]["mean"] is None


def test_prompt_hash_is_stable_and_instructions_differ_by_type():
    assert prompt_hash() == prompt_hash() and len(prompt_hash()) == 64
    assert judge_instruction("temporal-reasoning", False) != judge_instruction(
        "multi-session", False
    )
    assert "unanswerable" in judge_instruction("multi-session", True)
