"""Small upstream-shaped records for tests, built field by field (no mocks: real files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def session(tag: str, n_turns: int = 4, *, evidence_at: int | None = None, text: str = "") -> list:
    turns = []
    for i in range(n_turns):
        role = "user" if i % 2 == 0 else "assistant"
        content = f"{tag} turn {i} {text}".strip()
        turns.append({"role": role, "content": content, "has_answer": i == evidence_at})
    return turns


def record(
    qid: str,
    qtype: str = "single-session-user",
    *,
    sessions: list[tuple[str, list]] | None = None,
    answer: Any = "blue",
    answer_ids: list[str] | None = None,
) -> dict:
    if sessions is None:
        sessions = [
            (f"answer_{qid}_1", session(qid, evidence_at=0)),
            (f"shared_{qid}", session("d")),
        ]
    ids = [sid for sid, _ in sessions]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"What about {qid}?",
        "answer": answer,
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": [f"2023/05/{10 + i:02d} (Wed) 10:00" for i in range(len(ids))],
        "haystack_session_ids": ids,
        "haystack_sessions": [turns for _, turns in sessions],
        "answer_session_ids": answer_ids if answer_ids is not None else ids[:1],
    }


def write_upstream(path: Path, records: list[Any]) -> Path:
    path.write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    return path
