"""Fixtures for the namespace tests: two users whose haystacks share a distractor session, one
knowledge update (the later session has the smaller id, so id order is not time order), and
one tier-2 organisation."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.corpus.jsonl import write_jsonl
from eval_pipeline.corpus.models import FixtureTurn, SessionFixture

# (session id, started_at, question ids, turns)
SESSIONS: list[tuple[str, str, list[str], list[tuple[str, str]]]] = [
    (
        "a_moved",  # later than b_leeds, though it sorts first
        "2023-05-08T22:30:00",
        ["qa"],
        [
            ("user", "My sister just moved to Zürich for a new job! Ana Lopez helped her."),
            ("assistant", "Zürich is lovely, if expensive."),
        ],
    ),
    (
        "b_leeds",
        "2023-02-20T19:00:00",
        ["qa"],
        [
            ("user", "My sister lives in Leeds and I want to visit her with Ana."),
            ("assistant", "Leeds has a great market."),
        ],
    ),
    (
        "shared_team",  # a distractor in both haystacks
        "2023-01-10T09:00:00",
        ["qa", "qb"],
        [("user", "I just joined the payments team at work."), ("assistant", "Congrats!")],
    ),
    (
        "qb_search",
        "2023-03-21T20:30:00",
        ["qb"],
        [("user", "I've been loaned out to the search team for a rotation."), ("assistant", "Ok.")],
    ),
    (
        "org_deploy",
        "2024-03-05T10:00:00",
        ["t2-inc-q1", "t2-pref-q1"],
        [("chat", "alice: the billing team moved to the Kafka queue.")],
    ),
]


def fixtures() -> list[SessionFixture]:
    out = []
    for sid, started, qids, turns in SESSIONS:
        day = started[:10].replace("-", "/")
        out.append(
            SessionFixture(
                session_id=sid,
                date=f"{day} (Mon) {started[11:16]}",
                started_at=started,
                turns=[FixtureTurn(role=r, content=c, index=i) for i, (r, c) in enumerate(turns)],
                question_ids=qids,
            )
        )
    return out


def write_namespace_fixtures(path: Path) -> Path:
    write_jsonl(path, [f.model_dump() for f in fixtures()])
    return path
