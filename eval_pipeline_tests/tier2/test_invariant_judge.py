"""Tier 2's invariant judge through the real openai SDK against the local wire-format server
(no real provider), its 30/30/20/20 weighting, its schema and its unscored paths; and the
labelled-set mechanism applied to it on the tier-2 items."""

from __future__ import annotations

import asyncio
import json

import pytest

from eval_pipeline.corpus.judge_labels import invariant_items, load_labels
from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy
from eval_pipeline.score.agreement import VerdictRecord, compute_agreement
from eval_pipeline.tier2 import load_tier2, load_universe
from eval_pipeline.tier2.invariant_judge import (
    CLAIM_MAX_CHARS,
    CLAIMS_MAX,
    INVARIANT_SYSTEM,
    REASON_MAX_CHARS,
    WEIGHTS,
    InvariantGrades,
    invariant_judge,
    invariant_judge_batch,
    invariant_prompt_hash,
    invariant_verdict,
    score_grades,
    signal_events,
)
from eval_pipeline.tier2.metrics import criteria_prompt_hash
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

KEY = "sk-test-invariant-LEAKCANARY-777"
GOLDEN = "t2-time-billing-2140-deploy-q1"


@pytest.fixture(scope="module")
def goldens():
    return {g["name"]: g for g in load_tier2().goldens}


@pytest.fixture(scope="module")
def universe():
    return load_universe()


def _grades(f, c, cl, u, claims=()):
    return {
        "faithfulness": {"score": f, "reason": "f"},
        "coverage": {"score": c, "reason": "c"},
        "clarity": {"score": cl, "reason": "cl"},
        "usefulness": {"score": u, "reason": "u"},
        "unsupported_claims": list(claims),
    }


def _layer(server: WireServer, tmp_path) -> LLMLayer:
    settings = LLMSettings.from_specs(
        {"judge": f"openai_compatible:judge-model@{server.openai_base_url}"},
        role_overrides={"judge": {"api_key_env": "INVARIANT_JUDGE_KEY", "max_retries": 1}},
        cache_path=str(tmp_path / "cache.sqlite3"),
        retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
    )
    return LLMLayer(settings)


@pytest.fixture
def judge_env(monkeypatch):
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    monkeypatch.setenv("INVARIANT_JUDGE_KEY", KEY)


def _responder(request: RecordedRequest) -> ScriptedReply:
    """A scripted judge: faithful when the answer names raj.patel, invented otherwise."""
    text = " ".join(str(m.get("content", "")) for m in request.messages)
    assert '"InvariantGrades"' in text
    answer = request.last_user_text.split("Assistant's answer:")[-1]
    if "raj.patel" in answer:
        return ScriptedReply(text=json.dumps(_grades(4, 4, 3, 3)))
    return ScriptedReply(text=json.dumps(_grades(0, 1, 4, 2, ["dana.kim triggered it"])))


def test_weighting_is_30_30_20_20():
    assert WEIGHTS == {"faithfulness": 30, "coverage": 30, "clarity": 20, "usefulness": 20}
    score = lambda *g: score_grades(InvariantGrades.model_validate(_grades(*g))).score  # noqa: E731
    assert score(4, 4, 4, 4) == 100.0
    assert score(0, 0, 0, 0) == 0.0
    assert score(4, 0, 0, 0) == 30.0 and score(0, 4, 0, 0) == 30.0
    assert score(0, 0, 4, 0) == 20.0 and score(0, 0, 0, 4) == 20.0
    assert score(2, 3, 1, 4) == pytest.approx(15 + 22.5 + 5 + 20)
    # cosmetic clarity cannot make up for hallucination and omission
    polished_but_invented = score_grades(InvariantGrades.model_validate(_grades(0, 0, 4, 4)))
    assert polished_but_invented.score == 40.0 and polished_but_invented.passed is False
    r = score_grades(InvariantGrades.model_validate(_grades(4, 3, 2, 1)))
    assert r.dimensions["coverage"].points == 22.5 and r.dimensions["coverage"].grade == 3
    assert r.passed is False and r.score == 30 + 22.5 + 10 + 5  # 67.5 < 70


