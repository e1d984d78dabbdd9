"""A small fixture set to inject for the reconciliation tests (the corpus stage's file format)."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.corpus.jsonl import write_jsonl
from eval_pipeline.corpus.models import FixtureTurn, SessionFixture

from .sessions import CAFE, RUNNING, TRIP

EXTRA = {
    "s_ana_again": [
        ("user", "Ana and I finally booked Lisbon: 5 days in a flat near Alfama for $900."),
        ("assistant", "Lovely! Alfama is charming."),
    ],
    "s_plain": [("user", "hello"), ("assistant", "Hi! How can I help?")],
    "s_llm_bad": [("user", "MALFORMED request about my 3 km run.")],
}


def fixtures() -> list[SessionFixture]:
    sets = {"s_trip": TRIP, "s_running": RUNNING, "s_cafe": CAFE, **EXTRA}
    out = []
    for n, (sid, turns) in enumerate(sets.items()):
        out.append(
            SessionFixture(
                session_id=sid,
                date=f"2023/05/{20 + n} (Sat) 10:00",
                started_at=f"2023-05-{20 + n}T10:00:00",
                turns=[FixtureTurn(role=r, content=c, index=i) for i, (r, c) in enumerate(turns)],
                question_ids=["q1"] if n % 2 else ["q1", "q2"],
                holds_evidence=["q1"] if sid == "s_trip" else [],
            )
        )
    return out


SESSION_IDS = sorted(f.session_id for f in fixtures())


def write_fixtures(path: Path) -> Path:
    write_jsonl(path, [f.model_dump() for f in fixtures()])
    return path
