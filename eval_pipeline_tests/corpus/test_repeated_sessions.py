"""A session id repeated within one haystack (LongMemEval_S, xiaowu0162/LongMemEval#54) is
found, handled deterministically (the first occurrence kept, the repeat dropped) and counted
in the corpus manifest; the protocol check reports it. Small upstream-schema files."""

from __future__ import annotations

import pytest

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.score import protocol
from eval_pipeline_tests.corpus.records import record, session, write_upstream
from eval_pipeline_tests.corpus.test_convert import build


def _with_repeat(qid: str, *, evidence_in_repeat: bool = False) -> dict:
    """A haystack listing filler `filler_x` twice, the second time under a later date."""
    rec = record(
        qid,
        sessions=[
            (f"answer_{qid}_1", session(qid, evidence_at=0)),
            ("filler_x", session("filler")),
            (f"other_{qid}", session("other")),
            ("filler_x", session("filler", evidence_at=1 if evidence_in_repeat else None)),
        ],
    )
    rec["haystack_dates"][3] = "2023/05/29 (Mon) 09:00"
    return rec


def test_a_repeat_is_kept_once_counted_and_reported(tmp_path):
    up = write_upstream(tmp_path / "up.json", [_with_repeat("q1"), record("q2")])
    manifest = build(up, tmp_path / "out")
    report = manifest["repeated_sessions"]
    assert report["repeats"] == 1 and report["haystacks"] == 1
    assert report["questions"] == {"q1": ["filler_x"]}
    assert report["rule"] == "first occurrence kept, each later one dropped"
    [g1] = [g for g in read_jsonl(tmp_path / "out" / "goldens.jsonl") if g["name"] == "q1"]
    meta = g1["additional_metadata"]
    assert meta["haystack_session_ids"] == ["answer_q1_1", "filler_x", "other_q1"]
    assert meta["upstream_haystack_size"] == 3
    fixtures = {f["session_id"]: f for f in read_jsonl(tmp_path / "out" / "fixtures.jsonl")}
    # Once, with the first occurrence's date, and one membership for q1 (not two).
    assert fixtures["filler_x"]["date"] == "2023/05/11 (Wed) 10:00"
    assert fixtures["filler_x"]["question_ids"] == ["q1"]
    status = protocol.repeated_sessions_check(report)
    assert status.status == "passed"
    assert status.detail.startswith("handled: 1 repeat(s) in 1 haystack(s)")


def test_no_repeat_passes_with_nothing_handled(tmp_path):
    up = write_upstream(tmp_path / "up.json", [record("q1"), record("q2")])
    report = build(up, tmp_path / "out")["repeated_sessions"]
    assert report["repeats"] == 0
    status = protocol.repeated_sessions_check(report)
    assert (status.status, status.detail) == ("passed", "no session id repeats within a haystack")


def test_a_repeat_carrying_evidence_is_an_error_naming_record_and_field(tmp_path):
    up = write_upstream(tmp_path / "up.json", [_with_repeat("q1", evidence_in_repeat=True)])
    with pytest.raises(CorpusError) as err:
        build(up, tmp_path / "out")
    text = str(err.value)
    assert "q1" in text and "haystack_sessions[3]" in text and "would lose evidence" in text
    assert "\n" not in text