def test_passing_needs_the_aggregate_and_both_invariants():
    def result(*g):
        return score_grades(InvariantGrades.model_validate(_grades(*g)))

    assert result(4, 3, 3, 3).passed is True  # 82.5
    assert result(3, 3, 4, 4).passed is True  # 85
    half_covered = result(4, 2, 4, 2)  # 75 by the weights alone
    assert half_covered.score == 75.0 and half_covered.passed is False
    assert "fails on coverage" in half_covered.reason
    unsupported = result(2, 4, 4, 4)  # 85, with several unsupported claims
    assert unsupported.score == 85.0 and unsupported.passed is False
    assert unsupported.as_metric().passed is False and unsupported.as_metric().score == 85.0
    assert result(3, 3, 3, 3).passed is True and result(3, 3, 3, 3).score == 75.0


def test_valid_reply_through_the_wire_server(judge_env, tmp_path, goldens):
    golden = goldens[GOLDEN]
    pairs = [
        (golden, "2024-03-07 at 09:30 UTC, triggered by raj.patel."),
        (golden, "It was deployed on 2024-03-07 by dana.kim."),
    ]
    with WireServer(responder=_responder) as server:
        layer = _layer(server, tmp_path)
        first = invariant_judge_batch(layer, pairs)
        calls = server.request_count
        again = invariant_judge_batch(layer, pairs)
        assert server.request_count == calls == 2  # the re-run came from the cache
        # the batch runs concurrently: find the request by its answer, not its position
        [request] = [r for r in server.requests if r.last_user_text.endswith("raj.patel.")]
        layer.close()
    assert [r.score for r in first] == [30 + 30 + 15 + 15, 0 + 7.5 + 20 + 10]
    assert [r.score for r in again] == [r.score for r in first]
    good, bad = first
    assert good.passed is True and invariant_verdict(good) == "yes"
    assert bad.passed is False and invariant_verdict(bad) == "no"
    assert bad.unsupported_claims == ["dana.kim triggered it"]
    assert "faithfulness 0/4" in bad.reason
    metric = good.as_metric()
    assert metric.score == 90.0 and metric.threshold == 70.0 and not metric.gating
    user = request.last_user_text
    # the signal event with its id, kind and time; the answer; not the reference answer
    assert "acme-deploy-billing-api-prod-0307 (deploy, 2024-03-07 09:30 UTC)" in user
    assert "Triggered by raj.patel" in user and user.endswith("triggered by raj.patel.")
    assert golden["expected_output"] not in user
    system = " ".join(str(m["content"]) for m in request.messages if m.get("role") == "system")
    assert INVARIANT_SYSTEM in system


def test_invalid_reply_is_unscored_with_the_error(judge_env, tmp_path, goldens):
    golden = goldens[GOLDEN]
    with WireServer(responder=lambda r: ScriptedReply(text="I'd give it a solid B+.")) as server:
        layer = _layer(server, tmp_path)
        [result] = invariant_judge_batch(layer, [(golden, "raj.patel")])
        assert server.request_count == 2  # the reply, then the layer's one repair
        layer.close()
    assert result.score is None and result.passed is None and result.dimensions is None
    assert result.reason == "judge failed" and "InvariantGrades" in result.error
    assert result.as_metric().score is None and result.as_metric().error == result.error


def test_out_of_range_or_boolean_grade_is_unscored(judge_env, tmp_path, goldens):
    golden = goldens[GOLDEN]
    for bad in (_grades(7, 4, 4, 4), _grades(True, 4, 4, 4), _grades(-1, 4, 4, 4)):
        with WireServer(responder=lambda r, bad=bad: ScriptedReply(text=json.dumps(bad))) as s:
            layer = _layer(s, tmp_path / str(bad["faithfulness"]["score"]))
            [result] = invariant_judge_batch(layer, [(golden, "raj.patel")])
            layer.close()
        assert result.score is None and "faithfulness.score" in result.error, bad


