"""Hand-written sessions for the reconciliation tests (no evidence flags: the graph has none)."""

from __future__ import annotations

from eval_pipeline.reconcile.models import SessionInput, SessionTurn

TRIP = [
    ("user", "My friend Ana and I are planning a trip to Lisbon on May 5th. We budgeted $1,200."),
    ("assistant", "Lisbon is lovely in May! Ana might enjoy the Belém Tower.\n"
                  "| Day | Plan |\n| 1 | Alfama, then the 28 tram (about 40 minutes) |"),
    ("user", "Ana called yesterday: she wants to visit Sintra too, maybe for 2 days."),
]  # fmt: skip
RUNNING = [
    ("user", "I ran 5 km in 25 minutes last Tuesday, my best time since 2019."),
    ("assistant", "Congratulations! That is a 12.5% improvement on your 28-minute record."),
    ("user", "Thanks! My sister Maria bought me a Garmin watch for $40 on 2023-05-30."),
]
CAFE = [
    ("user", "Zoë Kravitz était au café à Zürich — on a payé 3,50 € pour un espresso."),
    ("assistant", "Nice! Zürich has great cafés. Did you visit Lake Zurich as well?"),
    ("user", "東京で3 km走った。 Then I flew to Tokyo with Björn from Acme Corp."),
]


def session(
    session_id: str,
    turns: list[tuple[str, str]],
    *,
    date: str = "2023/05/30 (Tue) 23:40",
    started_at: str = "2023-05-30T23:40:00",
) -> SessionInput:
    return SessionInput(
        session_id=session_id,
        date=date,
        started_at=started_at,
        turns=tuple(
            SessionTurn(turn_id=f"{session_id}#{i}", role=role, text=text, index=i)
            for i, (role, text) in enumerate(turns)
        ),
    )
