"""The bundled canary set and how the corpus stages plant it (real files, no graph)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_pipeline.corpus.batches import batch_fixture_rows, batch_keys
from eval_pipeline.corpus.canaries import (
    CANARY_SET_FILE,
    canary_goldens,
    load_canaries,
    pick_distractors,
    plant_fixtures,
    refuse_reserved_ids,
)
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.settings import BUNDLED_CORPUS_DIR

SAMPLE = BUNDLED_CORPUS_DIR / "sample"


def _goldens() -> list[dict]:
    return list(read_jsonl(SAMPLE / "goldens.jsonl"))


def test_the_bundled_set_states_one_made_up_fact_per_canary():
    canaries = load_canaries()
    assert len(canaries.questions) == 4 and canaries.pin()["sha256"] == canaries.sha256
    for q in canaries.questions:
        assert q.question_id.startswith("canary_") and not q.abstention
        [evidence] = q.evidence_texts
        # The answer is said in the evidence turn, and in no other turn of any canary.
        assert q.answer in evidence
        others = [
            t["content"]
            for c in canaries.questions
            for t in c.sessions[0].turns
            if t["content"] != evidence
        ]
        assert not any(q.answer in text for text in others), q.question_id
    # ... and nowhere in the bundled sample's sessions: unguessable, not a corpus fact.
    text = (SAMPLE / "fixtures.jsonl").read_text("utf-8")
    assert not any(q.answer in text for q in canaries.questions)


def test_canary_questions_get_a_haystack_of_their_own_beside_the_run(tmp_path: Path):
    goldens = _goldens()
    canaries = load_canaries()
    rows = canary_goldens(canaries, goldens)
    distractors = pick_distractors(goldens, canaries.version)
    evidence = {s for g in goldens for s in g["additional_metadata"]["evidence_session_ids"]}
    assert len(distractors) == 2 and not set(distractors) & evidence
    # Seeded by the ids, not the order they come in.
    assert pick_distractors(list(reversed(goldens)), canaries.version) == distractors
    for row, q in zip(rows, canaries.questions, strict=True):
        haystack = row["additional_metadata"]["haystack_session_ids"]
        assert haystack[0] == q.sessions[0].session_id
        assert set(haystack) == set(canaries.session_ids) | set(distractors)
        assert row["additional_metadata"]["canary"] is True
    fixtures = tmp_path / "fixtures.jsonl"
    shutil.copyfile(SAMPLE / "fixtures.jsonl", fixtures)
    before = {fx["session_id"]: fx for fx in read_jsonl(fixtures)}
    stats = {"sessions": len(before), "turns": 0, "haystack_slots": 0}
    stats = plant_fixtures(fixtures, canaries, rows, stats)
    after = {fx["session_id"]: fx for fx in read_jsonl(fixtures)}
    assert stats["sessions"] == len(after) == len(before) + 4
    ids = [r["name"] for r in rows]
    for sid, fx in after.items():
        if sid in distractors:
            assert fx["question_ids"] == before[sid]["question_ids"] + ids
            assert fx["holds_evidence"] == before[sid]["holds_evidence"]
        elif sid in canaries.session_ids:
            assert fx["question_ids"] == ids and len(fx["holds_evidence"]) == 1
            # has_answer never reaches a fixture (nor, so, the graph).
            assert all(set(t) == {"role", "content", "index"} for t in fx["turns"])
        else:
            assert fx == before[sid]
    # Every question batch holds every canary, with its whole haystack.
    for batch in batch_keys(2):
        held = {
            fx["session_id"]: fx["question_ids"]
            for fx in batch_fixture_rows(read_jsonl(fixtures), batch)
        }
        for row in rows:
            for sid in row["additional_metadata"]["haystack_session_ids"]:
                assert row["name"] in held[sid], (batch.key, sid)


def test_a_corpus_id_with_the_reserved_prefix_is_one_line_naming_it():
    goldens = _goldens()
    taken = json.loads(json.dumps(goldens[:2]))
    taken[1]["additional_metadata"]["haystack_session_ids"].append("canary_mine")
    with pytest.raises(CorpusError) as err:
        refuse_reserved_ids(taken)
    text = str(err.value)
    assert "\n" not in text and f"record {taken[1]['name']!r}" in text
    assert "'haystack_session_ids'" in text and "'canary_mine'" in text
    taken = json.loads(json.dumps(goldens[:1]))
    taken[0]["name"] = "canary_q"
    with pytest.raises(CorpusError, match="record 'canary_q', field 'question_id'"):
        refuse_reserved_ids(taken)


def test_a_broken_canary_set_is_refused_naming_the_canary_and_field(tmp_path: Path):
    records = json.loads(CANARY_SET_FILE.read_text("utf-8"))
    for turn in records[2]["haystack_sessions"][0]:
        turn.pop("has_answer", None)
    bad = tmp_path / "canaries-v1.json"
    bad.write_text(json.dumps(records), "utf-8")
    with pytest.raises(CorpusError) as err:
        load_canaries(bad)
    assert f"record {records[2]['question_id']!r}" in str(err.value)
    assert "has_answer" in str(err.value)
