"""A small injected fixture set with known answers, for the retrieval tests.

Three questions with overlapping haystacks. Words are chosen so each question has one clearly
best turn in its own haystack, and so a session OUTSIDE `q_bike`'s haystack (`s_bakery`) also
mentions the bike: scope `question` must exclude it, scope `batch` must find it.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.corpus.jsonl import write_jsonl
from eval_pipeline.corpus.models import FixtureTurn, SessionFixture


def _session(
    session_id: str, date: str, iso: str, questions: list[str], turns: list[tuple[str, str]]
):
    return SessionFixture(
        session_id=session_id,
        date=date,
        started_at=iso,
        turns=[FixtureTurn(role=r, content=c, index=i) for i, (r, c) in enumerate(turns)],
        question_ids=questions,
    )


SESSIONS = [
    _session(
        "s_bike",
        "2023/05/20 (Sat) 10:00",
        "2023-05-20T10:00:00",
        ["q_bike"],
        [
            ("user", "I finally bought a road bike in Paris, a red Trek Domane."),
            ("assistant", "Congratulations! Trek makes lovely road bikes."),
            ("user", "Thanks, I plan to ride it to work every day."),
        ],
    ),
    _session(
        "s_dog",
        "2023/05/21 (Sun) 09:30",
        "2023-05-21T09:30:00",
        ["q_bike", "q_dog"],
        [
            ("user", "My golden retriever Biscuit loves long walks in the park."),
            ("assistant", "Golden retrievers are wonderful companions."),
        ],
    ),
    _session(
        "s_shared",
        "2023/05/22 (Mon) 18:00",
        "2023-05-22T18:00:00",
        ["q_bike", "q_music"],
        [
            ("user", "Can you suggest a pasta recipe | something quick? Ça dépend."),
            ("assistant", "Try aglio e olio: garlic, olive oil, chili and parsley."),
        ],
    ),
    _session(
        "s_bakery",
        "2023/05/23 (Tue) 07:15",
        "2023-05-23T07:15:00",
        ["q_dog"],
        [
            ("user", "I rode my road bike in Paris to the bakery and bought sourdough."),
            ("assistant", "Fresh sourdough after a ride sounds perfect."),
        ],
    ),
    _session(
        "s_violin",
        "2023/05/24 (Wed) 20:00",
        "2023-05-24T20:00:00",
        ["q_music"],
        [
            ("user", "I started violin lessons; my teacher is called Anna Kowalski."),
            ("assistant", "How exciting! Practice scales every day."),
        ],
    ),
]

# question_id -> (question, question_date, best turn id in its own haystack)
QUESTIONS = {
    "q_bike": (
        "What brand is the road bike I bought in Paris?",
        "2023/06/01 (Thu) 12:00",
        "s_bike#0",
    ),
    "q_dog": ("What is the name of my golden retriever?", "2023/06/02 (Fri) 12:00", "s_dog#0"),
    "q_music": ("Who is my violin teacher?", "2023/06/03 (Sat) 12:00", "s_violin#0"),
}

HAYSTACKS = {q: {s.session_id for s in SESSIONS if q in s.question_ids} for q in QUESTIONS}


def write_fixtures(path: Path) -> Path:
    write_jsonl(path, (s.model_dump() for s in SESSIONS))
    return path


def golden_rows() -> list[dict]:
    """goldens.jsonl rows for the questions (answers and evidence are placeholders)."""
    rows = []
    for qid, (question, date, best) in QUESTIONS.items():
        rows.append(
            {
                "input": question,
                "expected_output": "placeholder",
                "context": [],
                "name": qid,
                "source_file": "tests",
                "additional_metadata": {
                    "tier": 1,
                    "question_type": "single-session-user",
                    "question_date": date,
                    "abstention": False,
                    "evidence_turn_ids": [best],
                    "evidence_session_ids": [best.split("#")[0]],
                    "haystack_session_ids": sorted(HAYSTACKS[qid]),
                },
            }
        )
    return rows
