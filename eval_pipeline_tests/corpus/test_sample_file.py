"""The bundled sample (corpus/upstream/longmemeval_sample.json) has every quirk it promises.

Other tests use the sample as the embedded default corpus; if it silently lost a quirk (no
abstention in a block, no shared distractor, no `|`), the code those quirks guard would go
untested. So each promise in corpus/upstream/README.md is checked here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.corpus.longmemeval import QUESTION_TYPES, UPSTREAM_FIELDS

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "corpus" / "upstream" / "longmemeval_sample.json"
README = REPO / "corpus" / "upstream" / "README.md"
REAL_SAMPLE = REPO.parent / "shared" / "data" / "longmemeval_real_sample.json"

RECORD_KEYS = list(UPSTREAM_FIELDS)
TYPES = list(QUESTION_TYPES)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # locale-independent
DATE_RE = re.compile(r"^(\d{4}/\d{2}/\d{2}) \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) (\d{2}:\d{2})$")
QUESTION_ID_RE = re.compile(r"^(gpt4_)?[0-9a-f]{8}(_abs)?$")
ANSWER_SESSION_RE = re.compile(r"^answer_[0-9a-f]{8}(_abs)?_\d+$")
DISTRACTOR_RE = re.compile(r"^(sharegpt_[A-Za-z0-9]+_\d+|ultrachat_\d+)$")
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

# What the flagged (has_answer) turns of each answerable question must say.
EVIDENCE_FACTS: dict[str, list[str]] = {
    "3c9e51a2": ["Clint Yeastwood"],
    "a81f07d4": ["12.5 km"],
    "5d2b6e90": ["European Portuguese", "Lisbon"],
    "gpt4_c07a3b1e": ["Brühwerk", "Lindenstraße"],
    "7f3a0d65": ["simmer uncovered for 25 minutes"],
    "b2e8c914": ["3. ZZ plant (Zamioculcas zamiifolia)"],
    "gpt4_4d61c2aa": ["ごちそうさまでした (gochisōsama deshita)"],
    "e05b7d3f": ["cat *.csv | wc -l"],
    "0a6c93e7": ["narrative history", "maritime history", "35 minutes", "true crime", "comedy"],
    "d48b1f26": ["cast-iron skillet", "vegetarian", "mushrooms"],
    "6e7c2a0b": ["watercolour", "jazz", "TV", "busy bars"],
    "c3d9e7a4": ["Static Lagoon", "Marisol Reyes Quartet", "orchestra"],
    "gpt4_8b5f1d3e": ["$65", "$120"],
    "17a4c6e2": ["Osaka", "Toronto"],
    "f9e2b0d8": ["Miso", "Pickles and Nori"],
    "2b8d5f71": ["6 hours", "8 hours"],
    "gpt4_5e0a9c17": ["a basil plant and two cherry tomato plants", "a lemon thyme and a lavender"],
    "4a7e2c19": ["4 in a row", "9 pull-ups"],
    "e8b3f5d2": ["Leeds", "moved to Zürich"],
    "gpt4_1f6d8a3b": ["5:45 per km", "5:30 per km"],
    "b7c0e4a9": ["payments team", "search team", "data platform team"],
    "gpt4_93c1e5b7": ["dentist", "eye exam"],
    "0e4f7a2c": ["repotted my monstera", "assembled the new bookshelf"],
    "a5c8e1d7": ["first pottery class tonight"],
    "gpt4_7d2b9f04": ["Porto", "Snowdonia", "Kyoto"],
    "3b6f0d9e": ["standing desk arrived yesterday"],
    "c1e7a4f3": ["fixed the leaking kitchen tap", "parents just left"],
}
# What each abstention question asks about must be absent from its haystack.
ABSENT_FROM_HAYSTACK: dict[str, str] = {
    "91e4f2c8_abs": r"\bcats?\b",
    "5f2a9d84_abs": r"\bstreak\b",
    "6d9a2e05_abs": r"\bvets?\b",
}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def parse_date(text: str) -> datetime:
    match = DATE_RE.match(text)
    assert match, f"bad date {text!r}"
    return datetime.strptime(f"{match[1]} {match[3]}", "%Y/%m/%d %H:%M")


def is_abstention(record: dict[str, Any]) -> bool:
    return record["question_id"].endswith("_abs")


def sessions(record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return dict(zip(record["haystack_session_ids"], record["haystack_sessions"], strict=True))


def evidence_turns(record: dict[str, Any]) -> list[dict[str, Any]]:
    by_id = sessions(record)
    return [t for sid in record["answer_session_ids"] for t in by_id[sid] if t.get("has_answer")]


def all_turn_texts(records: list[dict[str, Any]]) -> list[str]:
    return [t["content"] for r in records for s in r["haystack_sessions"] for t in s]


# -- file and schema ----------------------------------------------------------------------


def test_file_is_pretty_printed_utf8_with_trailing_newline(records: list[dict[str, Any]]) -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    assert text == json.dumps(records, indent=2, ensure_ascii=False) + "\n"


def test_readme_pins_the_sample_sha256() -> None:
    digest = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    assert digest in README.read_text(encoding="utf-8"), "update the sha256 in README.md"


def test_about_thirty_records_with_upstream_key_order(records: list[dict[str, Any]]) -> None:
    assert 25 <= len(records) <= 40
    for record in records:
        assert list(record) == RECORD_KEYS, record["question_id"]
        assert isinstance(record["question"], str) and record["question"]
        assert isinstance(record["answer"], str | int | float)
        assert not isinstance(record["answer"], bool)


def test_ids_follow_upstream_naming(records: list[dict[str, Any]]) -> None:
    question_ids = [r["question_id"] for r in records]
    assert len(set(question_ids)) == len(question_ids)
    for record in records:
        assert QUESTION_ID_RE.match(record["question_id"]), record["question_id"]
        for sid in record["haystack_session_ids"]:
            assert SESSION_ID_RE.match(sid)
            is_answer = sid in record["answer_session_ids"]
            assert (ANSWER_SESSION_RE if is_answer else DISTRACTOR_RE).match(sid), sid
        for sid in record["answer_session_ids"]:
            assert sid.endswith(tuple(f"_{n}" for n in range(1, 10)))
            # An abstention question's sessions carry `_abs` too, as upstream's do.
            assert ("_abs_" in sid) == is_abstention(record), sid


def test_turns_have_upstream_shape(records: list[dict[str, Any]]) -> None:
    for record in records:
        for session in record["haystack_sessions"]:
            assert 4 <= len(session) <= 10
            for index, turn in enumerate(session):
                assert list(turn) in (["role", "content"], ["role", "content", "has_answer"])
                assert turn["role"] == ("user" if index % 2 == 0 else "assistant")
                assert isinstance(turn["content"], str) and turn["content"].strip()
                assert isinstance(turn.get("has_answer", False), bool)


def test_schema_matches_the_real_upstream_records(records: list[dict[str, Any]]) -> None:
    if not REAL_SAMPLE.is_file():
        pytest.skip(f"{REAL_SAMPLE} is absent (../shared is not part of the project)")
    real = json.loads(REAL_SAMPLE.read_text(encoding="utf-8"))
    for upstream in real:
        assert list(upstream) == RECORD_KEYS
        assert DATE_RE.match(upstream["question_date"])
        assert all(ANSWER_SESSION_RE.match(sid) for sid in upstream["answer_session_ids"])
        turn = upstream["haystack_sessions"][0][0]
        assert list(turn) == ["role", "content", "has_answer"]
    assert any(is_abstention(r) for r in real) and any(is_abstention(r) for r in records)


# -- question types and abstention ----------------------------------------------------------


def test_all_six_types_in_contiguous_blocks(records: list[dict[str, Any]]) -> None:
    block_order = [r["question_type"] for r in records]
    blocks = [t for i, t in enumerate(block_order) if i == 0 or block_order[i - 1] != t]
    assert blocks == TYPES


def test_abstention_only_by_suffix_at_end_of_blocks(records: list[dict[str, Any]]) -> None:
    by_type: dict[str, list[bool]] = defaultdict(list)
    for record in records:
        assert record["question_type"] in TYPES  # never an "abstention" type
        by_type[record["question_type"]].append(is_abstention(record))
    types_with_abstention = [t for t, flags in by_type.items() if any(flags)]
    assert len(types_with_abstention) >= 3
    for qtype, flags in by_type.items():
        assert flags == sorted(flags), f"{qtype}: an _abs question is not at the block end"
        assert not all(flags), qtype


def test_abstention_answers_and_haystacks(records: list[dict[str, Any]]) -> None:
    abstentions = [r for r in records if is_abstention(r)]
    assert {r["question_id"] for r in abstentions} >= set(ABSENT_FROM_HAYSTACK)
    for record in abstentions:
        assert record["answer"].startswith("The information provided is not enough.")
        text = "\n".join(t["content"] for s in record["haystack_sessions"] for t in s)
        pattern = ABSENT_FROM_HAYSTACK.get(record["question_id"])
        if pattern:
            assert not re.search(pattern, text, re.IGNORECASE), record["question_id"]
    bouldering = next(r for r in abstentions if r["question_id"] == "8d1c4f60_abs")
    turns = [t["content"] for s in bouldering["haystack_sessions"] for t in s]
    assert any("bouldering" in t for t in turns) and any("sister" in t for t in turns)
    assert not any("bouldering" in t and "sister" in t for t in turns)


# -- answers -----------------------------------------------------------------------------------


def test_numeric_answers_are_json_numbers(records: list[dict[str, Any]]) -> None:
    numeric = [r["answer"] for r in records if isinstance(r["answer"], int | float)]
    assert len(numeric) >= 2
    assert any(isinstance(a, float) for a in numeric)


def test_preference_answers_are_rubrics(records: list[dict[str, Any]]) -> None:
    preference = [r for r in records if r["question_type"] == "single-session-preference"]
    assert preference
    for record in preference:
        assert record["answer"].startswith("The user would prefer ")


def test_single_session_assistant_evidence_is_on_assistant_turns(
    records: list[dict[str, Any]],
) -> None:
    assistant = [r for r in records if r["question_type"] == "single-session-assistant"]
    assert assistant
    for record in assistant:
        flagged = evidence_turns(record)
        assert flagged and all(t["role"] == "assistant" for t in flagged), record["question_id"]


def test_multi_evidence_questions(records: list[dict[str, Any]]) -> None:
    for qtype in ("multi-session", "knowledge-update", "temporal-reasoning"):
        counts = [len(r["answer_session_ids"]) for r in records if r["question_type"] == qtype]
        assert max(counts) >= 2, qtype
    assert max(len(r["answer_session_ids"]) for r in records) == 3
    assert all(1 <= len(r["answer_session_ids"]) <= 3 for r in records)


# -- haystacks -------------------------------------------------------------------------------


def test_parallel_arrays_and_haystack_size(records: list[dict[str, Any]]) -> None:
    for record in records:
        ids = record["haystack_session_ids"]
        assert len(ids) == len(record["haystack_dates"]) == len(record["haystack_sessions"])
        assert 4 <= len(ids) <= 8
        assert len(set(ids)) == len(ids)
        assert set(record["answer_session_ids"]) <= set(ids)
        assert len(set(record["answer_session_ids"])) == len(record["answer_session_ids"])


def test_dates_have_correct_weekdays_ascend_and_precede_question(
    records: list[dict[str, Any]],
) -> None:
    for record in records:
        for text in [record["question_date"], *record["haystack_dates"]]:
            assert DATE_RE.match(text)[2] == WEEKDAYS[parse_date(text).weekday()], text
        dates = [parse_date(t) for t in record["haystack_dates"]]
        assert dates == sorted(dates), record["question_id"]
        assert dates[-1] < parse_date(record["question_date"]), record["question_id"]


def test_has_answer_on_every_evidence_turn_and_flagged_evidence(
    records: list[dict[str, Any]],
) -> None:
    unflagged_abstention_sessions = 0
    for record in records:
        by_id = sessions(record)
        for sid in record["answer_session_ids"]:
            assert all("has_answer" in turn for turn in by_id[sid]), sid
            flagged = any(turn["has_answer"] for turn in by_id[sid])
            if not is_abstention(record):
                assert flagged, sid
            unflagged_abstention_sessions += is_abstention(record) and not flagged
    # As upstream: an abstention question's related mention may be flagged, yet some of its
    # answer sessions hold no flagged turn at all.
    assert unflagged_abstention_sessions >= 1


def test_evidence_turns_state_the_answer_facts(records: list[dict[str, Any]]) -> None:
    answerable = {r["question_id"]: r for r in records if not is_abstention(r)}
    assert set(answerable) == set(EVIDENCE_FACTS)
    for question_id, facts in EVIDENCE_FACTS.items():
        text = "\n".join(t["content"] for t in evidence_turns(answerable[question_id]))
        for fact in facts:
            assert fact in text, f"{question_id}: {fact!r} not in its evidence turns"


def test_temporal_answers_agree_with_session_dates(records: list[dict[str, Any]]) -> None:
    by_id = {r["question_id"]: r for r in records}

    def evidence_dates(question_id: str) -> list[datetime]:
        record = by_id[question_id]
        dates = dict(zip(record["haystack_session_ids"], record["haystack_dates"], strict=True))
        return [parse_date(dates[sid]) for sid in record["answer_session_ids"]]

    dentist, eye_exam = evidence_dates("gpt4_93c1e5b7")
    assert (eye_exam.date() - dentist.date()).days == 14
    (pottery,) = evidence_dates("a5c8e1d7")
    assert (parse_date(by_id["a5c8e1d7"]["question_date"]).date() - pottery.date()).days == 42
    porto, snowdonia, kyoto = evidence_dates("gpt4_7d2b9f04")
    assert porto < snowdonia < kyoto
    tap, parents = evidence_dates("c1e7a4f3")
    assert tap < parents


def test_distractors_are_shared_with_identical_content_and_date(
    records: list[dict[str, Any]],
) -> None:
    seen: dict[str, tuple[str, str]] = {}
    uses: dict[str, int] = defaultdict(int)
    for record in records:
        for sid, date, session in zip(
            record["haystack_session_ids"],
            record["haystack_dates"],
            record["haystack_sessions"],
            strict=True,
        ):
            encoded = json.dumps(session, ensure_ascii=False)
            assert seen.setdefault(sid, (date, encoded)) == (date, encoded), sid
            uses[sid] += 1
    shared = [sid for sid, n in uses.items() if n > 1]
    assert len(shared) >= 8
    assert all(DISTRACTOR_RE.match(sid) for sid in shared)
    assert max(uses.values()) >= 5


def test_distractors_flag_false_or_omit_has_answer(records: list[dict[str, Any]]) -> None:
    modes = set()
    for record in records:
        for sid, session in sessions(record).items():
            if sid in record["answer_session_ids"]:
                continue
            assert not any(t.get("has_answer") for t in session), sid
            modes.add("omitted" if all("has_answer" not in t for t in session) else "false")
    assert modes == {"omitted", "false"}


# -- text quirks -------------------------------------------------------------------------------


def test_pipe_inside_turn_text(records: list[dict[str, Any]]) -> None:
    assert any("|" in text for text in all_turn_texts(records))
    # In evidence too: a golden's context must keep it intact.
    assert any("|" in t["content"] for r in records for t in evidence_turns(r))


def test_non_ascii_text(records: list[dict[str, Any]]) -> None:
    text = "".join(all_turn_texts(records))
    assert re.search("[À-ɏ]", text), "accented Latin"
    assert re.search("[\u3040-\u30ff\u4e00-\u9fff]", text), "CJK"
    assert re.search("[\U0001f300-\U0001faff]", text), "emoji"
    assert any(not str(r["answer"]).isascii() for r in records)
