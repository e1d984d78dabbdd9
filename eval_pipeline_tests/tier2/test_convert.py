"""Scenarios → goldens and fixtures in exactly the tier-1 shapes, so every stage runs unchanged."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl, write_jsonl
from eval_pipeline.corpus.longmemeval import QUESTION_TYPES, parse_upstream_date
from eval_pipeline.corpus.models import Golden, SessionFixture
from eval_pipeline.graph.inject import read_fixtures, session_rows
from eval_pipeline.retrieve.runner import question_from_golden
from eval_pipeline.settings import REPO_DIR
from eval_pipeline.tier2.convert import (
    build_tier2,
    collisions,
    load_tier2,
    tier2_goldens_and_fixtures,
    upstream_date,
)
from eval_pipeline.tier2.load import load_scenarios, load_universe

SAMPLE = REPO_DIR / "corpus" / "sample"


@pytest.fixture(scope="module")
def corpus():
    return load_tier2()


def test_goldens_validate_and_carry_the_tier1_keys(corpus):
    tier1 = next(read_jsonl(SAMPLE / "goldens.jsonl"))
    for g in corpus.goldens:
        Golden.model_validate(g)
        assert list(g) == list(tier1)
        meta = g["additional_metadata"]
        assert set(tier1["additional_metadata"]) <= set(meta)
        assert meta["tier"] == 2
        assert meta["question_type"].startswith("tier2-")
        assert meta["question_type"] not in QUESTION_TYPES  # tier-1 type panels never mix
        for key in (
            "use_case",
            "difficulty",
            "source_mix",
            "dimensions",
            "must_cite",
            "must_not_cite",
            "criteria",
            "light",
            "scenario_id",
        ):
            assert key in meta, key
        assert sum(c["weight"] for c in meta["criteria"]) == 100
        assert (
            len(g["context"]) == len(meta["evidence_turn_ids"]) == len(meta["evidence_turn_roles"])
        )
        assert set(meta["must_cite"]) <= set(meta["evidence_session_ids"])
        assert set(meta["evidence_session_ids"]) <= set(meta["haystack_session_ids"])
        assert meta["upstream_haystack_size"] == len(meta["haystack_session_ids"])
        parse_upstream_date(meta["question_date"])
        assert g["name"].endswith("_abs") == meta["abstention"]


def test_fixtures_validate_in_the_tier1_layout(corpus, tmp_path):
    tier1 = next(read_jsonl(SAMPLE / "fixtures.jsonl"))
    for fx in corpus.fixtures:
        SessionFixture.model_validate(fx)
        assert list(fx) == list(tier1)
        assert list(fx["turns"][0]) == list(tier1["turns"][0])
        assert parse_upstream_date(fx["date"]).isoformat() == fx["started_at"]
    # the injection stage's own reader accepts the file
    path = tmp_path / "fixtures.jsonl"
    write_jsonl(path, corpus.fixtures)
    assert len(read_fixtures(path)) == len(corpus.fixtures)
    rows = session_rows(path)
    assert all("holds_evidence" not in r for r in rows)


def test_upstream_date_format():
    assert upstream_date(datetime(2024, 3, 5, 10, 12)) == "2024/03/05 (Tue) 10:12"
    assert upstream_date(datetime(2024, 6, 2, 0, 0)) == "2024/06/02 (Sun) 00:00"


def test_every_haystack_is_in_the_fixtures_once(corpus):
    by_id = {fx["session_id"]: fx for fx in corpus.fixtures}
    assert len(by_id) == len(corpus.fixtures)
    for g in corpus.goldens:
        meta = g["additional_metadata"]
        for sid in meta["haystack_session_ids"]:
            assert g["name"] in by_id[sid]["question_ids"]
        for sid in meta["evidence_session_ids"]:
            assert g["name"] in by_id[sid]["holds_evidence"]
        for tid, text in zip(meta["evidence_turn_ids"], g["context"], strict=True):
            sid, index = tid.rsplit("#", 1)
            assert by_id[sid]["turns"][int(index)]["content"] == text
    listed = sum(len(fx["question_ids"]) for fx in corpus.fixtures)
    assert listed == sum(
        len(g["additional_metadata"]["haystack_session_ids"]) for g in corpus.goldens
    )


def test_shared_events_are_deduplicated(corpus):
    shared = [fx for fx in corpus.fixtures if len(fx["question_ids"]) > 1]
    assert shared, "scenarios share events, as tier-1 questions share distractors"
    pm = next(fx for fx in corpus.fixtures if fx["session_id"] == "acme-doc-pm-inc044")
    assert "t2-bug-inc044-root-cause-q1" in pm["holds_evidence"]
    assert "t2-combo-inc044-fix-release-q1" in pm["holds_evidence"]
    # a lure in one scenario, evidence in another
    assert "t2-bug-duplicate-pdf-attachments-q1" in pm["question_ids"]
    assert "t2-bug-duplicate-pdf-attachments-q1" not in pm["holds_evidence"]


def test_question_ids_unique_and_namespaced(corpus):
    names = [g["name"] for g in corpus.goldens]
    assert len(names) == len(set(names))
    assert all(n.startswith("t2-") for n in names)


def test_roles_are_source_kinds(corpus):
    roles = {t["role"] for fx in corpus.fixtures for t in fx["turns"]}
    assert roles <= {"pull_request", "issue", "chat_thread", "deploy", "alert", "doc"}
    assert "user" not in roles  # documented: tier-1's user-only retrieval variant excludes tier 2


def test_arrival_order_is_kept_for_out_of_order_scenarios(corpus):
    g = next(g for g in corpus.goldens if g["name"] == "t2-infra-catalog-broker-q1")
    assert g["additional_metadata"]["haystack_session_ids"][-1] == "acme-doc-arch-overview-2024-01"


def test_per_question_evidence(corpus):
    q1, q2 = (g for g in corpus.goldens if g["name"].startswith("t2-combo-ratelimit-story-"))
    m1, m2 = q1["additional_metadata"], q2["additional_metadata"]
    assert "acme-chat-ratelimit-incident" not in m1["evidence_session_ids"]
    assert "acme-chat-ratelimit-incident" not in m1["must_cite"]
    assert m2["evidence_session_ids"] == [
        "acme-chat-ratelimit-incident",
        "acme-pr-auth-gateway-214",
    ]
    assert sorted(m2["must_cite"]) == ["acme-chat-ratelimit-incident", "acme-pr-auth-gateway-214"]
    assert m1["haystack_session_ids"] == m2["haystack_session_ids"]


def test_light_run_keeps_only_light_scenarios():
    goldens, fixtures = tier2_goldens_and_fixtures(light_only=True)
    meta = [g["additional_metadata"] for g in goldens]
    assert all(m["light"] for m in meta)
    assert sorted({m["use_case"] for m in meta}) == ["BUG", "COMBO", "INFRA", "PREF", "TIME"]
    haystacks = {sid for m in meta for sid in m["haystack_session_ids"]}
    assert {fx["session_id"] for fx in fixtures} == haystacks
    names = {g["name"] for g in goldens}
    assert all(set(fx["question_ids"]) <= names for fx in fixtures)


def test_build_is_deterministic(corpus):
    again = load_tier2()
    assert json.dumps(again.goldens) == json.dumps(corpus.goldens)
    assert json.dumps(again.fixtures) == json.dumps(corpus.fixtures)
    assert again.stats == corpus.stats
    assert corpus.stats["corpus_digest"] and len(corpus.stats["corpus_digest"]) == 64


def test_build_from_a_subset():
    universe = load_universe()
    scenarios = [s for s in load_scenarios(universe=universe) if s.use_case == "TIME"]
    built = build_tier2(scenarios, universe)
    assert {g["additional_metadata"]["use_case"] for g in built.goldens} == {"TIME"}
    assert built.stats["scenarios"] == len(scenarios)


def test_no_collision_with_the_tier1_sample(corpus):
    sessions = {fx["session_id"] for fx in read_jsonl(SAMPLE / "fixtures.jsonl")}
    questions = {g["name"] for g in read_jsonl(SAMPLE / "goldens.jsonl")}
    assert collisions(sessions, questions, corpus) == []
    clash = {corpus.fixtures[0]["session_id"]}
    assert collisions(clash, set(), corpus) == [f"session {corpus.fixtures[0]['session_id']}"]


def test_retrieval_reads_tier2_goldens_with_their_tier(corpus):
    q = question_from_golden(corpus.goldens[0])
    assert q.tier == 2 and q.question_id == corpus.goldens[0]["name"]
