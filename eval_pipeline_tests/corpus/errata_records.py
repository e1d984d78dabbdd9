"""An upstream-shaped file that agrees with every claim of the bundled errata, built record
by record in the exact upstream schema (the real S file is not on this machine).

Each reported problem is built as its issue describes it (dates, ids, a has_answer turn on
the assistant side...), every other question is plain. Tests break one claim at a time by
editing one record before writing the file.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.errata import Errata

QUESTION_DATE = "2023/05/30 (Tue) 23:40"


def turns(tag: str, *, evidence: str | None = "user", n: int = 4) -> list[dict[str, Any]]:
    """n alternating user/assistant turns; `evidence` names the role of the one has_answer
    turn (the first of that role), None for a filler session."""
    out = []
    marked = False
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        flag = evidence == role and not marked
        marked = marked or flag
        out.append({"role": role, "content": f"{tag} turn {i}", "has_answer": flag})
    return out


def raw_record(
    qid: str,
    sessions: list[tuple[str, str, list]],
    *,
    qtype: str = "single-session-user",
    question: str | None = None,
    answer: Any = "blue",
    question_date: str = QUESTION_DATE,
    answer_ids: list[str] | None = None,
) -> dict[str, Any]:
    """`sessions`: (session_id, date, turns) in haystack order; answer sessions default to
    every session holding a has_answer turn."""
    evidence = [sid for sid, _, ts in sessions if any(t.get("has_answer") for t in ts)]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question or f"What about {qid}?",
        "answer": answer,
        "question_date": question_date,
        "haystack_dates": [d for _, d, _ in sessions],
        "haystack_session_ids": [s for s, _, _ in sessions],
        "haystack_sessions": [ts for _, _, ts in sessions],
        "answer_session_ids": answer_ids if answer_ids is not None else evidence,
    }


def plain(qid: str, *, evidence: str | None = "user", **kw: Any) -> dict[str, Any]:
    return raw_record(
        qid,
        [
            (f"answer_{qid}_1", "2023/05/20 (Sat) 10:00", turns(qid, evidence=evidence)),
            (f"filler_{qid}", "2023/05/21 (Sun) 11:00", turns("filler", evidence=None)),
        ],
        **kw,
    )


def with_duplicate(rec: dict[str, Any], session_id: str) -> dict[str, Any]:
    """The record with filler `session_id` listed twice: same turns, two dates."""
    rec = copy.deepcopy(rec)
    filler = turns(f"shared {session_id}", evidence=None)
    for date in ("2023/04/02 (Sun) 09:00", "2023/04/09 (Sun) 09:00"):
        rec["haystack_session_ids"].append(session_id)
        rec["haystack_dates"].append(date)
        rec["haystack_sessions"].append(copy.deepcopy(filler))
    return rec


def agreeing_records(errata: Errata) -> dict[str, dict[str, Any]]:
    """question_id -> record: every entry's claims hold and every derivation finds exactly
    what its source reports."""
    recs: dict[str, dict[str, Any]] = {}
    recs["370a8ff4"] = raw_record(
        "370a8ff4",
        [
            ("answer_61d1be50_1", "2023/01/19 (Thu) 10:47", turns("flu gone today")),
            ("filler_370a", "2023/02/01 (Wed) 10:00", turns("filler", evidence=None)),
            ("answer_61d1be50_2", "2023/04/10 (Mon) 08:00", turns("tenth outdoor jog today")),
        ],
        qtype="temporal-reasoning",
        question="How many weeks passed between my flu recovery and my 10th outdoor jog?",
        answer=15,  # upstream writes some answers as bare numbers
        question_date="2023/10/15 (Sun) 17:53",
    )
    recs["gpt4_88806d6e"] = plain(
        "gpt4_88806d6e",
        qtype="temporal-reasoning",
        question="Which came first: meeting Mark and Sarah, or meeting Tom?",
        answer="Tom",
    )
    recs["eac54add"] = plain(
        "eac54add", question="When did I start my buisiness plan?", answer="in March"
    )
    recs["9aaed6a3"] = raw_record(
        "9aaed6a3",
        [
            ("answer_9aaed6a3_1", "2023/05/23 (Tue) 12:00", turns("groceries last Thursday")),
            ("filler_9aae", "2023/05/25 (Thu) 12:00", turns("filler", evidence=None)),
        ],
        qtype="multi-session",
        question="How much cashback did I get at the store last Thursday?",
        answer="$0.75",
        question_date="2023/05/30 (Tue) 23:17",
    )
    recs["gpt4_f420262d"] = raw_record(
        "gpt4_f420262d",
        [
            ("gpt4_f420262d_answer_d8a1af6c_4", "2023/02/20 (Mon) 18:00", turns("flew today")),
            ("filler_f420", "2023/02/14 (Tue) 18:00", turns("filler", evidence=None)),
        ],
        qtype="temporal-reasoning",
        question="Which airline did I fly with on Valentine's day?",
        answer="American Airlines",
        question_date="2023/03/02 (Thu) 08:00",
    )
    no_user = next(d for d in errata.doc.derived if d.derivation == "no_user_evidence")
    named = list(no_user.expect.includes)
    extra = [f"sa{i:06d}" for i in range((no_user.expect.count or 0) - len(named))]
    for qid in [*named, *extra]:
        recs[qid] = plain(qid, evidence="assistant", qtype="single-session-assistant")
    for e in errata.doc.entries:
        for claim in e.claims:
            if claim.kind == "duplicate_session_id":
                base = recs.get(e.question_id) or plain(e.question_id)
                recs[e.question_id] = with_duplicate(base, claim.session_id)
    return recs


def write_records(path: Path, recs: dict[str, dict[str, Any]] | list[dict[str, Any]]) -> Path:
    items = list(recs.values()) if isinstance(recs, dict) else recs
    path.write_text(json.dumps(items, ensure_ascii=False, indent=1), encoding="utf-8")
    return path
