"""Citation metrics on hand cases, and the weighted criteria judge (fake client, wire server)."""

from __future__ import annotations

import asyncio
import json

import pytest

from eval_pipeline.llm import LLMCallFailed, LLMLayer, LLMSettings, RetryPolicy
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.tier2.metrics import (
    CriteriaVerdicts,
    add_tier2_metrics,
    citation_metrics,
    criteria_judge,
    criteria_judge_batch,
    criteria_prompt_hash,
)
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

KEY = "sk-test-tier2-judge-0000"


def _golden(must=("a", "b"), must_not=("x",), criteria=None) -> dict:
    return {
        "name": "t2-demo-q1",
        "input": "What line length?",
        "expected_output": "100, with ruff",
        "additional_metadata": {
            "tier": 2,
            "abstention": False,
            "must_cite": list(must),
            "must_not_cite": list(must_not),
            "criteria": criteria
            or [
                {"criterion": "says 100", "weight": 60},
                {"criterion": "names ruff", "weight": 30},
                {"criterion": "no 120", "weight": 10},
            ],
        },
    }


def _scores(result: dict) -> dict:
    return {name: m.score for name, m in result.items()}


def test_precision_counts_only_decisive_events():
    m = citation_metrics(["a", "n1", "x", "b", "n2"], _golden())
    assert m["citation_precision"].score == pytest.approx(2 / 3)
    assert m["citation_recall"].score == 1.0 and m["citation_recall"].passed is True
    assert m["must_not_cite_hits"].score == 1.0 and m["must_not_cite_hits"].passed is False
    assert "x" in m["must_not_cite_hits"].reason
    assert not any(r.gating for r in m.values())


def test_turn_ids_are_folded_into_sessions():
    m = citation_metrics(["a#0", "a#1", "n#3"], _golden())
    assert _scores(m) == {
        "citation_precision": 1.0,
        "citation_recall": 0.5,
        "must_not_cite_hits": 0.0,
    }
    assert "missing ['b']" in m["citation_recall"].reason
    assert m["citation_recall"].passed is False and m["must_not_cite_hits"].passed is True


def test_nothing_decisive_retrieved_leaves_precision_unscored():
    m = citation_metrics(["n1", "n2"], _golden())
    assert m["citation_precision"].score is None
    assert m["citation_recall"].score == 0.0
    empty = citation_metrics([], _golden())
    assert empty["citation_precision"].score is None and empty["citation_recall"].score == 0.0


def test_top_k_cutoff_is_on_sessions():
    retrieved = [f"n{i}#0" for i in range(10)] + ["a#0", "b#0"]
    assert citation_metrics(retrieved, _golden())["citation_recall"].score == 0.0
    assert citation_metrics(retrieved, _golden(), k=12)["citation_recall"].score == 1.0
    # several turns of one session take one slot
    assert (
        citation_metrics(["a#0", "a#1", "a#2", "b#0"], _golden(), k=2)["citation_recall"].score
        == 1.0
    )


def test_empty_lists_are_unscored_not_zero():
    m = citation_metrics(["a"], _golden(must=(), must_not=()))
    assert m["citation_recall"].score is None
    assert m["must_not_cite_hits"].score is None
    assert m["citation_precision"].score is None


def test_accepts_rows_and_retrieval_objects():
    row = {"retrieved_session_ids": ["x", "a"], "retrieved_turn_ids": ["x#0", "a#0"]}
    assert citation_metrics(row, _golden())["citation_precision"].score == 0.5
    only_turns = {"retrieved_turn_ids": ["b#1"]}
    assert citation_metrics(only_turns, _golden())["citation_recall"].score == 0.5
    retrieval = QuestionRetrieval(
        question_id="t2-demo-q1",
        tier=2,
        scope="question",
        retriever="fulltext",
        items=[RetrievedItem(text="t", turn_ids=["a#0"], session_ids=["a"])],
        retrieval_context=["t"],
        answer="100",
        reader="offline:extractive",
    )
    assert citation_metrics(retrieval, _golden())["citation_precision"].score == 1.0


def test_add_tier2_metrics_merges_without_touching_the_gate():
    row = {
        "question_id": "t2-demo-q1",
        "tier": 2,
        "retrieved_session_ids": ["a", "b"],
        "metrics": {"evidence_recall": {"score": 1.0, "gating": True}},
        "covered": True,
        "weakest_link": None,
    }
    out = add_tier2_metrics(row, _golden())
    assert out is not row and "citation_precision" not in row["metrics"]
    assert out["metrics"]["citation_recall"]["score"] == 1.0
    assert out["metrics"]["criteria_score"]["score"] is None  # no judge: unscored
    assert (
        out["covered"] is True
        and out["metrics"]["evidence_recall"] == row["metrics"]["evidence_recall"]
    )
    tier1 = {**_golden(), "additional_metadata": {"tier": 1}}
    assert add_tier2_metrics(row, tier1) is row


