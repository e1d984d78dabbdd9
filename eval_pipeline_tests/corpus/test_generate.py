"""The synthetic LongMemEval_S generator: deterministic, upstream-shaped, streamed.

Generations here are small (short turns, few sessions) so the suite stays fast; the full
500 x 47 x 10 x 1 KB run is the benchmark's job.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tracemalloc
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.corpus.generate import (
    QUESTION_TYPE_COUNTS,
    UPSTREAM_REUSE_FRACTION,
    GenerateStats,
    apportion,
    generate,
    main,
    question_plan,
)
from eval_pipeline.corpus.longmemeval import UPSTREAM_FIELDS

RECORD_KEYS = list(UPSTREAM_FIELDS)
TYPES = list(QUESTION_TYPE_COUNTS)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DATE_RE = re.compile(r"^(\d{4}/\d{2}/\d{2}) \((\w{3})\) (\d{2}:\d{2})$")
QUESTION_ID_RE = re.compile(r"^(gpt4_)?[0-9a-f]{8}(_abs)?$")
ANSWER_SESSION_RE = re.compile(r"^answer_[0-9a-f]{8}(_abs)?_[1-3]$")
DISTRACTOR_RE = re.compile(r"^(sharegpt_[A-Za-z0-9]{7}_\d|ultrachat_\d{1,6})$")
SMALL = {"sessions_per_question": 12, "turns_per_session": 4, "turn_bytes": 120}


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)


def parse_date(text: str) -> datetime:
    match = DATE_RE.match(text)
    assert match, f"bad date {text!r}"
    moment = datetime.strptime(f"{match[1]} {match[3]}", "%Y/%m/%d %H:%M")
    assert match[2] == WEEKDAYS[moment.weekday()], text
    return moment


def is_abstention(record: dict[str, Any]) -> bool:
    return record["question_id"].endswith("_abs")


def slots(records: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    return [
        slot
        for r in records
        for slot in zip(
            r["haystack_session_ids"], r["haystack_dates"], r["haystack_sessions"], strict=True
        )
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GenerateStats]:
    path = tmp_path_factory.mktemp("gen") / "small.json"
    return path, generate(path, questions=60, seed=7, **SMALL)


@pytest.fixture(scope="module")
def small_records(small: tuple[Path, GenerateStats]) -> list[dict[str, Any]]:
    return load(small[0])


# -- determinism and file form -----------------------------------------------------------------


def test_same_seed_gives_byte_identical_file(tmp_path: Path) -> None:
    first, second, other = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    assert generate(first, questions=25, seed=3, **SMALL) == generate(
        second, questions=25, seed=3, **SMALL
    )
    generate(other, questions=25, seed=4, **SMALL)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()


def test_file_is_ascii_json_like_upstream(small: tuple[Path, GenerateStats]) -> None:
    raw = small[0].read_bytes()
    assert raw.isascii()  # non-ASCII is \u-escaped, as in the real upstream file
    assert raw.startswith(b"[") and raw.endswith(b"]\n")
    assert not list(small[0].parent.glob("*.partial"))


def test_stats_describe_the_file(
    small: tuple[Path, GenerateStats], small_records: list[dict[str, Any]]
) -> None:
    path, stats = small
    all_slots = slots(small_records)
    distinct = {session_id for session_id, _, _ in all_slots}
    assert stats.bytes == path.stat().st_size
    assert stats.questions == len(small_records) == 60
    assert stats.abstention_questions == sum(map(is_abstention, small_records))
    assert stats.haystack_slots == len(all_slots) == 60 * SMALL["sessions_per_question"]
    assert stats.distinct_sessions == len(distinct)
    assert stats.repeated_slots == len(all_slots) - len(distinct)


# -- schema ------------------------------------------------------------------------------------


def test_records_have_upstream_schema(small_records: list[dict[str, Any]]) -> None:
    for record in small_records:
        assert list(record) == RECORD_KEYS
        assert QUESTION_ID_RE.match(record["question_id"])
        assert record["question_type"] in TYPES
        assert isinstance(record["question"], str) and record["question"]
        assert isinstance(record["answer"], str | int) and not isinstance(record["answer"], bool)
        ids = record["haystack_session_ids"]
        assert len(ids) == len(record["haystack_dates"]) == len(record["haystack_sessions"])
        assert len(ids) == SMALL["sessions_per_question"] and len(set(ids)) == len(ids)
        assert set(record["answer_session_ids"]) <= set(ids)
        for session_id in ids:
            is_answer = session_id in record["answer_session_ids"]
            assert (ANSWER_SESSION_RE if is_answer else DISTRACTOR_RE).match(session_id)


def test_turns_alternate_and_flag_like_upstream(small_records: list[dict[str, Any]]) -> None:
    distractor_forms = set()
    for record in small_records:
        for session_id, session in zip(
            record["haystack_session_ids"], record["haystack_sessions"], strict=True
        ):
            assert len(session) >= 2
            for index, turn in enumerate(session):
                assert turn["role"] == ("user" if index % 2 == 0 else "assistant")
                assert list(turn) in (["role", "content"], ["role", "content", "has_answer"])
            if session_id in record["answer_session_ids"]:
                assert all("has_answer" in turn for turn in session)
            else:
                assert not any(turn.get("has_answer") for turn in session)
                distractor_forms.add("has_answer" in session[0])
    assert distractor_forms == {True, False}  # both "false on every turn" and "omitted"


def test_dates_ascend_have_weekdays_and_precede_question(
    small_records: list[dict[str, Any]],
) -> None:
    for record in small_records:
        dates = [parse_date(text) for text in record["haystack_dates"]]
        assert dates == sorted(dates)
        assert dates[-1] < parse_date(record["question_date"])


def test_text_has_pipes_and_non_ascii(small_records: list[dict[str, Any]]) -> None:
    text = "".join(t["content"] for _, _, session in slots(small_records) for t in session)
    assert "|" in text
    assert not text.isascii()
    assert re.search("[\u4e00-\u9fff]", text) and re.search("[\U0001f300-\U0001faff]", text)


# -- question mix --------------------------------------------------------------------------------


def test_full_size_mix_matches_upstream(tmp_path: Path) -> None:
    path = tmp_path / "mix.json"
    stats = generate(
        path, questions=500, sessions_per_question=4, turns_per_session=2, turn_bytes=20
    )
    records = load(path)
    assert Counter(r["question_type"] for r in records) == QUESTION_TYPE_COUNTS
    assert stats.abstention_questions == sum(map(is_abstention, records)) == 30
    assert_type_blocks_with_abstention_last(records)


@pytest.mark.parametrize("questions", [1, 7, 30, 60, 123])
def test_smaller_mixes_are_proportional(questions: int) -> None:
    plan = question_plan(questions)
    assert len(plan) == questions
    counts = Counter(qtype for qtype, _ in plan)
    for qtype, upstream in QUESTION_TYPE_COUNTS.items():
        assert abs(counts[qtype] - upstream * questions / 500) < 1, qtype
    assert abs(sum(abstention for _, abstention in plan) - 30 * questions / 500) < 1


def test_small_generation_mix(small_records: list[dict[str, Any]]) -> None:
    counts = Counter(r["question_type"] for r in small_records)
    assert counts == Counter(apportion(QUESTION_TYPE_COUNTS, 60))
    assert sum(map(is_abstention, small_records)) == 4  # 30 * 60 / 500 = 3.6
    assert_type_blocks_with_abstention_last(small_records)


def assert_type_blocks_with_abstention_last(records: list[dict[str, Any]]) -> None:
    order = [r["question_type"] for r in records]
    blocks = [qtype for i, qtype in enumerate(order) if i == 0 or order[i - 1] != qtype]
    assert blocks == [t for t in TYPES if t in order]
    flags: dict[str, list[bool]] = defaultdict(list)
    for record in records:
        flags[record["question_type"]].append(is_abstention(record))
    for qtype, block in flags.items():
        assert block == sorted(block), f"{qtype}: abstention not at the end of its block"


# -- evidence ------------------------------------------------------------------------------------


def evidence(record: dict[str, Any]) -> list[list[dict[str, Any]]]:
    by_id = dict(zip(record["haystack_session_ids"], record["haystack_sessions"], strict=True))
    return [[t for t in by_id[sid] if t.get("has_answer")] for sid in record["answer_session_ids"]]


def test_every_answerable_question_has_flagged_evidence(
    small_records: list[dict[str, Any]],
) -> None:
    for record in small_records:
        flagged = evidence(record)
        if is_abstention(record):
            assert flagged[0] and not any(flagged[1:])  # upstream's abstention pattern
            assert record["answer"].startswith("The information provided is not enough.")
            continue
        assert all(flagged), record["question_id"]
        roles = {t["role"] for session in flagged for t in session}
        is_assistant_type = record["question_type"] == "single-session-assistant"
        assert roles == ({"assistant"} if is_assistant_type else {"user"})


def test_evidence_states_the_answer(small_records: list[dict[str, Any]]) -> None:
    evidence_counts = Counter()
    for record in small_records:
        qtype, answer = record["question_type"], record["answer"]
        evidence_counts[qtype, len(record["answer_session_ids"])] += 1
        if is_abstention(record):
            continue
        text = " ".join(t["content"] for session in evidence(record) for t in session)
        if qtype in ("single-session-user", "single-session-assistant", "knowledge-update"):
            assert str(answer) in text, record["question_id"]
        elif qtype == "single-session-preference":
            assert answer.startswith("The user would prefer ")
        elif qtype == "multi-session":
            bought = re.findall(r"Today I bought (\d+) ", text)
            assert answer == sum(map(int, bought)) and len(bought) >= 2
        elif len(record["answer_session_ids"]) == 2:
            dates = dict(zip(record["haystack_session_ids"], record["haystack_dates"], strict=True))
            first, second = (parse_date(dates[s]) for s in record["answer_session_ids"])
            assert answer == f"{(second.date() - first.date()).days} days"
    assert any(n >= 2 for (qtype, n) in evidence_counts if qtype == "multi-session")


# -- shared pool ---------------------------------------------------------------------------------


def test_reuse_fraction_near_upstream(tmp_path: Path) -> None:
    path = tmp_path / "reuse.json"
    stats = generate(
        path, questions=100, sessions_per_question=30, turns_per_session=2, turn_bytes=20
    )
    assert abs(stats.repeated_fraction - UPSTREAM_REUSE_FRACTION) < 0.02
    zero = generate(
        tmp_path / "none.json",
        questions=20,
        sessions_per_question=10,
        turns_per_session=2,
        turn_bytes=20,
        shared_pool_fraction=0.0,
    )
    assert zero.repeated_slots == 0


def test_shared_sessions_are_identical_everywhere(small_records: list[dict[str, Any]]) -> None:
    seen: dict[str, tuple[str, str]] = {}
    uses: Counter[str] = Counter()
    for session_id, date, session in slots(small_records):
        form = (date, json.dumps(session))
        assert seen.setdefault(session_id, form) == form, session_id
        uses[session_id] += 1
    shared = [session_id for session_id, n in uses.items() if n > 1]
    assert shared and all(DISTRACTOR_RE.match(session_id) for session_id in shared)


# -- streaming, errors, CLI ----------------------------------------------------------------------


def traced_peak(path: Path, questions: int) -> tuple[int, GenerateStats]:
    tracemalloc.start()
    try:
        stats = generate(path, questions=questions, turn_bytes=300)
        return tracemalloc.get_traced_memory()[1], stats
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    small_peak, _ = traced_peak(tmp_path / "small.json", 10)
    peak, stats = traced_peak(tmp_path / "large.json", 40)
    # Four times the records: only the live part of the shared pool may add memory.
    assert peak < 1.5 * small_peak, (small_peak, peak)
    assert peak < stats.bytes / 4, f"peak {peak} for a {stats.bytes}-byte file"


def test_records_are_plain_json_dumps_one_per_line(small: tuple[Path, GenerateStats]) -> None:
    lines = small[0].read_text(encoding="ascii").split("\n")
    assert lines[0] == "[" and lines[-2:] == ["]", ""]
    for line in lines[1:-2]:
        record = line.removesuffix(",")
        assert json.dumps(json.loads(record)) == record


@pytest.mark.parametrize(
    "bad",
    [
        {"questions": 0},
        {"sessions_per_question": 3},
        {"turns_per_session": 1},
        {"turn_bytes": 5},
        {"shared_pool_fraction": 0.9},
    ],
)
def test_bad_arguments_write_nothing(tmp_path: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        generate(tmp_path / "out.json", **bad)
    assert not list(tmp_path.iterdir())


def test_cli_main_writes_file_and_prints_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cli.json"
    argv = [str(path), "--questions", "12", "--seed", "5", "--sessions-per-question", "6"]
    assert main([*argv, "--turns-per-session", "2", "--turn-bytes", "40"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 12 and report["bytes"] == path.stat().st_size
    assert len(load(path)) == 12
    assert main([str(tmp_path / "bad.json"), "--questions", "0"]) == 2


def test_module_entry_point(tmp_path: Path) -> None:
    path = tmp_path / "module.json"
    command = [sys.executable, "-m", "eval_pipeline.corpus.generate", str(path)]
    command += ["--questions", "6", "--seed", "1", "--turn-bytes", "40"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(done.stdout)["questions"] == 6
    assert [r["question_type"] for r in load(path)][0] == "single-session-user"
