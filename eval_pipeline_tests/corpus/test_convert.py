"""Converter: LongMemEval records → goldens + fixtures, on real files written to tmp dirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.corpus.convert import build_corpus
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec, file_sha256, resolve_upstream
from eval_pipeline_tests.corpus.records import record, session, write_upstream

REAL_SAMPLE = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "longmemeval_real_sample.json"
)


def build(path: Path, out: Path, **spec) -> dict:
    up = resolve_upstream(UpstreamSpec(source="path", path=str(path)), verify=False)
    return build_corpus(up, out, SampleSpec(**spec))


@pytest.mark.skipif(
    not REAL_SAMPLE.is_file(), reason="../shared/data is absent (not in this clone)"
)
def test_real_upstream_records_convert_exactly(tmp_path):
    # The excerpt's haystacks are oracle-style (answer sessions only), which is refused by
    # content (test_identity.py): one added record with a distractor makes the file valid.
    raw_records = json.loads(REAL_SAMPLE.read_text())
    assert file_sha256(REAL_SAMPLE) == (
        "8a977cc188314da6e74a49c76b4539006296ea7f28da95005e9d294624e8316b"
    )
    path = write_upstream(tmp_path / "real_plus.json", [*raw_records, record("zz_extra")])
    manifest = build(path, tmp_path / "out")
    goldens = {
        g["name"]: g
        for g in read_jsonl(tmp_path / "out" / "goldens.jsonl")
        if g["name"] != "zz_extra"
    }
    raw = {r["question_id"]: r for r in raw_records}
    assert set(goldens) == {"6a1eabeb", "gpt4_70e84552_abs"}
    for qid, g in goldens.items():
        r, meta = raw[qid], goldens[qid]["additional_metadata"]
        assert g["input"] == r["question"] and g["expected_output"] == str(r["answer"])
        flagged = [
            (f"{sid}#{i}", t["content"])
            for sid, turns in zip(r["haystack_session_ids"], r["haystack_sessions"], strict=True)
            for i, t in enumerate(turns)
            if t.get("has_answer")
        ]
        assert meta["evidence_turn_ids"] == [tid for tid, _ in flagged]
        assert g["context"] == [text for _, text in flagged]  # evidence turns, not sessions
        assert meta["evidence_session_ids"] == r["answer_session_ids"]
        assert meta["question_date"] == r["question_date"]
        assert meta["abstention"] is qid.endswith("_abs")
    assert goldens["6a1eabeb"]["additional_metadata"]["evidence_turn_ids"] == [
        "answer_a25d4a91_1#4",
        "answer_a25d4a91_2#0",
    ]
    assert manifest["upstream"]["sha256"] == file_sha256(path)
    fixtures = [
        f
        for f in read_jsonl(tmp_path / "out" / "fixtures.jsonl")
        if f["question_ids"] != ["zz_extra"]
    ]
    assert [f["session_id"] for f in fixtures] == [
        "answer_a25d4a91_1",
        "answer_a25d4a91_2",
        "answer_b3070ec4_abs_1",
        "answer_b3070ec4_abs_2",
    ]
    first = fixtures[0]
    assert first["started_at"] == "2023-05-25T20:21:00"
    assert all(set(t) == {"role", "content", "index"} for f in fixtures for t in f["turns"])
    assert manifest["file_stats"]["questions_without_distractors"] == 2


def test_shared_sessions_deduplicated_and_membership_kept(tmp_path):
    shared = ("sharegpt_pool_1", session("pool", text="a | b, naïve 東京 🎉"))
    recs = [
        record("q1", sessions=[("answer_q1_1", session("q1", evidence_at=0)), shared]),
        record(
            "q2",
            "multi-session",
            sessions=[shared, ("answer_q2_1", session("q2", evidence_at=2))],
            answer=3,
            answer_ids=["answer_q2_1"],
        ),
    ]
    manifest = build(write_upstream(tmp_path / "up.json", recs), tmp_path / "out")
    fixtures = {f["session_id"]: f for f in read_jsonl(tmp_path / "out" / "fixtures.jsonl")}
    assert fixtures["sharegpt_pool_1"]["question_ids"] == ["q1", "q2"]
    assert fixtures["sharegpt_pool_1"]["holds_evidence"] == []
    assert fixtures["answer_q2_1"]["holds_evidence"] == ["q2"]
    assert "a | b, naïve 東京 🎉" in fixtures["sharegpt_pool_1"]["turns"][0]["content"]
    assert manifest["counts"]["sessions"] == 3
    assert manifest["counts"]["repeated_slots"] == 1
    goldens = {g["name"]: g for g in read_jsonl(tmp_path / "out" / "goldens.jsonl")}
    assert goldens["q2"]["expected_output"] == "3"  # numbers coerced with str()
    assert goldens["q2"]["additional_metadata"]["evidence_turn_ids"] == ["answer_q2_1#2"]


def test_pipe_and_unicode_survive_in_goldens_context(tmp_path):
    text = "price | qty\n12 | 3 — café ü 中文"
    recs = [
        record(
            "q1",
            sessions=[
                ("answer_q1_1", session("q1", evidence_at=0, text=text)),
                ("d_1", session("d")),
            ],
        )
    ]
    build(write_upstream(tmp_path / "up.json", recs), tmp_path / "out")
    raw = (tmp_path / "out" / "goldens.jsonl").read_text(encoding="utf-8")
    (golden,) = read_jsonl(tmp_path / "out" / "goldens.jsonl")
    assert golden["context"] == [f"q1 turn 0 {text}"]  # a list, never joined with "|"
    assert "café ü 中文" in raw  # stored readable, not \\u-escaped


def test_same_spec_gives_byte_identical_output(tmp_path):
    recs = [
        record(f"q{i}", t)
        for i, t in enumerate(["single-session-user", "multi-session", "knowledge-update"] * 4)
    ]
    up = write_upstream(tmp_path / "up.json", recs)
    build(up, tmp_path / "a", sample=5, seed=7)
    build(up, tmp_path / "b", sample=5, seed=7)
    for name in ("goldens.jsonl", "fixtures.jsonl", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    build(up, tmp_path / "c", sample=5, seed=8)
    assert (tmp_path / "a" / "goldens.jsonl").read_bytes() != (
        tmp_path / "c" / "goldens.jsonl"
    ).read_bytes()


def test_subsampling_keeps_evidence_and_marks_non_comparable(tmp_path):
    sessions = [(f"dist_{i}", session(f"d{i}")) for i in range(5)]
    sessions.insert(3, ("answer_q1_1", session("q1", evidence_at=1)))
    recs = [record("q1", sessions=sessions, answer_ids=["answer_q1_1"])]
    manifest = build(
        write_upstream(tmp_path / "up.json", recs), tmp_path / "out", max_sessions_per_question=2
    )
    (golden,) = read_jsonl(tmp_path / "out" / "goldens.jsonl")
    assert golden["additional_metadata"]["haystack_session_ids"] == ["dist_0", "answer_q1_1"]
    assert golden["additional_metadata"]["upstream_haystack_size"] == 6
    assert manifest["comparable"] is False
    assert "upper bound" in manifest["comparability_note"]
    manifest = build(
        write_upstream(tmp_path / "up.json", recs), tmp_path / "one", max_sessions_per_question=1
    )
    (golden,) = read_jsonl(tmp_path / "one" / "goldens.jsonl")
    assert golden["additional_metadata"]["haystack_session_ids"] == ["answer_q1_1"]


def test_conflicting_duplicate_session_names_both_questions(tmp_path):
    recs = [
        record(
            "q1", sessions=[("answer_q1_1", session("q1", evidence_at=0)), ("pool_x", session("A"))]
        ),
        record(
            "q2", sessions=[("answer_q2_1", session("q2", evidence_at=0)), ("pool_x", session("B"))]
        ),
    ]
    with pytest.raises(CorpusError) as err:
        build(write_upstream(tmp_path / "up.json", recs), tmp_path / "out")
    msg = str(err.value)
    assert "pool_x" in msg and "'q1'" in msg and "'q2'" in msg and "haystack_sessions" in msg
    assert not (tmp_path / "out").exists()


def test_abstention_only_from_suffix(tmp_path):
    recs = [
        record(
            "q1_abs",
            "temporal-reasoning",
            sessions=[("answer_q1_abs_1", session("q1"))],
            answer="not enough information",
        ),
        record("q2", "temporal-reasoning"),
    ]
    build(write_upstream(tmp_path / "up.json", recs), tmp_path / "out")
    goldens = {
        g["name"]: g["additional_metadata"] for g in read_jsonl(tmp_path / "out" / "goldens.jsonl")
    }
    assert goldens["q1_abs"]["abstention"] is True and goldens["q2"]["abstention"] is False
    assert goldens["q1_abs"]["question_type"] == "temporal-reasoning"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["evidence"]["without_evidence_turns_abstention"] == ["q1_abs"]
    assert manifest["evidence"]["without_evidence_turns_unexpected"] == []


def test_committed_sample_corpus_is_current(tmp_path):
    """corpus/sample/ is what the default spec makes of the bundled sample, byte for byte:
    a change to the sample or the converter shows up in review as a change to these files."""
    from eval_pipeline.settings import BUNDLED_CORPUS_DIR

    up = resolve_upstream(UpstreamSpec())
    build_corpus(up, tmp_path / "sample", SampleSpec())
    for name in ("goldens.jsonl", "fixtures.jsonl", "manifest.json"):
        committed = (BUNDLED_CORPUS_DIR / "sample" / name).read_bytes()
        assert (tmp_path / "sample" / name).read_bytes() == committed, (
            f"corpus/sample/{name} is stale: run "
            "`.venv/bin/eval-pipeline corpus --upstream sample --out corpus/sample`"
        )
