"""The `retrieval_results` asset and its blocking check, on the real embedded server."""

from __future__ import annotations

import dagster as dg
import pytest
from pydantic import ValidationError

from eval_pipeline.assets.retrieval import RESULTS_FILE, percentile
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.retrieve.results import QuestionRetrieval
from eval_pipeline_tests.artifacts import (
    ONE_BATCH,
    artifact_dir,
    graph_section,
    materialize,
    seed_corpus_and_graph,
)
from eval_pipeline_tests.retrieve.fixture_graph import QUESTIONS, golden_rows

FINGERPRINT_BEFORE = "graph_fingerprint_before"
FINGERPRINT_AFTER = "graph_fingerprint_after"


def _materialize(tmp_path, store, goldens, **retrieval):
    """retrieval_results alone (with its checks), over the fixture graph, its inputs seeded,
    configured by the `retrieval` section."""
    seed_corpus_and_graph(tmp_path, goldens, store)
    return materialize(
        ["retrieval_results"],
        dg.DagsterInstance.ephemeral(),
        partition=ONE_BATCH,
        raise_on_error=False,
        paths={"state_dir": str(tmp_path)},
        graph=graph_section(store),
        retrieval=retrieval,
    )


def _results(result) -> list[dict]:
    return list(read_jsonl(artifact_dir(result, "retrieval_results") / RESULTS_FILE))


def test_asset_writes_one_result_per_question_and_the_check_passes(tmp_path, fixture_store):
    goldens = golden_rows()
    goldens.append({**goldens[0], "name": "q_missing"})  # not in the graph: a recorded miss
    result = _materialize(tmp_path, fixture_store, goldens)
    assert result.success

    rows = [QuestionRetrieval.model_validate(r) for r in _results(result)]
    assert [r.question_id for r in rows] == [*QUESTIONS, "q_missing"]
    by_id = {r.question_id: r for r in rows}
    for qid, (_, _, best) in QUESTIONS.items():
        r = by_id[qid]
        assert r.retriever == "fulltext" and r.scope == "question"
        assert r.reader == "offline:extractive"
        assert r.retrieved_turn_ids[0] == best and r.errors == []
        # The reader's answer: a sentence of the best-ranked passage, without its label.
        assert r.answer in r.retrieval_context[0] and r.payload_tokens > 0
        assert not r.answer.startswith("[")
    missing = by_id["q_missing"]
    assert missing.items == [] and missing.answer is None
    assert "no haystack sessions" in missing.errors[0]
    assert (artifact_dir(result, "retrieval_results") / "stage.json").is_file()

    (mat,) = result.get_asset_materialization_events()
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    assert meta["questions"] == 4 and meta["retrieval_failed"] == 1
    assert meta["scope"] == "question" and meta["retriever"] == "fulltext"
    assert meta["latency_p50_ms"] > 0 and meta["latency_p95_ms"] >= meta["latency_p50_ms"]
    assert meta["payload_tokens_median"] > 0
    assert meta["pins"]["retriever"]["sources"] == ["turn"]
    assert meta["pins"]["tokenizer"]["tokenizer"] == "o200k_base"
    assert meta[FINGERPRINT_BEFORE] == meta[FINGERPRINT_AFTER]
    assert {c.check_name: c.passed for c in result.get_asset_check_evaluations()} == {
        "retrieval_left_graph_unchanged": True,
        "retrieval_left_memory_unchanged": True,  # graph memory: nothing more to check
        "retrieval_graph_is_current": True,
        "retrieval_infrastructure_ok": True,
        "protocol_reader_date": True,  # the extractive reader sends no prompt: n/a
        # The fixture haystacks hold fewer sessions than k=10: said, as a warning.
        "protocol_top_k_below_haystack": False,
        "protocol_within_top_k": True,
    }


def test_batch_scope_and_bad_settings(tmp_path, fixture_store):
    ok = _materialize(tmp_path, fixture_store, golden_rows(), scope="batch", top_k=3)
    assert ok.success
    rows = _results(ok)
    assert {r["scope"] for r in rows} == {"batch"} and all(len(r["items"]) <= 3 for r in rows)

    # A scope that does not exist is refused as the run is configured, before anything runs.
    with pytest.raises(ValidationError, match="scope"):
        _materialize(tmp_path / "b", fixture_store, golden_rows(), scope="everything")
    offline_agent = _materialize(
        tmp_path / "c", fixture_store, golden_rows(), retriever="graph_agent"
    )
    assert not offline_agent.success
    assert not list((tmp_path / "c" / "artifacts").glob("*/retrieval_results/**/stage.json"))


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 95) == 95.0
    assert percentile([5.0], 95) == 5.0


def test_graph_agent_and_llm_reader_through_the_asset(tmp_path, fixture_store, monkeypatch):
    """The asset wired to models on the local OpenAI wire-format server: the agent queries
    once then finishes, the reader answers; usage lands in the metadata, the graph is intact."""
    import json

    from eval_pipeline_tests.retrieve.support import TEST_KEY
    from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

    query = (
        "MATCH (:Question {question_id: $question_id})-[:HAYSTACK]->(:Session)"
        "-[:HAS_TURN]->(t:Turn) RETURN t.turn_id AS turn_id, t.text AS text "
        "ORDER BY t.turn_id LIMIT 3"
    )

    def responder(request):
        if "AgentStep" not in json.dumps(request.body):
            return ScriptedReply(text="From memory: see the excerpts.")
        first = request.last_user_text.startswith("Question (asked on")
        step = {"action": "query", "cypher": query} if first else {"action": "finish"}
        return ScriptedReply(text=json.dumps(step))

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    # The LLM cache lives in the state dir: this test's own, so no reply comes from another.
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path))
    with WireServer(responder) as wire:
        spec = f"openai:gpt-4o-mini@{wire.openai_base_url}"
        result = _materialize(
            tmp_path,
            fixture_store,
            golden_rows(),
            retriever="graph_agent",
            agent={"model": spec},
            reader={"model": spec},
        )
    assert result.success
    rows = [QuestionRetrieval.model_validate(r) for r in _results(result)]
    assert [r.retriever for r in rows] == ["graph_agent"] * 3
    for r in rows:
        assert r.answer == "From memory: see the excerpts." and r.reader == spec
        assert len(r.items) == 3 and r.queries[0].rows == 3
    (mat,) = result.get_asset_materialization_events()
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    assert meta["pins"]["retriever"]["model"] == spec
    assert "retrieval_agent" in json.dumps(meta["llm_usage"])
    assert meta[FINGERPRINT_BEFORE] == meta[FINGERPRINT_AFTER]
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    # The LLM reader's prompts held the date; the small fixture haystacks only warn.
    assert checks["protocol_reader_date"].passed
    assert (
        "the question date is in all 3 reader prompt(s)"
        in checks["protocol_reader_date"].description
    )
    warned = checks.pop("protocol_top_k_below_haystack")
    assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
    assert all(c.passed for c in checks.values())
