"""Deterministic generator of LongMemEval_S-shaped input, for scale work.

The real `longmemeval_s_cleaned.json` (277 MB) cannot be downloaded here, so benchmarks and
memory tests run on a synthetic file with the same schema and the same shape:

- the upstream type mix (70/56/30/133/78/133 at 500 questions) in type blocks, with the 30
  abstention questions (`_abs` suffix only) at the end of their blocks;
- ~47 haystack sessions per question, ~10 turns per session, ~1 KB per turn on average (user
  turns short, assistant turns long, as upstream);
- evidence sessions `answer_<hex8>_<n>` whose turns all carry `has_answer`, with the answer
  fact in the flagged turn (an assistant turn for single-session-assistant);
- a shared distractor pool: ~16.5% of haystack slots repeat a session id already written, always
  with byte-identical turns and the same date (upstream: 3,942 of 23,867 slots);
- distractor sessions that either flag every turn `"has_answer": false` or omit the key;
- non-ASCII text and `|` inside turns; non-ASCII is written as `\\uXXXX` escapes, as upstream.

The file is streamed record by record: memory holds one record plus the live part of the
shared pool, never the whole array. The same arguments give a byte-identical file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# The LongMemEval_S mix at 500 questions (DESIGN.md section 3), in file (block) order.
QUESTION_TYPE_COUNTS: dict[str, int] = {
    "single-session-user": 70,
    "single-session-assistant": 56,
    "single-session-preference": 30,
    "multi-session": 133,
    "knowledge-update": 78,
    "temporal-reasoning": 133,
}
UPSTREAM_QUESTIONS = 500
UPSTREAM_ABSTENTIONS = 30
# Upstream has 30 abstention questions; how they split by type is our choice (DESIGN.md pins
# only the total), spread over the types where "not mentioned" questions make sense.
ABSTENTION_WEIGHTS: dict[str, int] = {
    "single-session-user": 6,
    "multi-session": 12,
    "knowledge-update": 6,
    "temporal-reasoning": 6,
}
UPSTREAM_REUSE_FRACTION = 3942 / 23867  # haystack slots that repeat an id, upstream S

DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
_DATE_START = datetime(2023, 1, 1, 8, 0)
_DATE_SPAN_MINUTES = 140 * 24 * 60  # sessions fall in roughly the first 20 weeks of 2023
_USES_PER_POOL_SESSION = 5  # each shared session appears in about this many haystacks
_MAX_EVIDENCE_SESSIONS = 3

# Vocabulary for filler text. The tail holds the quirks a parser must survive: non-ASCII
# (accents, CJK, emoji) and `|`, which deepeval's `save_as` would split on.
_WORDS: tuple[str, ...] = tuple(
    (
        "the a an and or but so because while after before during about around with without "
        "for from into over under between through across near far today tomorrow yesterday "
        "morning evening weekend week month year plan trip meeting garden kitchen recipe bike "
        "train book movie music concert friend sister brother parent neighbour colleague team "
        "project budget schedule weather coffee tea bread soup salad dinner lunch breakfast "
        "walk run hike swim climb paint cook read write call visit buy sell fix clean build "
        "learn practise try start finish change keep move need want like love prefer enjoy "
        "think remember forget notice suggest recommend explain compare check measure count "
        "quick slow early late small large long short warm cold quiet busy simple careful "
        "useful better best easy hard new old good great fine happy tired ready sure really "
        "maybe probably usually often sometimes always never also still already just only "
        "every each some many few most more less very quite rather pretty too enough step "
        "idea question answer reason problem option choice detail example list note tip way "
        "time place home office city station market shop park river lake coast mountain "
        "café naïve Zürich jalapeño façade über São Kraków 東京 日本語 你好 🙂 🚲 ☕ | a|b"
    ).split()
)
_THINGS = (
    "sourdough starter", "bike", "houseplant", "laptop", "kayak", "guitar", "camera",
    "allotment", "sailboat", "campervan", "fountain pen", "robot vacuum",
)  # fmt: skip
_ITEMS = (
    "paperbacks", "vinyl records", "succulents", "board games", "houseplants", "mugs",
    "running shoes", "notebooks", "tea tins", "jigsaw puzzles",
)  # fmt: skip
_TOPICS = (
    "a weekend in the mountains", "my sister's birthday", "a rainy Sunday", "a team lunch",
    "my commute", "a picnic", "a first date", "a long flight",
)  # fmt: skip
_ATTRIBUTES = (
    "gym locker number", "favourite running route", "book club day", "team name at work",
    "usual coffee order", "wifi network name", "parking spot", "dentist's name",
)  # fmt: skip
_EVENTS = (  # (as asked, as told)
    ("repaint the hallway", "repainted the hallway"),
    ("renew my passport", "renewed my passport"),
    ("run my first 10K", "ran my first 10K"),
    ("adopt the puppy", "adopted a puppy"),
    ("start the pottery class", "started a pottery class"),
    ("buy the new fridge", "bought a new fridge"),
    ("visit the aquarium", "visited the aquarium"),
    ("plant the tomatoes", "planted the tomatoes"),
    ("fix the garden gate", "fixed the garden gate"),
    ("have my eye test", "had my eye test"),
    ("join the choir", "joined a choir"),
    ("move into the new flat", "moved into the new flat"),
)
_PREFERENCES = (
    ("quiet outdoor activities", "crowded tourist spots"),
    ("vegetarian dishes with lots of spice", "anything with mushrooms"),
    ("narrative history podcasts", "true-crime shows"),
    ("handmade gifts", "gift cards"),
    ("board games for two players", "party games"),
)  # fmt: skip
_ABSTENTION_ANSWER = "The information provided is not enough."


@dataclass(frozen=True)
class GenerateStats:
    """What a generation wrote; `repeated_slots` counts slots whose id appeared before."""

    questions: int
    abstention_questions: int
    distinct_sessions: int
    haystack_slots: int
    repeated_slots: int
    bytes: int

    @property
    def repeated_fraction(self) -> float:
        return self.repeated_slots / self.haystack_slots if self.haystack_slots else 0.0


def apportion(weights: dict[str, int], total: int) -> dict[str, int]:
    """Split `total` proportionally to `weights` (largest remainder; ties go to earlier keys)."""
    weight_sum = sum(weights.values())
    exact = {key: total * w / weight_sum for key, w in weights.items()}
    counts = {key: int(value) for key, value in exact.items()}
    order = sorted(weights, key=lambda key: -(exact[key] - counts[key]))  # stable sort
    for key in order[: total - sum(counts.values())]:
        counts[key] += 1
    return counts


def question_plan(questions: int) -> list[tuple[str, bool]]:
    """(question_type, abstention) in file order: type blocks, abstention at each block end."""
    type_counts = apportion(QUESTION_TYPE_COUNTS, questions)
    abstentions = apportion(
        {"abs": UPSTREAM_ABSTENTIONS, "other": UPSTREAM_QUESTIONS - UPSTREAM_ABSTENTIONS},
        questions,
    )["abs"]
    abs_counts = apportion(ABSTENTION_WEIGHTS, abstentions)
    plan: list[tuple[str, bool]] = []
    for qtype, count in type_counts.items():
        n_abs = min(abs_counts.get(qtype, 0), count)
        plan += [(qtype, False)] * (count - n_abs) + [(qtype, True)] * n_abs
    return plan


def format_date(moment: datetime) -> str:
    """Upstream date form, e.g. "2023/05/30 (Tue) 23:40" (English weekday, C locale)."""
    return moment.strftime(DATE_FORMAT)


@dataclass
class _Slot:
    session_id: str
    date: datetime
    turns: list[dict[str, Any]] | None
    encoded: str = ""

    def encode(self) -> str:
        """The session as JSON, built once; the turn objects are then dropped.

        A shared session lives until its last use, and a Python str holding one emoji takes
        4 bytes per character: the escaped ASCII JSON is several times smaller.
        """
        if self.turns is not None:
            self.encoded = json.dumps(self.turns)  # ensure_ascii: \u escapes, as upstream
            self.turns = None
        return self.encoded


@dataclass
class _PoolSession:
    slot: _Slot
    uses_left: int


class _Generator:
    """Holds the one seeded RNG and the shared pool; yields records in file order."""

    def __init__(
        self,
        *,
        questions: int,
        sessions_per_question: int,
        turns_per_session: int,
        turn_bytes: int,
        shared_pool_fraction: float,
        seed: int,
    ) -> None:
        self.rng = random.Random(seed)
        self.sessions_per_question = sessions_per_question
        self.turns_per_session = turns_per_session
        self.turn_bytes = turn_bytes
        self.used_ids: set[str] = set()
        # Decide every question's type and evidence count up front (tiny), so the number of
        # distractor slots, and hence the pool size, is known before the first record.
        self.plan = [
            (qtype, abstention, self._evidence_count(qtype))
            for qtype, abstention in question_plan(questions)
        ]
        total_slots = len(self.plan) * sessions_per_question
        self.distractor_slots_left = total_slots - sum(n for _, _, n in self.plan)
        self.pool_tokens = self._pool_tokens(total_slots, shared_pool_fraction)
        self.pool_slots_left = len(self.pool_tokens)
        self.pool: dict[int, _PoolSession] = {}
        self.repeated_slots = 0

    # -- plan ---------------------------------------------------------------------------
    def _evidence_count(self, qtype: str) -> int:
        choices = {
            "multi-session": (2, 2, 3),
            "knowledge-update": (2, 2, 3),
            "temporal-reasoning": (1, 2, 2, 3),
        }.get(qtype, (1,))
        return self.rng.choice(choices)

    def _pool_tokens(self, total_slots: int, fraction: float) -> list[int]:
        """Shuffled pool-session indices, each repeated `_USES_PER_POOL_SESSION` times.

        A session used m times adds m - 1 repeated slots, so R repeats need R / (m - 1)
        sessions; capped by the distractor slots available.
        """
        uses = _USES_PER_POOL_SESSION
        sessions = round(fraction * total_slots / (uses - 1))
        sessions = min(sessions, self.distractor_slots_left // uses)
        tokens = [index for index in range(sessions) for _ in range(uses)]
        self.rng.shuffle(tokens)
        return tokens

    # -- ids, dates, text -----------------------------------------------------------------
    def _unique(self, make: Callable[[], str]) -> str:
        while True:
            candidate = make()
            if candidate not in self.used_ids:
                self.used_ids.add(candidate)
                return candidate

    def _hex8(self) -> str:
        return f"{self.rng.getrandbits(32):08x}"

    def _question_id(self, abstention: bool) -> str:
        prefix = "gpt4_" if self.rng.random() < 0.25 else ""
        return self._unique(lambda: f"{prefix}{self._hex8()}{'_abs' if abstention else ''}")

    def _distractor_id(self) -> str:
        if self.rng.random() < 0.5:
            alphabet = string.ascii_letters + string.digits
            return self._unique(
                lambda: (
                    f"sharegpt_{''.join(self.rng.choices(alphabet, k=7))}_{self.rng.randint(0, 3)}"
                )
            )
        return self._unique(lambda: f"ultrachat_{self.rng.randint(0, 999_999)}")

    def _date(self) -> datetime:
        return _DATE_START + timedelta(minutes=self.rng.randint(0, _DATE_SPAN_MINUTES))

    def _text(self, n_bytes: int) -> str:
        """Pseudo-random words, about `n_bytes` long, in sentences."""
        words = self.rng.choices(_WORDS, k=max(2, n_bytes // 6))
        for i in range(9, len(words) - 1, 11):
            words[i] += "."
            words[i + 1] = words[i + 1].capitalize()
        words[0] = words[0].capitalize()
        return " ".join(words) + "."

    def _turn_length(self, role: str) -> int:
        # User turns are short and assistant turns long, as upstream; the mean is turn_bytes.
        tb = self.turn_bytes
        if role == "user":
            return self.rng.randint(tb // 5, 3 * tb // 5)
        return self.rng.randint(tb, 11 * tb // 5)

    def _turns(self, flag_has_answer: bool) -> list[dict[str, Any]]:
        n_turns = max(2, self.turns_per_session + self.rng.choice((-2, 0, 0, 2)))
        turns = []
        for index in range(n_turns):
            role = "user" if index % 2 == 0 else "assistant"
            turn: dict[str, Any] = {"role": role, "content": self._text(self._turn_length(role))}
            if flag_has_answer:
                turn["has_answer"] = False
            turns.append(turn)
        return turns

    # -- sessions -------------------------------------------------------------------------
    def _fresh_distractor(self) -> _Slot:
        # Upstream is not uniform: some distractors flag every turn false, some omit the key.
        flag = self.rng.random() < 0.5
        return _Slot(self._distractor_id(), self._date(), self._turns(flag))

    def _pool_distractor(self, taken: set[str]) -> _Slot | None:
        """Next shared session not already in this haystack (None: fall back to a fresh one)."""
        token_at = len(self.pool_tokens) - 1
        for offset in range(min(64, len(self.pool_tokens))):
            index = self.pool_tokens[token_at - offset]
            entry = self.pool.get(index)
            if entry is None or entry.slot.session_id not in taken:
                self.pool_tokens[token_at - offset] = self.pool_tokens[token_at]
                self.pool_tokens.pop()
                break
        else:
            return None
        if entry is None:  # first use: this slot writes the session for the first time
            entry = _PoolSession(self._fresh_distractor(), _USES_PER_POOL_SESSION)
            entry.slot.encode()  # frozen now: every use writes the same bytes
            self.pool[index] = entry
        else:
            self.repeated_slots += 1
        entry.uses_left -= 1
        if entry.uses_left == 0:
            del self.pool[index]  # last use: free it, so the pool stays small
        return entry.slot

    def _distractors(self, count: int, taken: set[str]) -> list[_Slot]:
        slots = []
        for _ in range(count):
            # Selection sampling: exactly len(pool_tokens) of all distractor slots are shared.
            use_pool = self.rng.random() * self.distractor_slots_left < self.pool_slots_left
            self.distractor_slots_left -= 1
            slot = None
            if use_pool:
                self.pool_slots_left -= 1
                slot = self._pool_distractor(taken)
            slot = slot or self._fresh_distractor()
            taken.add(slot.session_id)
            slots.append(slot)
        return slots

    def _evidence_sessions(
        self, count: int, abstention: bool, turn_parity: int
    ) -> tuple[list[_Slot], list[int]]:
        """Evidence sessions (dates ascending) and, per session, the turn meant for the fact."""
        # A unique stem makes every `<stem>_<n>` unique: no other id starts with "answer_".
        suffix = "_abs" if abstention else ""
        stem = self._unique(lambda: f"answer_{self._hex8()}{suffix}")
        dates = sorted(self._date() for _ in range(count))
        slots, fact_turns = [], []
        for n, date in enumerate(dates, start=1):
            session_id = f"{stem}_{n}"
            turns = self._turns(flag_has_answer=True)
            candidates = [i for i in range(len(turns)) if i % 2 == turn_parity]
            slots.append(_Slot(session_id, date, turns))
            fact_turns.append(self.rng.choice(candidates))
        return slots, fact_turns

    def _plant(self, slot: _Slot, turn_index: int, fact: str, flagged: bool = True) -> None:
        """Put `fact` in the middle of a turn; flag it as upstream flags evidence turns."""
        assert slot.turns is not None, "evidence is encoded only when its record is written"
        turn = slot.turns[turn_index]
        half = self._turn_length(turn["role"]) // 2
        turn["content"] = f"{self._text(half)} {fact} {self._text(half)}"
        turn["has_answer"] = flagged

    # -- questions ------------------------------------------------------------------------
    def _facts(
        self, qtype: str, slots: list[_Slot], question_date: datetime
    ) -> tuple[str, Any, list[str]]:
        """(question, answer, one fact sentence per evidence session) for an answerable one."""
        rng = self.rng
        value = f"{rng.choice(_WORDS).capitalize()} {self._hex8()[:4].upper()}"
        if qtype == "single-session-user":
            if rng.random() < 0.3:
                items, n = rng.choice(_ITEMS), rng.randint(2, 40)
                return f"How many {items} do I own?", n, [f"I own {n} {items} now."]
            thing = rng.choice(_THINGS)
            return f"What did I name my {thing}?", value, [f"I named my {thing} {value}."]
        if qtype == "single-session-assistant":
            topic = rng.choice(_TOPICS)
            return (
                f"What did you recommend when I asked you about {topic}?",
                value,
                [f"For {topic}, I recommend {value} | it fits what you described."],
            )
        if qtype == "single-session-preference":
            topic = rng.choice(_TOPICS)
            likes, dislikes = rng.choice(_PREFERENCES)
            return (
                f"Can you suggest something for {topic}?",
                f"The user would prefer suggestions of {likes} for {topic}. "
                f"They would not prefer {dislikes}.",
                [f"For {topic} I always go for {likes}, and I really dislike {dislikes}."],
            )
        if qtype == "multi-session":
            items = rng.choice(_ITEMS)
            bought = [rng.randint(1, 9) for _ in slots]
            facts = [f"Today I bought {k} {items}." for k in bought]
            return f"How many {items} have I bought in total?", sum(bought), facts
        if qtype == "knowledge-update":
            attribute = rng.choice(_ATTRIBUTES)
            values = [f"{value}-{n}" for n in range(len(slots))]
            facts = [f"My {attribute} is {values[0]}."]
            facts += [f"Update: my {attribute} changed, it is now {v}." for v in values[1:]]
            return f"What is my current {attribute}?", values[-1], facts
        return self._temporal_facts(slots, question_date)

    def _temporal_facts(
        self, slots: list[_Slot], question_date: datetime
    ) -> tuple[str, Any, list[str]]:
        events = self.rng.sample(_EVENTS, len(slots))
        facts = [f"Today I {told}." for _, told in events]
        if len(slots) == 1:
            days = (question_date.date() - slots[0].date.date()).days
            return f"How many days ago did I {events[0][0]}?", f"{days} days ago", facts
        if len(slots) == 2:
            days = (slots[1].date.date() - slots[0].date.date()).days
            question = f"How many days passed between the day I {events[0][0]} and the day I "
            return question + f"{events[1][0]}?", f"{days} days", facts
        asked = [asked for asked, _ in self.rng.sample(events, len(events))]
        return (
            f"In what order did I do these: {'; '.join(asked)}?",
            ", then ".join(told for _, told in events),
            facts,
        )

    def _record(self, qtype: str, abstention: bool, n_evidence: int) -> str:
        """One record, encoded: `json.dumps(record)` byte for byte, sessions encoded once."""
        question_id = self._question_id(abstention)
        parity = 1 if qtype == "single-session-assistant" else 0  # assistant-side evidence
        evidence, fact_turns = self._evidence_sessions(n_evidence, abstention, parity)
        taken = {slot.session_id for slot in evidence}
        haystack = evidence + self._distractors(self.sessions_per_question - n_evidence, taken)
        haystack.sort(key=lambda slot: slot.date)  # stable: ties keep their order
        latest = haystack[-1].date
        question_date = latest + timedelta(minutes=self.rng.randint(60, 14 * 24 * 60))
        if abstention:
            question, answer = self._abstention(evidence, fact_turns)
        else:
            question, answer, facts = self._facts(qtype, evidence, question_date)
            for slot, turn_index, fact in zip(evidence, fact_turns, facts, strict=True):
                self._plant(slot, turn_index, fact)
        fields = [  # upstream key order
            ("question_id", json.dumps(question_id)),
            ("question_type", json.dumps(qtype)),
            ("question", json.dumps(question)),
            ("answer", json.dumps(answer)),
            ("question_date", json.dumps(format_date(question_date))),
            ("haystack_dates", json.dumps([format_date(slot.date) for slot in haystack])),
            ("haystack_session_ids", json.dumps([slot.session_id for slot in haystack])),
            ("haystack_sessions", "[" + ", ".join(slot.encode() for slot in haystack) + "]"),
            ("answer_session_ids", json.dumps([slot.session_id for slot in evidence])),
        ]
        return "{" + ", ".join(f'"{key}": {value}' for key, value in fields) + "}"

    def _abstention(self, evidence: list[_Slot], fact_turns: list[int]) -> tuple[str, str]:
        """Ask about something never said; the haystack mentions a related thing instead.

        Like upstream, the related mention in the first evidence session is flagged
        `has_answer`, the other evidence sessions carry no flagged turn.
        """
        thing, other = self.rng.sample(_THINGS, 2)
        name = f"{self.rng.choice(_WORDS).capitalize()} {self._hex8()[:4].upper()}"
        self._plant(evidence[0], fact_turns[0], f"I named my {thing} {name}.")
        for slot, turn_index in zip(evidence[1:], fact_turns[1:], strict=True):
            self._plant(slot, turn_index, f"My {thing} is doing fine.", flagged=False)
        answer = f"{_ABSTENTION_ANSWER} You mentioned your {thing}, but not your {other}."
        return f"What did I name my {other}?", answer

    def records(self) -> Iterator[str]:
        """Encoded records in file order."""
        for qtype, abstention, n_evidence in self.plan:
            yield self._record(qtype, abstention, n_evidence)


def _check_arguments(
    questions: int, sessions_per_question: int, turns_per_session: int, turn_bytes: int, f: float
) -> None:
    if questions < 1:
        raise ValueError(f"questions must be >= 1, got {questions}")
    if sessions_per_question < _MAX_EVIDENCE_SESSIONS + 1:
        raise ValueError(
            f"sessions_per_question must be >= {_MAX_EVIDENCE_SESSIONS + 1} "
            f"(room for evidence and a distractor), got {sessions_per_question}"
        )
    if turns_per_session < 2:
        raise ValueError(f"turns_per_session must be >= 2, got {turns_per_session}")
    if turn_bytes < 20:
        raise ValueError(f"turn_bytes must be >= 20, got {turn_bytes}")
    if not 0.0 <= f < 0.8:
        raise ValueError(f"shared_pool_fraction must be in [0, 0.8), got {f}")


def generate(
    path: str | os.PathLike[str],
    *,
    questions: int = UPSTREAM_QUESTIONS,
    sessions_per_question: int = 47,
    turns_per_session: int = 10,
    turn_bytes: int = 1000,
    shared_pool_fraction: float = UPSTREAM_REUSE_FRACTION,
    seed: int = 0,
) -> GenerateStats:
    """Stream a LongMemEval_S-shaped JSON array to `path` (atomically) and return its stats."""
    _check_arguments(
        questions, sessions_per_question, turns_per_session, turn_bytes, shared_pool_fraction
    )
    generator = _Generator(
        questions=questions,
        sessions_per_question=sessions_per_question,
        turns_per_session=turns_per_session,
        turn_bytes=turn_bytes,
        shared_pool_fraction=shared_pool_fraction,
        seed=seed,
    )
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as out:
            out.write("[")
            for i, record in enumerate(generator.records()):
                out.write("\n" if i == 0 else ",\n")  # one record per line
                out.write(record)
            out.write("\n]\n")
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)  # never leave a half-written file behind
        raise
    slots = len(generator.plan) * sessions_per_question
    return GenerateStats(
        questions=len(generator.plan),
        abstention_questions=sum(abstention for _, abstention, _ in generator.plan),
        distinct_sessions=slots - generator.repeated_slots,
        haystack_slots=slots,
        repeated_slots=generator.repeated_slots,
        bytes=target.stat().st_size,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipeline.corpus.generate",
        description="Write a deterministic LongMemEval_S-shaped JSON file for scale work.",
    )
    parser.add_argument("out", type=Path, help="output JSON path")
    parser.add_argument("--questions", type=int, default=UPSTREAM_QUESTIONS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sessions-per-question", type=int, default=47)
    parser.add_argument("--turns-per-session", type=int, default=10)
    parser.add_argument("--turn-bytes", type=int, default=1000)
    parser.add_argument("--shared-pool-fraction", type=float, default=UPSTREAM_REUSE_FRACTION)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        stats = generate(
            args.out,
            questions=args.questions,
            sessions_per_question=args.sessions_per_question,
            turns_per_session=args.turns_per_session,
            turn_bytes=args.turn_bytes,
            shared_pool_fraction=args.shared_pool_fraction,
            seed=args.seed,
        )
    except (ValueError, OSError) as error:
        print(f"generate: {error}", file=sys.stderr)
        return 2
    report = asdict(stats) | {
        "repeated_fraction": round(stats.repeated_fraction, 4),
        "seconds": round(time.perf_counter() - started, 2),
        "path": str(args.out),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
