"""`graph_agent` against the real embedded ArcadeDB, with a scripted model on the local
OpenAI wire-format server: guard rejection, empty result and server error fed back, real
values in the schema, scope, payload cap, and a graph left exactly as it was."""

from __future__ import annotations

import json
import re

import pytest

from eval_pipeline.graph.state import graph_state
from eval_pipeline.retrieve.graph_agent import GraphAgentRetriever, row_item, row_sessions
from eval_pipeline.retrieve.guarded_read import REJECTED_PREFIX
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline_tests.retrieve.fixture_graph import QUESTIONS, SESSIONS
from eval_pipeline_tests.retrieve.support import TEST_KEY, wire_layer
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

WRITE_ATTEMPT = "MATCH (t:Turn) DETACH DELETE t"
WRONG_VALUE = "MATCH (t:Turn {role: 'User'}) RETURN t.turn_id AS turn_id LIMIT 5"
SYNTAX_ERROR = "MATCH (t:Turn RETURN t"
GOOD = (
    "MATCH (:Question {question_id: $question_id})-[:HAYSTACK]->(:Session)-[:HAS_TURN]->"
    "(t:Turn) WHERE toLower(t.text) CONTAINS 'violin' "
    "RETURN t.turn_id AS turn_id, t.session_id AS session_id, t.text AS text LIMIT 5"
)
EVERY_TURN = (
    "MATCH (t:Turn) RETURN t.turn_id AS turn_id, t.text AS text ORDER BY t.turn_id LIMIT 50"
)


def step(action: str, cypher: str | None = None, use_steps: list[int] | None = None):
    body = {"thought": "", "action": action, "cypher": cypher, "use_steps": use_steps or []}
    return ScriptedReply(text=json.dumps(body))


