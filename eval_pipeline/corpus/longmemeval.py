"""Read one upstream LongMemEval record, check it field by field, and derive what we need.

Checks are hand-written rather than a pydantic model: they run over ~240k turns on the
full file, and each failure must name the record and the exact field path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eval_pipeline.corpus import limits
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.models import SESSION_ID_PATTERN, turn_id

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
# Abstention is marked only by this suffix on question_id, never by question_type.
ABSTENTION_SUFFIX = "_abs"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \((\w{3})\) (\d{2}):(\d{2})$")


def parse_upstream_date(value: str) -> datetime:
    """`"2023/05/30 (Tue) 23:40"` → naive datetime (upstream dates carry no zone)."""
    m = _DATE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not of the form 'YYYY/MM/DD (Day) HH:MM'")
    y, mo, d, _, h, mi = m.groups()
    return datetime(int(y), int(mo), int(d), int(h), int(mi))


@dataclass(slots=True)
class HaystackSession:
    session_id: str
    date: str
    started_at: str
    turns: list[dict[str, Any]]  # upstream turns, has_answer included (never leaves corpus)
    is_evidence: bool


@dataclass(slots=True)
class UpstreamQuestion:
    index: int
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    abstention: bool
    sessions: list[HaystackSession]
    answer_session_ids: list[str]
    evidence_turn_ids: list[str] = field(default_factory=list)
    evidence_turn_roles: list[str] = field(default_factory=list)
    evidence_texts: list[str] = field(default_factory=list)
    # Session ids listed again later in this haystack (LongMemEval_S repeats a filler
    # session with another date, xiaowu0162/LongMemEval#54): the first occurrence is kept,
    # each repeat dropped and named here, in haystack order.
    repeated_session_ids: list[str] = field(default_factory=list)

    @property
    def stratum(self) -> tuple[str, bool]:
        return (self.question_type, self.abstention)


# Every field of an upstream record, in the order upstream writes them.
UPSTREAM_FIELDS = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
    "answer_session_ids",
)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_record(index: int, raw: Any) -> UpstreamQuestion:
    """Validate one upstream record and convert it; raise CorpusError naming record + field."""
    if not isinstance(raw, dict):
        raise CorpusError(f"expected a JSON object, got {_type_name(raw)}", record=index)
    qid = raw.get("question_id")
    rec: str | int = qid if isinstance(qid, str) and qid else index

    def fail(fld: str, msg: str) -> CorpusError:
        return CorpusError(msg, record=rec, field=fld)

    for key in UPSTREAM_FIELDS:
        if key not in raw:
            raise fail(key, "missing")
    for key in ("question_id", "question_type", "question", "question_date"):
        if not isinstance(raw[key], str):
            raise fail(key, f"expected a string, got {_type_name(raw[key])}")
    if not qid:
        raise fail("question_id", "empty")
    qtype = raw["question_type"]
    if qtype not in QUESTION_TYPES:
        raise fail("question_type", f"unknown type {qtype!r}; expected one of {QUESTION_TYPES}")
    answer = raw["answer"]
    # Upstream answers are strings, sometimes bare numbers: coerce those with str().
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise fail("answer", f"expected a string or a number, got {_type_name(answer)}")
    if isinstance(answer, float) and not math.isfinite(answer):
        raise fail("answer", f"{answer} is not an answer (expected a string or a finite number)")
    try:
        parse_upstream_date(raw["question_date"])
    except ValueError as exc:
        raise fail("question_date", str(exc)) from None

    dates, sids, sessions = (
        raw["haystack_dates"],
        raw["haystack_session_ids"],
        raw["haystack_sessions"],
    )
    for key, value in (
        ("haystack_dates", dates),
        ("haystack_session_ids", sids),
        ("haystack_sessions", sessions),
        ("answer_session_ids", raw["answer_session_ids"]),
    ):
        if not isinstance(value, list):
            raise fail(key, f"expected a list, got {_type_name(value)}")
    if not (len(dates) == len(sids) == len(sessions)):
        raise fail(
            "haystack_sessions",
            f"parallel arrays differ in length: haystack_dates {len(dates)}, "
            f"haystack_session_ids {len(sids)}, haystack_sessions {len(sessions)}",
        )
    answer_ids = raw["answer_session_ids"]
    for i, sid in enumerate(answer_ids):
        if not isinstance(sid, str):
            raise fail(f"answer_session_ids[{i}]", f"expected a string, got {_type_name(sid)}")
    answer_set = set(answer_ids)

    q = UpstreamQuestion(
        index=index,
        question_id=qid,
        question_type=qtype,
        question=raw["question"],
        answer=str(answer),
        question_date=raw["question_date"],
        abstention=qid.endswith(ABSTENTION_SUFFIX),
        sessions=[],
        answer_session_ids=list(answer_ids),
    )
    seen: set[str] = set()
    for i, (sid, date, turns) in enumerate(zip(sids, dates, sessions, strict=True)):
        if not isinstance(sid, str) or not _SESSION_ID.match(sid):
            raise fail(
                f"haystack_session_ids[{i}]",
                f"invalid session id {sid!r}: must match {SESSION_ID_PATTERN}",
            )
        if not isinstance(date, str):
            raise fail(f"haystack_dates[{i}]", f"expected a string, got {_type_name(date)}")
        try:
            started = parse_upstream_date(date)
        except ValueError as exc:
            raise fail(f"haystack_dates[{i}]", str(exc)) from None
        if not isinstance(turns, list):
            raise fail(
                f"haystack_sessions[{i}]", f"expected a list of turns, got {_type_name(turns)}"
            )
        if sid in seen:
            # A repeat within one haystack: deterministic, the first occurrence stays. One
            # that holds evidence cannot be dropped without losing it, so it is an error.
            if any(isinstance(t, dict) and t.get("has_answer") is True for t in turns):
                raise fail(
                    f"haystack_sessions[{i}]",
                    f"session {sid!r} is listed again in this haystack with an evidence turn "
                    "(has_answer): a repeat is dropped, and dropping this one would lose "
                    "evidence",
                )
            q.repeated_session_ids.append(sid)
            continue
        seen.add(sid)
        too_big = limits.session_problem(len(turns), 0)
        if too_big:
            raise fail(f"haystack_sessions[{i}]", too_big)
        has_evidence = False
        chars = 0
        for j, turn in enumerate(turns):
            where = f"haystack_sessions[{i}][{j}]"
            if not isinstance(turn, dict):
                raise fail(where, f"expected a turn object, got {_type_name(turn)}")
            role, content = turn.get("role"), turn.get("content")
            if not isinstance(role, str) or not role:
                raise fail(f"{where}.role", f"expected a non-empty string, got {_type_name(role)}")
            if not isinstance(content, str):
                raise fail(f"{where}.content", f"expected a string, got {_type_name(content)}")
            too_big = limits.text_problem(role, content)
            if too_big:
                raise fail(f"{where}.content", too_big)
            chars += len(role) + len(content)
            flag = turn.get("has_answer", False)
            if not isinstance(flag, bool):
                raise fail(f"{where}.has_answer", f"expected true/false, got {_type_name(flag)}")
            if flag:
                has_evidence = True
                q.evidence_turn_ids.append(turn_id(sid, j))
                q.evidence_turn_roles.append(role)
                q.evidence_texts.append(content)
        too_big = limits.session_problem(len(turns), chars)
        if too_big:
            raise fail(f"haystack_sessions[{i}]", too_big)
        q.sessions.append(
            HaystackSession(
                session_id=sid,
                date=date,
                started_at=started.isoformat(),
                turns=turns,
                is_evidence=has_evidence or sid in answer_set,
            )
        )
    missing = answer_set - seen
    if missing:
        raise fail("answer_session_ids", f"not in the haystack: {sorted(missing)}")
    return q
