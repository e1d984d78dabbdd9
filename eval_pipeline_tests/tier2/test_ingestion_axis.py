"""The ingestion axis: matching rules, and real reads of tier 2's memory in the embedded graph
after each kind of reconciler (namespaced, session-level, none), then the whole chain."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import write_jsonl
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile.registry import load_reconciler
from eval_pipeline.reconcile.runner import reconcile_pending
from eval_pipeline.tier2 import tier2_goldens_and_fixtures
from eval_pipeline.tier2.ingestion import (
    MemoryRead,
    MemoryText,
    claim_in,
    ingestion_score,
    read_memory,
    term_in,
    tier2_ingestion,
)
from eval_pipeline.tier2.load import load_scenarios
from eval_pipeline.tier2.schema import Tier2SchemaError
from eval_pipeline_tests.tier2.support import make_corpus, scenario

_databases = itertools.count()


def test_terms_match_whole_words_case_and_spacing_insensitive():
    assert term_in("Pool_size from 10 to 25", "raises the  pool_size from 10\nto 25;")
    assert not term_in("25", "pool of 250") and not term_in("250", "1,250 rows")
    assert not term_in("v1.12", "v1.12.0")  # "v1.12" is not v1.12.0's version
    assert term_in("billing-api#93", "Fix: billing-api#93 requires")
    assert claim_in(["ruff", "line-length = 100"], "ruff ... line-length = 100")
    assert not claim_in(["ruff", "120"], "ruff with line-length = 100")


def _memory(*texts: tuple[str, bool]) -> MemoryRead:
    return MemoryRead(
        searchable=["fact"],
        namespaced=True,
        namespace="org:acme",
        texts=[MemoryText(kind="fact", text=t, current=c) for t, c in texts],
    )


SPEC = {
    "scenario_id": "time-search-lead",
    "expected_entities": ["sam.reed", "nobody.here"],
    "expected_claims": [{"claim": "sam.reed leads", "terms": ["sam.reed", "tech lead"]}],
    "forbidden_claims": [{"claim": "yuki leads", "terms": ["Tech lead: yuki.tanaka"]}],
}


def test_score_counts_found_expectations_and_avoided_forbidden_claims():
    memory = _memory(("From 2024-06-01 sam.reed is tech lead of Search.", True))
    r = ingestion_score(SPEC, memory)
    assert r.score == pytest.approx(100 * 3 / 4)  # one entity missing
    assert r.entities_missing == ["nobody.here"] and r.forbidden_held == []


def test_a_forbidden_claim_kept_only_as_history_is_avoided():
    stale = "Tech lead: yuki.tanaka."
    held = ingestion_score(SPEC, _memory(("sam.reed, tech lead", True), (stale, True)))
    assert held.forbidden_held == ["yuki leads"] and "(fact)" in held.reason
    history = ingestion_score(SPEC, _memory(("sam.reed, tech lead", True), (stale, False)))
    assert history.forbidden_held == []
    # An expected claim counts in history too: the memory holds it.
    old = ingestion_score(SPEC, _memory(("sam.reed, tech lead", False)))
    assert old.claims_missing == []


def test_a_score_not_taken_is_none_never_zero():
    empty = _memory()
    empty = empty.model_copy(update={"reason": "the memory system declares no searchable texts"})
    r = ingestion_score(SPEC, empty)
    assert r.score is None and "searchable" in r.reason
    nothing = ingestion_score({"scenario_id": "x"}, _memory(("text", True)))
    assert nothing.score is None and nothing.reason == "declares no expectations"


def test_declarations_are_validated_against_the_signal_one_line_each(tmp_path: Path):
    bad = scenario(
        expected_entities=["ruff", "black-formatter"],
        expected_claims=[{"claim": "ruff at 100", "terms": ["ruff", "line-length = 120"]}],
        forbidden_claims=[{"claim": "ruff at 100", "terms": ["line-length = 100"]}],
        pass_score=101,
    )
    with pytest.raises(Tier2SchemaError) as exc:
        load_scenarios(root=make_corpus(tmp_path, {"pref.yaml": [bad]}))
    lines = [str(i) for i in exc.value.issues]
    assert lines == [
        "scenarios/pref.yaml: scenario 'pref-test-one': field 'pass_score': "
        "Input should be less than or equal to 100"
    ]
    del bad["pass_score"]
    with pytest.raises(Tier2SchemaError) as exc:
        load_scenarios(root=make_corpus(tmp_path / "again", {"pref.yaml": [bad]}))
    fields = [(i.scenario, i.field) for i in exc.value.issues]
    assert fields == [
        ("scenario 'pref-test-one'", "expected_entities[1]"),
        ("scenario 'pref-test-one'", "expected_claims[0]"),
        ("scenario 'pref-test-one'", "forbidden_claims[0]"),
    ]
    assert all("\n" not in str(i) for i in exc.value.issues)
    good = scenario(
        expected_entities=["ruff"],
        expected_claims=[{"claim": "ruff at 100", "terms": ["ruff", "line-length = 100"]}],
        forbidden_claims=[{"claim": "prettier at 120", "terms": ["printWidth 120"]}],
        pass_score=80,
    )
    [loaded] = load_scenarios(root=make_corpus(tmp_path / "ok", {"pref.yaml": [good]}))
    assert loaded.pass_score == 80 and loaded.expected_claims[0].terms[1] == "line-length = 100"


# --------------------------------------------------------------------------------------------
# Real graph reads


@pytest.fixture(scope="module")
def tier2_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Path]:
    goldens, fixtures = tier2_goldens_and_fixtures()
    path = tmp_path_factory.mktemp("tier2") / "fixtures.jsonl"
    write_jsonl(path, fixtures)
    return goldens, path


@pytest.fixture
def tier2_store(graph_dir: Path, tier2_files) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=f"ing{next(_databases)}", heap="512m")
    inject_fixtures(store, tier2_files[1])
    yield store
    store.close()


def _reconcile(store: GraphStore, spec: str) -> None:
    report = reconcile_pending(store, load_reconciler(spec), concurrency=2)
    assert report.failures == []


def test_consolidating_memory_is_read_in_the_organisation_s_namespace(tier2_store, tier2_files):
    goldens = tier2_files[0]
    _reconcile(tier2_store, "consolidating")
    result = tier2_ingestion(tier2_store, goldens)
    assert result is not None
    assert result["searchable"] == ["chunk", "episode", "fact"]  # the schema's declaration
    assert result["namespace"] == "org:acme" and result["texts_read"] > 0
    scores = {sid: s["score"] for sid, s in result["scenarios"].items()}
    assert len(scores) == 35 and all(s is not None and 0 <= s <= 100 for s in scores.values())
    # The team page still says yuki.tanaka leads Search, verbatim in a chunk nothing marks
    # as outdated: the memory holds the stale claim as current.
    lead = result["scenarios"]["time-search-lead"]
    assert lead["forbidden_held"] == ["yuki.tanaka is the Search tech lead"]
    assert lead["score"] == pytest.approx(80.0) and "(chunk)" in lead["reason"]

    # Facts are namespaced: another namespace reads none of them, session-level chunks stay.
    sessions = {s for g in goldens for s in g["additional_metadata"]["haystack_session_ids"]}
    ours = read_memory(tier2_store, sessions)
    other = read_memory(tier2_store, sessions, namespace="org:other")
    assert any(t.kind == "fact" for t in ours.texts)
    assert not any(t.kind == "fact" for t in other.texts)
    assert sum(t.kind == "chunk" for t in ours.texts) == sum(t.kind == "chunk" for t in other.texts)


def test_session_level_memory_is_read_without_a_namespace(tier2_store, tier2_files):
    _reconcile(tier2_store, "extractive")
    result = tier2_ingestion(tier2_store, tier2_files[0])
    assert result["namespace"] is None and result["texts_read"] > 0
    assert all(s["score"] is not None for s in result["scenarios"].values())


def test_reconciler_none_leaves_the_axis_unscored(tier2_store, tier2_files):
    _reconcile(tier2_store, "none")
    result = tier2_ingestion(tier2_store, tier2_files[0])
    assert result["searchable"] == [] and result["texts_read"] == 0
    assert "declares no searchable texts" in result["reason"]
    assert all(s["score"] is None for s in result["scenarios"].values())


@pytest.mark.slow
def test_light_tier2_chain_reports_ingestion_and_pass_criteria(light_tier2_run):
    # The session's light chain with the consolidating reconciler (tier 1 beside tier 2).
    _, res = light_tier2_run
    run_dir = res.run_dir
    t2 = json.loads((run_dir / "summary.json").read_text())["tiers"]["2"]
    ingestion = t2["ingestion"]
    assert ingestion["namespace"] == "org:acme" and len(ingestion["scenarios"]) == 5
    assert all(s["score"] is not None for s in ingestion["scenarios"].values())
    report = t2["pass_criteria"]
    assert sorted(report["by_use_case"]) == ["BUG", "COMBO", "INFRA", "PREF", "TIME"]
    for sid, verdict in report["scenarios"].items():
        assert verdict["axes"]["ingestion"] == ingestion["scenarios"][sid]["score"]
        assert verdict["axes"]["agent_use"] is None  # no judge: unscored, and so the verdict
        assert verdict["passed"] is None
    assert all(b["pass_rate"] is None for b in report["by_use_case"].values())
    html = (run_dir / "report.html").read_text()
    assert "Tier-2 pass criteria" in html and "per difficulty" in html