def test_outage_is_unscored_never_zero(judge_env, tmp_path, goldens):
    with WireServer(responder=lambda r: ScriptedReply(status=500, text="down")) as server:
        layer = _layer(server, tmp_path)
        [result] = invariant_judge_batch(layer, [(goldens[GOLDEN], "raj.patel")])
        layer.close()
    assert result.score is None and result.error and KEY not in result.error


def test_unscored_paths_without_a_call(goldens):
    golden = goldens[GOLDEN]

    class Offline:
        is_offline = True

    run = asyncio.run
    assert run(invariant_judge(None, golden, "a")).reason == "unscored: no judge"
    assert run(invariant_judge(Offline(), golden, "a")).score is None
    assert invariant_judge_batch(None, [(golden, "a")])[0].score is None

    class Never:
        is_offline = False

        async def complete_structured(self, *a, **k):  # pragma: no cover - must not be called
            raise AssertionError("called")

    assert run(invariant_judge(Never(), golden, None)).reason == "no answer was produced"
    empty = {**golden, "context": [], "additional_metadata": {"evidence_turn_ids": []}}
    assert "no signal events" in run(invariant_judge(Never(), empty, "a")).reason


def test_schema_has_no_length_or_range_keywords():
    forbidden = {
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "pattern",
    }

    def keys(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield k
                yield from keys(v)
        elif isinstance(node, list):
            for v in node:
                yield from keys(v)

    assert not forbidden & set(keys(InvariantGrades.model_json_schema()))


def test_lengths_are_enforced_on_parsing():
    long = _grades(4, 4, 4, 4, ["x" * 5000] * 50 + ["  "])
    long["faithfulness"]["reason"] = "y" * 5000
    g = InvariantGrades.model_validate(long)
    assert len(g.faithfulness.reason) == REASON_MAX_CHARS and g.faithfulness.reason.endswith("…")
    assert len(g.unsupported_claims) == CLAIMS_MAX
    assert all(len(c) == CLAIM_MAX_CHARS for c in g.unsupported_claims)


def test_signal_events_come_from_the_questions_evidence(goldens, universe):
    golden = goldens["t2-pref-money-representation-q1"]  # narrowed signal: turns [0, 1] and [1]
    events = signal_events(golden, universe)
    assert [e.id for e in events] == ["acme-pr-billing-api-412", "acme-chat-payments-money"]
    assert len(events[0].messages) == 2 and events[0].source == "pull_request"
    assert events[0].timestamp == "2024-02-26 11:00"
    assert events[1].messages == [m for m in events[1].messages if m.startswith("dana.kim:")]
    plain = signal_events(golden)  # no universe: the golden's context text
    assert [e.id for e in plain] == [e.id for e in events] and plain[0].timestamp is None
    assert plain[0].messages[1] == golden["context"][1]


def test_prompt_hash_is_a_pin_of_its_own():
    h = invariant_prompt_hash()
    assert h == invariant_prompt_hash() and len(h) == 64 and h != criteria_prompt_hash()


def test_the_labelled_set_checks_the_invariant_judge_too(goldens, universe):
    """The same agreement mechanism over the tier-2 items that name a golden: here with a
    scripted judge that grades each item's answer as its label says (a perfect judge)."""
    labels = load_labels()
    subset = invariant_items(labels)
    tier2 = subset.items
    assert len(tier2) >= 30 and all(i.tier == 2 and i.golden in goldens for i in tier2)
    # where the protocols differ, the invariant verdict is its own (a correct answer among
    # unsupported claims: "contains the answer" is yes, "every claim supported" is no)
    differ = {i.id: i for i in labels.items if i.invariant_label}
    assert {i.hard_case for i in differ.values()} == {"buried_among_wrong_facts"}
    assert all(i.label == differ[i.id].invariant_label for i in tier2 if i.id in differ)
    for item in tier2:  # an item judges the golden's own question against its answer
        assert item.question == goldens[item.golden]["input"]
        assert item.reference == goldens[item.golden]["expected_output"]
        assert item.question_type == goldens[item.golden]["additional_metadata"]["question_type"]
        assert signal_events(goldens[item.golden], universe)
    by_answer = {i.response: i.label for i in tier2}

    class Scripted:
        is_offline = False

        async def complete_structured(self, message, schema, *, system=None):
            answer = message.split("Assistant's answer: ", 1)[1]
            ok = by_answer[answer] == "yes"
            return schema.model_validate(_grades(4, 4, 3, 3) if ok else _grades(1, 2, 4, 3))

    judge = Scripted()
    results = [
        asyncio.run(invariant_judge(judge, goldens[i.golden], i.response, universe=universe))
        for i in tier2
    ]
    records = [
        VerdictRecord(id=i.id, label=i.label, verdict=invariant_verdict(r), reason=r.reason)
        for i, r in zip(tier2, results, strict=True)
    ]
    res = compute_agreement(
        subset,
        records,
        judge_model="scripted",
        prompt_hash=invariant_prompt_hash(),
        judge_kind="invariant_judge",
    )
    assert res.accuracy.estimate == 1.0 and res.kappa.estimate == 1.0
    assert res.judge.kind == "invariant_judge" and res.n_items == len(tier2)


def test_tier2_scoring_runs_the_invariant_judge_beside_the_criteria_judge(
    tmp_path, monkeypatch, goldens
):
    """`add_tier2_scores` as the scoring asset calls it, on the layer its `scoring` section
    builds: each tier-2 row gets criteria_score and invariant_score, and the invariant
    dimensions."""
    from eval_pipeline.assets.scoring import add_tier2_scores
    from eval_pipeline.config import ModelRole, RepeatConfig, ScoringConfig

    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)

    def both(request: RecordedRequest) -> ScriptedReply:
        text = " ".join(str(m.get("content", "")) for m in request.messages)
        if '"InvariantGrades"' in text:
            return _responder(request)
        criteria = request.last_user_text.split("Criteria:\n", 1)[1].split("\n\n")[0]
        n = len(criteria.splitlines())
        verdicts = [{"criterion": i, "met": True, "reason": "ok"} for i in range(1, n + 1)]
        return ScriptedReply(text=json.dumps({"verdicts": verdicts}))

    golden = goldens[GOLDEN]
    rows = [
        {
            "question_id": GOLDEN,
            "tier": 2,
            "answer": answer,
            "retrieved_session_ids": [],
            "metrics": {},
            "covered": None,
            "weakest_link": None,
        }
        for answer in ("Deployed 2024-03-07 09:30 UTC by raj.patel.", "dana.kim deployed it.")
    ]
    tier1 = {**rows[0], "question_id": "t1", "tier": 1}
    with WireServer(responder=both) as server:
        spec = f"openai_compatible:judge-model@{server.openai_base_url}"
        out = add_tier2_scores(
            [*rows, tier1],
            {GOLDEN: golden, "t1": {}},
            scoring=ScoringConfig(judge=ModelRole(model=spec)),
            repeat=RepeatConfig(),
        )
    good, bad, untouched = out
    assert untouched is tier1
    assert good["metrics"]["criteria_score"]["score"] == 100.0
    assert good["metrics"]["invariant_score"]["score"] == 90.0
    assert good["metrics"]["invariant_score"]["passed"] is True
    assert bad["metrics"]["invariant_score"]["score"] == 37.5
    assert bad["metrics"]["invariant_score"]["passed"] is False
    assert bad["invariant"]["unsupported_claims"] == ["dana.kim triggered it"]
    assert set(good["invariant"]["dimensions"]) == set(WEIGHTS)
    # offline: both judged tier-2 metrics unscored, never 0, and no dimensions recorded
    offline = add_tier2_scores(
        rows, {GOLDEN: golden}, scoring=ScoringConfig(), repeat=RepeatConfig()
    )
    for row in offline:
        assert row["metrics"]["invariant_score"]["score"] is None
        assert row["metrics"]["criteria_score"]["score"] is None and "invariant" not in row
