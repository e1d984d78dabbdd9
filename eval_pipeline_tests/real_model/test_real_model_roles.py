"""Every LLM role once with a real small model behind a real llama.cpp server, on the real
embedded graph: the reader, the judge, the graph agent (its Cypher through the guard), the llm
reconciler on two sessions, one deepeval metric, and the fallback off a schema mode the real
server refuses.

These assert structure and robustness, not quality (a small model's verdicts are noise): each
call returns, or its question/session is unscored with a reason; nothing raises; and a second
run on the same cache is answered from it with zero requests to the server.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from eval_pipeline.graph.state import graph_state
from eval_pipeline.llm import LLMLayer, LLMSettings, StructuredOutputInvalid
from eval_pipeline.reconcile import load_reconciler
from eval_pipeline.reconcile.runner import reconcile_pending
from eval_pipeline.retrieve.graph_agent import GraphAgentRetriever
from eval_pipeline.retrieve.guarded_read import REJECTED_PREFIX
from eval_pipeline.retrieve.protocol import RetrievalEnv, load_retriever
from eval_pipeline.retrieve.reader import ExtractiveReader, make_reader
from eval_pipeline.retrieve.runner import RetrievalRunner, question_from_golden
from eval_pipeline.score.judges import _deepeval, _deepeval_metrics, _measure, longmemeval_judge
from eval_pipeline_tests.retrieve.fixture_graph import SESSIONS, golden_rows

from .conftest import server_activity

ANSWERS = {"q_bike": "Trek (a red Trek Domane)", "q_dog": "Biscuit", "q_music": "Anna Kowalski"}


def goldens(*qids: str) -> list[dict]:
    rows = {r["name"]: r for r in golden_rows()}
    return [{**rows[q], "expected_output": ANSWERS[q]} for q in qids]


def requests_made(layer: LLMLayer, role: str) -> int:
    return layer.snapshot().roles[role].provider_requests


def assert_replayed(layer: LLMLayer, role: str, calls: int) -> None:
    usage = layer.snapshot().roles[role]
    assert usage.provider_requests == 0, usage
    assert usage.cache_hits == usage.calls == calls


def run_reader(layer: LLMLayer, store) -> list:
    env = RetrievalEnv(store=store, backend="arcadedb", llm=None)
    runner = RetrievalRunner(
        load_retriever("fulltext", env, {}),
        make_reader("llm", layer),
        scope="question",
        top_k=3,
    )
    return [runner.run_one(question_from_golden(g)) for g in goldens("q_bike", "q_dog")]


def test_the_reader_answers_from_the_graph_and_a_rerun_replays(
    make_local_layer, fixture_graph, llama_server, tmp_path
):
    cache = tmp_path / "reader.sqlite3"
    layer = make_local_layer("reader", cache_path=cache)
    first = run_reader(layer, fixture_graph)
    for result in first:
        assert result.retrieval_context, result  # the full-text retriever found turns
        if result.answer is None:  # unscored, never silently: the failure says why
            assert result.infra_failures and result.infra_failures[0].message
        else:
            assert result.answer.strip() and result.reader.startswith("local:")
    usage = layer.snapshot().roles["reader"]
    assert usage.calls == 2 and usage.provider_requests >= 1
    assert usage.input_tokens > 0 and usage.output_tokens > 0  # the server's own usage
    assert usage.cost_usd == 0.0  # a local model is not billed per token: a true zero

    before = server_activity(llama_server)
    again = make_local_layer("reader", cache_path=cache)
    second = run_reader(again, fixture_graph)
    assert [r.answer for r in second] == [r.answer for r in first]
    assert_replayed(again, "reader", 2)
    assert server_activity(llama_server) == before  # the server saw no request either


def judge_all(layer: LLMLayer) -> list:
    judge = layer.role("judge")
    golden = goldens("q_bike")[0]

    async def run():
        async with layer:
            return [
                await longmemeval_judge(judge, golden, answer)
                for answer in ("You bought a red Trek Domane.", "I don't know.")
            ]

    return asyncio.run(run())


def test_the_judge_gives_a_verdict_or_says_why_not(make_local_layer, llama_server, tmp_path):
    cache = tmp_path / "judge.sqlite3"
    layer = make_local_layer("judge", cache_path=cache)
    results = judge_all(layer)
    for result in results:
        if result.score is None:
            assert result.reason == "judge failed" and result.error
        else:
            assert result.score in (0.0, 1.0) and result.reason
    usage = layer.snapshot().roles["judge"]
    assert usage.calls == 2
    assert usage.failures == sum(r.score is None for r in results)
    # The schema the server compiled had no length limits: no grammar refusal, no fallback.
    assert usage.fallbacks == 0

    before = server_activity(llama_server)
    again = make_local_layer("judge", cache_path=cache)
    replayed = judge_all(again)
    judged = [r for r in results if r.score is not None]
    assert [r.score for r in replayed[: len(judged)]] == [r.score for r in judged] or judged == []
    # Failed calls are not cached: only the judged ones replay without a request.
    assert again.snapshot().roles["judge"].cache_hits == len(judged)
    if len(judged) == len(results):
        assert_replayed(again, "judge", 2)
        assert server_activity(llama_server) == before


def run_agent(layer: LLMLayer, store):
    env = RetrievalEnv(store=store, backend="arcadedb", llm=layer, max_rows=50)
    agent = GraphAgentRetriever(env, max_steps=3)
    runner = RetrievalRunner(agent, ExtractiveReader(), scope="question", top_k=5)
    return runner.run_one(question_from_golden(goldens("q_music")[0]))


def test_the_graph_agent_queries_through_the_guard_and_never_writes(
    make_local_layer, fixture_graph, tmp_path
):
    cache = tmp_path / "agent.sqlite3"
    before = graph_state(fixture_graph).fingerprint
    layer = make_local_layer("retrieval_agent", cache_path=cache)
    result = run_agent(layer, fixture_graph)
    assert graph_state(fixture_graph).fingerprint == before
    usage = layer.snapshot().roles["retrieval_agent"]
    assert 1 <= usage.calls <= 3  # the step budget bounds the model's turns
    if result.infra_failures:  # a call that failed: the question is unscored, with a reason
        assert all(f.message for f in result.infra_failures)
    for query in result.queries:  # every Cypher the model wrote was run by the guard
        assert query.rows is not None or query.error
        if query.error and query.error.startswith(REJECTED_PREFIX):
            assert query.rows is None
    assert result.queries or result.notes or result.errors or result.infra_failures

    again = make_local_layer("retrieval_agent", cache_path=cache)
    replay = run_agent(again, fixture_graph)
    if not result.infra_failures:
        assert [q.query for q in replay.queries] == [q.query for q in result.queries]
        assert_replayed(again, "retrieval_agent", usage.calls)


@pytest.fixture
def two_sessions(real_graph_dir, tmp_path):
    from eval_pipeline.corpus.jsonl import write_jsonl
    from eval_pipeline.graph.inject import inject_fixtures
    from eval_pipeline.graph.store import GraphStore

    fixtures = tmp_path / "two.jsonl"
    write_jsonl(fixtures, (s.model_dump() for s in SESSIONS[:2]))
    store = GraphStore(data_dir=str(real_graph_dir), database="reconcile2", heap="512m")
    inject_fixtures(store, fixtures)
    yield store
    store.close()


def test_the_llm_reconciler_finishes_two_sessions_done_or_failed_with_a_reason(
    make_local_layer, two_sessions, tmp_path
):
    cache = tmp_path / "reconcile.sqlite3"
    layer = make_local_layer("reconciler", cache_path=cache)
    report = reconcile_pending(two_sessions, load_reconciler("llm", llm=layer), concurrency=1)
    assert report.to_do == 2 and report.done + report.failed == 2
    assert all(f.reason for f in report.failures)
    assert report.status_after.get("pending", 0) == 0
    if report.done:
        assert report.graph_nodes.get("Fact", 0) + report.graph_nodes.get("Episode", 0) > 0

    again = make_local_layer("reconciler", cache_path=cache)
    redo = reconcile_pending(
        two_sessions, load_reconciler("llm", llm=again), concurrency=1, redo=True
    )
    if report.failed == 0:
        assert redo.done == 2
        usage = again.snapshot().roles["reconciler"]
        assert usage.provider_requests == 0 and usage.cache_hits == usage.calls > 0


def recall_metric(layer: LLMLayer):
    LLMTestCase = _deepeval()[1].LLMTestCase
    recall, _ = _deepeval_metrics(layer.role("judge"))
    case = LLMTestCase(
        input="What is the name of my golden retriever?",
        actual_output="Biscuit",
        expected_output="Biscuit",
        retrieval_context=["My golden retriever Biscuit loves long walks in the park."],
    )

    async def run():
        async with layer:
            return await _measure(recall, case, gating=True)

    return asyncio.run(run())


def test_a_deepeval_metric_through_the_layer_is_a_score_or_unscored(
    make_local_layer, tmp_path, llama_server
):
    cache = tmp_path / "deepeval.sqlite3"
    layer = make_local_layer("judge", cache_path=cache)
    result = recall_metric(layer)
    if result.score is None:
        assert result.reason == "judge failed" and result.error
    else:
        assert 0.0 <= result.score <= 1.0
    usage = layer.snapshot().roles["judge"]
    assert usage.calls >= 1 and usage.provider_requests >= usage.calls

    if result.score is not None:
        before = server_activity(llama_server)
        again = make_local_layer("judge", cache_path=cache)
        assert recall_metric(again).score == result.score
        assert_replayed(again, "judge", usage.calls)
        assert server_activity(llama_server) == before


class Capital(BaseModel):
    city: str = Field(max_length=60)
    certain: Literal["yes", "no"]


def test_a_mode_the_real_server_refuses_falls_back_to_json_mode(
    llama_server, monkeypatch, tmp_path
):
    """llama-cpp-python's server refuses OpenAI's `json_schema` response format (the `local`
    provider sends its own form): aimed at it as a plain OpenAI-compatible server, the layer
    must fall back to JSON mode, not fail."""
    monkeypatch.setenv("EVAL_TEST_LLAMA_KEY", llama_server.key)
    settings = LLMSettings.from_specs(
        {"judge": f"openai_compatible:local@{llama_server.base_url}"},
        role_overrides={
            "judge": {"api_key_env": "EVAL_TEST_LLAMA_KEY", "max_tokens": 64, "timeout_s": 300}
        },
        cache_path=tmp_path / "fallback.sqlite3",
    )
    layer = LLMLayer(settings)

    async def run():
        async with layer:
            return await layer.role("judge").complete(
                "What is the capital of France? Answer with the city.", schema=Capital
            )

    try:
        try:
            completion = asyncio.run(run())
            assert completion.parsed.city.strip()
        except StructuredOutputInvalid as exc:  # a tiny model may still write nonsense
            assert exc.kind == "invalid_output"
        usage = layer.snapshot().roles["judge"]
        assert usage.fallbacks == 1 and usage.failures_by_kind.get("client_error", 0) == 0
        assert usage.cost_usd is None  # unpriced remote-style spec: unknown, never 0.0
    finally:
        layer.close()


def test_the_pins_name_the_weights_by_sha256_the_server_and_the_sampling(
    make_local_layer, local_model
):
    pins = make_local_layer("judge").pins()["judge"]
    assert pins["provider"] == "local" and pins["weights"]["sha256"] == local_model.sha256
    assert pins["server"].startswith("llama-cpp-python 0.3.36")
    assert pins["sampling"]["seed"] == 0 and pins["temperature"] == 0.0
    assert pins["max_tokens"] == 512 and pins["structured_output"] == "json_schema"


def test_the_manifest_pins_a_local_judge_by_its_weights(local_spec, local_model):
    from eval_pipeline.build import role_pins
    from eval_pipeline.config import ModelRole, ScoringConfig

    # The judge role's pins as the manifest records them (`manifest.build_manifest`).
    scoring = ScoringConfig(judge=ModelRole(model=local_spec, max_tokens=300))
    pins = role_pins("judge", scoring.judge)
    assert pins["weights"]["sha256"] == local_model.sha256 and pins["max_tokens"] == 300
    assert role_pins("judge", ScoringConfig().judge) is None


def test_a_run_stops_the_server_it_started_and_leaves_a_running_one(
    llama_server, local_model, monkeypatch, tmp_path
):
    from eval_pipeline.llm import local_server

    with local_server.owned_servers():
        reused = local_server.ensure_running(local_model)  # the session's: reused
        assert reused.pid == llama_server.pid
    assert local_server.pid_alive(llama_server.pid)

    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "other_state"))
    with local_server.owned_servers():
        started = local_server.ensure_running(local_model)  # none in this state dir: started
        assert started.pid != llama_server.pid and local_server.healthy(started)
        assert [r.pid for r in local_server.records()] == [started.pid]
    assert not local_server.pid_alive(started.pid) and local_server.records() == []


def test_llm_status_shows_the_running_server(llama_server, local_model, capsys):
    import json

    from eval_pipeline import cli

    assert cli.main(["llm", "status", "--json"]) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["pid"] == llama_server.pid and line["sha256"] == local_model.sha256
    assert line["port"] == llama_server.port and line["in_flight"] == 0
    assert line["idle_s"] >= 0 and "key" not in line and llama_server.key not in json.dumps(line)
