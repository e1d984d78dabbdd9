"""The input size limits (`corpus/limits.py`) and the Bolt row limit agree: whatever the
corpus validation lets through fits one row of one Bolt message, so no session the corpus
accepted can fail at injection, after the wipe (issue 28, finding 5)."""

from __future__ import annotations

import json

from eval_pipeline.corpus import limits
from eval_pipeline.graph.batched_writes import MAX_ROW_BYTES, row_bytes, row_problem
from eval_pipeline.graph.inject import session_row


def test_the_largest_session_the_limits_allow_fits_one_row() -> None:
    assert limits.worst_session_row_bytes() < MAX_ROW_BYTES


def test_the_worst_case_bound_holds_for_a_real_row() -> None:
    """Every character of the allowed text non-BMP (12 bytes escaped), every turn's fixed
    fields at their longest: the row as the write measures it stays under the bound."""
    sid = "s" * 128
    per_turn = limits.MAX_SESSION_CHARS // limits.MAX_SESSION_TURNS - len("assistant")
    turns = [
        {"role": "assistant", "content": "\U0001f600" * per_turn, "index": i}
        for i in range(limits.MAX_SESSION_TURNS)
    ]
    fixture = {
        "session_id": sid,
        "date": "2023/05/30 (Tue) 23:40",
        "started_at": "2023-05-30T23:40:00",
        "turns": turns,
        "question_ids": [],
    }
    row = session_row(fixture)
    text = sum(len(t["role"]) + len(t["content"]) for t in turns)
    assert text <= limits.MAX_SESSION_CHARS
    assert row_bytes(row) <= limits.worst_session_row_bytes()
    assert row_problem(row) is None
    assert len(json.dumps(row)) == row_bytes(row)