@pytest.fixture
def wire(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with WireServer() as server:
        yield server


@pytest.fixture
def agent_env(wire, fixture_store, tmp_path):
    layer = wire_layer(wire, tmp_path, "retrieval_agent")
    yield RetrievalEnv(store=fixture_store, backend="arcadedb", llm=layer, max_rows=100)
    layer.close()


def _request(qid: str, scope: str = "question", top_k: int = 10) -> RetrievalRequest:
    question, date, _ = QUESTIONS[qid]
    return RetrievalRequest(
        question_id=qid, question=question, question_date=date, scope=scope, top_k=top_k
    )


def test_failures_are_fed_back_and_the_write_never_reaches_the_graph(
    wire, agent_env, fixture_store
):
    before = graph_state(fixture_store).fingerprint
    wire.enqueue(
        step("query", WRITE_ATTEMPT),
        step("query", WRONG_VALUE),
        step("query", SYNTAX_ERROR),
        step("query", GOOD),
        step("finish", use_steps=[4]),
    )
    agent = GraphAgentRetriever(agent_env, max_steps=6)
    trace = RetrievalTrace()
    output = agent.retrieve(_request("q_music"), trace)

    assert graph_state(fixture_store).fingerprint == before
    assert [i.turn_ids for i in output.items] == [["s_violin#0"]]
    assert output.items[0].kind == "turn" and output.items[0].session_ids == ["s_violin"]
    assert "Anna Kowalski" in output.context[0] and "s_violin#0" in output.context[0]

    rejected, empty, failed, good, haystack = trace.queries
    assert "HAYSTACK" in haystack.query and haystack.rows == 2  # the scope filter's own read
    assert rejected.query == WRITE_ATTEMPT and rejected.error.startswith(REJECTED_PREFIX)
    assert rejected.rows is None
    assert empty.rows == 0 and empty.error is None
    assert failed.error and failed.rows is None
    assert good.rows == 1 and good.params["question_id"] == "q_music"

    # What the model was told after each step (last user message of the next request).
    feedback = [r.messages[-1]["content"] for r in wire.requests[1:]]
    assert "REJECTED by the read-only guard" in feedback[0]
    assert "0 rows" in feedback[1] and "real values" in feedback[1]
    assert "server returned an error" in feedback[2]
    assert "1 rows" in feedback[3] and "Anna Kowalski" in feedback[3]


def test_schema_in_the_prompt_has_real_values(wire, agent_env):
    wire.enqueue(step("finish"))
    agent = GraphAgentRetriever(agent_env)
    trace = RetrievalTrace()
    output = agent.retrieve(_request("q_dog"), trace)
    assert output.items == [] and trace.queries == []
    system = "\n".join(m["content"] for m in wire.requests[0].messages if m["role"] == "system")
    assert '.role: exactly one of "user" (6), "assistant" (5)' in system
    assert "FREE TEXT" in system and "db.index.fulltext.queryNodes('Turn[text]'" in system
    real_turn_ids = {f"{s.session_id}#{t.index}" for s in SESSIONS for t in s.turns}
    shown = set(re.findall(r'"(s_[a-z]+#\d+)"', system))
    assert shown and shown <= real_turn_ids  # real identifiers, not invented ones
    assert "$question_id" in system and "HAYSTACK" in system


def test_question_scope_drops_rows_from_other_haystacks(wire, agent_env):
    wire.enqueue(step("query", EVERY_TURN), step("finish"))
    agent = GraphAgentRetriever(agent_env)
    trace = RetrievalTrace()
    output = agent.retrieve(_request("q_music"), trace)
    sessions = {s for item in output.items for s in item.session_ids}
    assert sessions == {"s_violin", "s_shared"}
    assert any("outside the question's haystack" in n for n in trace.notes)

    wire.enqueue(step("query", EVERY_TURN), step("finish"))
    batch = agent.retrieve(_request("q_music", scope="batch", top_k=20), RetrievalTrace())
    assert len(batch.items) == 11
    # k is its item budget too (protocol_within_top_k): the rows past it are cut, and said.
    wire.enqueue(step("query", EVERY_TURN), step("finish"))
    trace = RetrievalTrace()
    cut = agent.retrieve(_request("q_music", scope="batch", top_k=10), trace)
    assert len(cut.items) == len(cut.context) == 10
    assert "graph_agent: 11 rows cut to top_k 10" in trace.notes


def test_payload_cap_truncates_and_is_recorded(wire, agent_env):
    wire.enqueue(step("query", EVERY_TURN), step("finish"))
    agent = GraphAgentRetriever(agent_env, payload_cap_tokens=60)
    trace = RetrievalTrace()
    output = agent.retrieve(_request("q_bike", scope="batch"), trace)
    assert 0 < len(output.items) < 11
    assert agent_env.tokenizer is None  # counted with the default pinned tokenizer
    assert trace.queries[0].truncated is True
    assert any("payload cap 60 tokens" in n for n in trace.notes)
    assert "showing the first" in wire.requests[1].messages[-1]["content"]


def test_step_budget_is_bounded(wire, agent_env):
    wire.enqueue(*[step("query", WRONG_VALUE) for _ in range(3)])
    agent = GraphAgentRetriever(agent_env, max_steps=3)
    trace = RetrievalTrace()
    output = agent.retrieve(_request("q_bike"), trace)
    assert output.items == [] and len(trace.queries) == 3 and wire.request_count == 3
    assert any("step budget of 3" in n for n in trace.notes)


def test_pins_name_the_model_and_budget(agent_env):
    pins = GraphAgentRetriever(agent_env, max_steps=4).pins()
    assert pins["retriever"] == "graph_agent" and pins["max_steps"] == 4
    assert pins["model"].startswith("openai:gpt-4o-mini@")


def test_rows_become_items_with_ids_found_by_value():
    node_row = {"t": {"turn_id": "s_a#3", "session_id": "s_a", "text": "hello"}}
    item = row_item(node_row)
    assert item.turn_ids == ["s_a#3"] and item.session_ids == ["s_a"] and item.text == "hello"
    aliased = row_item({"id": "s_b#0", "n": 2})
    assert aliased.turn_ids == ["s_b#0"] and aliased.kind == "row"
    assert aliased.text == '{"id": "s_b#0", "n": 2}'
    assert row_sessions({"count": 3}) == []