class _FakeJudge:
    is_offline = False

    def __init__(self, reply=None, error=None):
        self.reply, self.error, self.calls = reply, error, []

    async def complete_structured(self, messages, schema, *, system=None, accept=None):
        self.calls.append((messages, schema, system))
        if self.error is not None:
            raise self.error
        parsed = schema.model_validate(self.reply)
        # As the layer does: a reply its caller refuses fails the call (and is not cached).
        problem = accept(parsed) if accept is not None else None
        if problem is not None:
            raise LLMCallFailed(problem, role="judge", kind="invalid_output", attempts=1)
        return parsed


def _verdicts(*met: bool) -> dict:
    return {
        "verdicts": [
            {"criterion": i, "met": m, "reason": f"r{i}"} for i, m in enumerate(met, start=1)
        ]
    }


def _judge(judge, answer="100 with ruff"):
    return asyncio.run(criteria_judge(judge, _golden(), answer))


def test_criteria_score_is_the_sum_of_met_weights():
    judge = _FakeJudge(_verdicts(True, False, True))
    result = _judge(judge)
    assert result.score == 70.0 and result.passed is True and not result.gating
    assert "2 (r2)" in result.reason
    message, schema, system = judge.calls[0]
    assert schema is CriteriaVerdicts and "(60 points) says 100" in message
    assert "Assistant's answer: 100 with ruff" in message and system
    assert _judge(_FakeJudge(_verdicts(True, True, True))).score == 100.0
    assert _judge(_FakeJudge(_verdicts(False, True, True))).passed is False  # 40 < 70


def test_criteria_judge_unscored_paths():
    assert _judge(None).score is None and "no judge" in _judge(None).reason

    class Offline(_FakeJudge):
        is_offline = True

    assert _judge(Offline()).score is None
    assert _judge(_FakeJudge(_verdicts(True, True, True)), answer=None).score is None
    failed = _judge(
        _FakeJudge(error=LLMCallFailed("boom", role="judge", kind="server", attempts=1))
    )
    assert failed.score is None and "boom" in failed.error
    short = _judge(_FakeJudge(_verdicts(True, True)))  # one verdict missing
    assert short.score is None and "expected [1, 2, 3]" in short.error
    doubled = {"verdicts": _verdicts(True, True, True)["verdicts"] + [{"criterion": 1, "met": 1}]}
    assert _judge(_FakeJudge(doubled)).score is None


def test_batch_without_a_layer_is_unscored():
    out = criteria_judge_batch(None, [(_golden(), "a"), (_golden(), None)])
    assert [m.score for m in out] == [None, None]


def _responder(request: RecordedRequest) -> ScriptedReply:
    text = " ".join(str(m.get("content", "")) for m in request.messages)
    assert '"CriteriaVerdicts"' in text
    met = "ruff" in request.last_user_text.split("Assistant's answer:")[-1]
    return ScriptedReply(text=json.dumps(_verdicts(True, met, True)))


def _layer(server: WireServer, tmp_path) -> LLMLayer:
    settings = LLMSettings.from_specs(
        {"judge": f"openai_compatible:judge-model@{server.openai_base_url}"},
        role_overrides={"judge": {"api_key_env": "TIER2_JUDGE_KEY", "max_retries": 1}},
        cache_path=str(tmp_path / "cache.sqlite3"),
        retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
    )
    return LLMLayer(settings)


@pytest.fixture
def judge_env(monkeypatch):
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    monkeypatch.setenv("TIER2_JUDGE_KEY", KEY)


def test_criteria_judge_through_the_llm_layer(judge_env, tmp_path):
    pairs = [(_golden(), "100, ruff"), (_golden(), "100 characters")]
    with WireServer(responder=_responder) as server:
        layer = _layer(server, tmp_path)
        first = criteria_judge_batch(layer, pairs)
        calls = server.request_count
        again = criteria_judge_batch(layer, pairs)
        assert server.request_count == calls  # cached by the layer
        layer.close()
    assert [m.score for m in first] == [100.0, 70.0]
    assert [m.score for m in again] == [100.0, 70.0]


def test_criteria_judge_outage_is_unscored(judge_env, tmp_path):
    with WireServer(responder=lambda r: ScriptedReply(status=500, text="down")) as server:
        layer = _layer(server, tmp_path)
        out = criteria_judge_batch(layer, [(_golden(), "100, ruff")])
        layer.close()
    assert out[0].score is None and out[0].error and KEY not in out[0].error


def test_prompt_hash_is_stable():
    assert criteria_prompt_hash() == criteria_prompt_hash() and len(criteria_prompt_hash()) == 64
