"""Tier-2 contracts: the synthetic company (universe) and the authored scenarios.

Two layers of checks, both reported as `Issue(file, scenario, field, message)`:
- pydantic models check each object's shape and field-local rules (types, patterns, weights
  summing to 100);
- `scenario_issues` checks what needs the universe or several fields at once (unknown event
  ids, must_cite inside the signal, COMBO dimensions, question dates after the events...);
  `expectations.ingestion_issues`, what needs the turns as injected.

Every message names the file, the scenario (or event) id and the field, so an author can fix
a YAML file without reading this code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from eval_pipeline.corpus.models import SESSION_ID_PATTERN

USE_CASES = ("PREF", "INFRA", "TIME", "BUG", "COMBO")
DIMENSIONS = ("PREF", "INFRA", "TIME", "BUG")  # what a COMBO scenario combines
DIFFICULTIES = ("easy", "medium", "hard", "adversarial")
SOURCES = ("pull_request", "issue", "chat_thread", "deploy", "alert", "doc")
ADVERSARIAL_KINDS = ("conflicting_facts", "out_of_order", "near_duplicate")

UseCase = Literal["PREF", "INFRA", "TIME", "BUG", "COMBO"]
Dimension = Literal["PREF", "INFRA", "TIME", "BUG"]
Difficulty = Literal["easy", "medium", "hard", "adversarial"]
Source = Literal["pull_request", "issue", "chat_thread", "deploy", "alert", "doc"]
AdversarialKind = Literal["conflicting_facts", "out_of_order", "near_duplicate"]

# Event ids become session ids. The `acme-` prefix keeps them apart from LongMemEval's ids
# when both tiers share one graph; hyphen-separated lower case fits SESSION_ID_PATTERN.
EVENT_ID_PATTERN = r"^acme-[a-z0-9]+(-[a-z0-9]+)*$"
SCENARIO_ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
HANDLE_PATTERN = r"^[a-z][a-z0-9._-]*$"
_DURATION = re.compile(r"^(\d+)([mhd])$")
_DURATION_UNITS = {"m": "minutes", "h": "hours", "d": "days"}

_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def parse_duration(value: str) -> timedelta:
    """`"90m"`, `"6h"`, `"2d"` → timedelta (used for a question's `ask_after`)."""
    m = _DURATION.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a duration like '90m', '6h' or '2d'")
    return timedelta(**{_DURATION_UNITS[m.group(2)]: int(m.group(1))})


def _whole_minute_naive(value: datetime) -> datetime:
    # The session date is written in upstream form, "YYYY/MM/DD (Ddd) HH:MM": a timestamp
    # finer than a minute or with a zone could not round-trip through it.
    if value.tzinfo is not None:
        raise ValueError("must be a naive ISO timestamp (no zone), like 2024-03-05T10:12:00")
    if value.second or value.microsecond:
        raise ValueError("must fall on a whole minute (the session date has minute resolution)")
    return value


# --------------------------------------------------------------------------------------------
# Universe


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Person(_Strict):
    handle: str = Field(pattern=HANDLE_PATTERN)
    name: str = Field(min_length=1)
    team: str  # the team at the start of the timeline; events may record later moves


class Team(_Strict):
    id: str = Field(pattern=SCENARIO_ID_PATTERN)
    name: str = Field(min_length=1)
    pagerduty: str | None = None


class Service(_Strict):
    id: str = Field(pattern=SCENARIO_ID_PATTERN)
    repo: str = Field(min_length=1)
    team: str
    language: str = Field(min_length=1)
    description: str = ""


class Environment(_Strict):
    id: str = Field(pattern=SCENARIO_ID_PATTERN)
    cluster: str
    region: str


class Company(_Strict):
    """The directory behind the events. It is reference data for authors and validation;
    it is never injected (only events are), so nothing here can leak an answer."""

    name: str = Field(min_length=1)
    teams: list[Team] = Field(min_length=1)
    people: list[Person] = Field(min_length=1)
    bots: list[str] = Field(default_factory=list)
    services: list[Service] = Field(default_factory=list)
    environments: list[Environment] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> Company:
        teams = {t.id for t in self.teams}
        for p in self.people:
            if p.team not in teams:
                raise ValueError(f"person {p.handle!r}: unknown team {p.team!r}")
        for s in self.services:
            if s.team not in teams:
                raise ValueError(f"service {s.id!r}: unknown team {s.team!r}")
        return self

    @property
    def authors(self) -> set[str]:
        return {p.handle for p in self.people} | set(self.bots)


class Message(_Strict):
    author: str = Field(pattern=HANDLE_PATTERN)
    text: str = Field(min_length=1)


class Event(_Strict):
    """One source event. It becomes one session; each message becomes one turn."""

    id: str = Field(pattern=EVENT_ID_PATTERN, max_length=128)
    source: Source
    timestamp: datetime
    service: str | None = None
    title: str | None = None
    messages: list[Message] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _single_text_shorthand(cls, data: Any) -> Any:
        # `author` + `text` is shorthand for a one-message event (deploys, alerts, most docs).
        if isinstance(data, dict) and ("text" in data or "author" in data):
            if "messages" in data:
                raise ValueError("give either author + text or messages, not both")
            data = dict(data)
            data["messages"] = [
                {"author": data.pop("author", None), "text": data.pop("text", None)}
            ]
        return data

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: datetime) -> datetime:
        return _whole_minute_naive(value)


# --------------------------------------------------------------------------------------------
# Scenarios


class SignalRef(_Strict):
    """A signal event, optionally narrowed to the turns that carry the answer."""

    event: str
    turns: list[int] | None = None  # 0-based message indexes; None = every turn

    @field_validator("turns")
    @classmethod
    def _turns(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if not value:
                raise ValueError("leave turns out for every turn; an empty list selects none")
            if any(i < 0 for i in value) or len(set(value)) != len(value):
                raise ValueError("turn indexes must be distinct and >= 0")
        return value


class Criterion(_Strict):
    criterion: str = Field(min_length=1)
    weight: int = Field(gt=0, le=100)


class Question(_Strict):
    ask: str = Field(min_length=1)
    expected: str = Field(min_length=1)
    # When the question is asked: `asked_at` (absolute) or `ask_after` (relative to the
    # latest event of the haystack); default one day after it.
    asked_at: datetime | None = None
    ask_after: str | None = None
    abstention: bool = False  # the haystack does not hold the answer; saying so is right
    evidence: list[str] | None = None  # signal event ids this question needs; None = all
    must_cite: list[str] | None = None  # None = scenario must_cite within `evidence`

    @field_validator("asked_at")
    @classmethod
    def _asked_at(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _whole_minute_naive(value)

    @field_validator("ask_after")
    @classmethod
    def _ask_after(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @model_validator(mode="after")
    def _one_time(self) -> Question:
        if self.asked_at is not None and self.ask_after is not None:
            raise ValueError("give asked_at or ask_after, not both")
        return self


class Claim(_Strict):
    """A claim the memory should (or should not) hold: every term in one memory text."""

    claim: str = Field(min_length=1)  # what it says, for the report
    terms: list[str] = Field(min_length=1)

    @field_validator("terms")
    @classmethod
    def _terms(cls, value: list[str]) -> list[str]:
        if any(not t.strip() for t in value):
            raise ValueError("a term is empty")
        return value


class Scenario(_Strict):
    id: str = Field(pattern=SCENARIO_ID_PATTERN, max_length=64)
    use_case: UseCase
    difficulty: Difficulty
    dimensions: list[Dimension] = Field(default_factory=list)  # COMBO only, >= 2
    adversarial: list[AdversarialKind] = Field(default_factory=list)  # adversarial only
    source_mix: list[Source] = Field(min_length=1)  # the sources of the signal events
    light: bool = False
    summary: str = Field(min_length=1)  # what the scenario tests and why it is hard
    signal: list[SignalRef] = Field(min_length=1)
    distractors: list[str] = Field(default_factory=list)
    arrival: list[str] | None = None  # injection order when it differs from event time
    must_cite: list[str] = Field(min_length=1)
    must_not_cite: list[str] = Field(default_factory=list)
    questions: list[Question] = Field(min_length=1)
    criteria: list[Criterion] = Field(min_length=1)
    # The ingestion axis (`tier2.ingestion`): what the memory should hold after
    # reconciliation, and what it should not hold as current.
    expected_entities: list[str] = Field(default_factory=list)
    expected_claims: list[Claim] = Field(default_factory=list)
    forbidden_claims: list[Claim] = Field(default_factory=list)
    # The weighted score it must reach (`tier2.pass_criteria.DEFAULT_PASS_SCORE` if None).
    pass_score: float | None = Field(default=None, ge=0, le=100)

    _source_file: str = PrivateAttr(default="")

    @field_validator("signal", mode="before")
    @classmethod
    def _signal_shorthand(cls, value: Any) -> Any:
        # A bare event id means "every turn of that event".
        if isinstance(value, list):
            return [{"event": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("criteria")
    @classmethod
    def _weights(cls, value: list[Criterion]) -> list[Criterion]:
        total = sum(c.weight for c in value)
        if total != 100:
            weights = " + ".join(str(c.weight) for c in value)
            raise ValueError(f"weights must sum to 100, got {weights} = {total}")
        return value

    @property
    def source_file(self) -> str:
        return self._source_file

    @property
    def signal_ids(self) -> list[str]:
        return [s.event for s in self.signal]

    @property
    def haystack_ids(self) -> list[str]:
        """Signal then distractors, in authored order (see `convert.haystack_order`)."""
        return self.signal_ids + self.distractors


# --------------------------------------------------------------------------------------------
# Errors


@dataclass(frozen=True)
class Issue:
    file: str
    scenario: str  # scenario id, event id, or "-" for file-level problems
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.scenario}: field {self.field!r}: {self.message}"


class Tier2SchemaError(ValueError):
    """One or more issues in the tier-2 YAML; the message lists each on its own line."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = list(issues)
        lines = "\n".join(f"  {i}" for i in self.issues)
        super().__init__(f"tier-2 corpus invalid ({len(self.issues)} issue(s)):\n{lines}")


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(object)"


def validation_issues(exc: ValidationError, file: str, owner: str) -> list[Issue]:
    """Flatten pydantic errors into Issues with a readable field path."""
    issues = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if p not in ("function-after", "function-before"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (typo?)"
        elif err["type"] == "missing":
            msg = "required field is missing"
        issues.append(Issue(file, owner, _loc(loc), msg))
    return issues


# --------------------------------------------------------------------------------------------
# Cross-checks that need the universe


class Universe:
    """The company directory plus every event, by id."""

    def __init__(self, company: Company, events: dict[str, Event]) -> None:
        self.company = company
        self.events = events

    def __contains__(self, event_id: object) -> bool:
        return event_id in self.events

    def __getitem__(self, event_id: str) -> Event:
        return self.events[event_id]


def event_issues(event: Event, company: Company, file: str) -> list[Issue]:
    issues = []
    owner = f"event {event.id!r}"
    if not _SESSION_ID.match(event.id):
        issues.append(Issue(file, owner, "id", f"not a valid session id {SESSION_ID_PATTERN}"))
    if event.service is not None and event.service not in {s.id for s in company.services}:
        issues.append(Issue(file, owner, "service", f"unknown service {event.service!r}"))
    for i, m in enumerate(event.messages):
        if m.author not in company.authors:
            issues.append(
                Issue(
                    file,
                    owner,
                    f"messages[{i}].author",
                    f"unknown author {m.author!r}: add them to company.yaml people or bots",
                )
            )
    return issues


def _chronological(ids: list[str], universe: Universe) -> bool:
    times = [universe[i].timestamp for i in ids]
    return all(a <= b for a, b in zip(times, times[1:], strict=False))


def question_evidence(scenario: Scenario, question: Question) -> list[SignalRef]:
    """The signal refs one question is answered from."""
    if question.evidence is None:
        return list(scenario.signal)
    wanted = set(question.evidence)
    return [s for s in scenario.signal if s.event in wanted]


def question_must_cite(scenario: Scenario, question: Question) -> list[str]:
    if question.must_cite is not None:
        return list(question.must_cite)
    if question.evidence is None:
        return list(scenario.must_cite)
    return [e for e in scenario.must_cite if e in set(question.evidence)]


def scenario_issues(scenario: Scenario, universe: Universe) -> list[Issue]:
    """Everything a single scenario can get wrong beyond its shape."""
    file, sid = scenario.source_file, scenario.id
    out: list[Issue] = []

    def bad(fld: str, msg: str) -> None:
        out.append(Issue(file, sid, fld, msg))

    # Use case, dimensions, difficulty.
    if scenario.use_case == "COMBO":
        if len(set(scenario.dimensions)) < 2:
            bad(
                "dimensions",
                f"a COMBO scenario lists at least 2 distinct dimensions of {DIMENSIONS}, "
                f"got {scenario.dimensions}",
            )
    elif scenario.dimensions:
        bad("dimensions", f"only COMBO scenarios list dimensions (use case {scenario.use_case})")
    if len(set(scenario.dimensions)) != len(scenario.dimensions):
        bad("dimensions", "a dimension is listed twice")
    if scenario.difficulty == "adversarial":
        if not scenario.adversarial:
            bad("adversarial", f"an adversarial scenario names its kinds: {ADVERSARIAL_KINDS}")
    elif scenario.adversarial:
        bad("adversarial", f"only adversarial scenarios list kinds ({scenario.difficulty})")

    # Every id exists, and appears once.
    unknown = False
    for fld, ids in (
        ("signal", scenario.signal_ids),
        ("distractors", scenario.distractors),
        ("must_cite", scenario.must_cite),
        ("must_not_cite", scenario.must_not_cite),
        ("arrival", scenario.arrival or []),
    ):
        for i, eid in enumerate(ids):
            if eid not in universe:
                bad(f"{fld}[{i}]", f"unknown event id {eid!r} (not in the universe)")
                unknown = True
    for qi, q in enumerate(scenario.questions):
        for fld, ids in (("evidence", q.evidence or []), ("must_cite", q.must_cite or [])):
            for i, eid in enumerate(ids):
                if eid not in universe:
                    bad(f"questions[{qi}].{fld}[{i}]", f"unknown event id {eid!r}")
                    unknown = True
    haystack = scenario.haystack_ids
    dupes = sorted({e for e in haystack if haystack.count(e) > 1})
    if dupes:
        bad("distractors", f"events listed twice in the haystack (signal + distractors): {dupes}")
    if unknown or dupes:
        return out  # the checks below read the events

    signal, distractors = set(scenario.signal_ids), set(scenario.distractors)
    for s in scenario.signal:
        n = len(universe[s.event].messages)
        if s.turns is not None and max(s.turns) >= n:
            bad("signal", f"{s.event!r} has {n} turn(s); turn {max(s.turns)} does not exist")
    declared = sorted(set(scenario.source_mix))
    actual = sorted({universe[e].source for e in signal})
    if declared != actual or len(scenario.source_mix) != len(declared):
        bad("source_mix", f"is {scenario.source_mix} but the signal events come from {actual}")

    # Citations: must_cite is evidence, must_not_cite is a lure among the distractors.
    if not set(scenario.must_cite) <= signal:
        extra = sorted(set(scenario.must_cite) - signal)
        bad("must_cite", f"{extra} are not signal events (must_cite lists evidence)")
    if not set(scenario.must_not_cite) <= distractors:
        extra = sorted(set(scenario.must_not_cite) - distractors)
        bad("must_not_cite", f"{extra} are not distractors of this scenario")
    if set(scenario.must_cite) & set(scenario.must_not_cite):
        both = sorted(set(scenario.must_cite) & set(scenario.must_not_cite))
        bad("must_not_cite", f"{both} also appear in must_cite")
    lure_kinds = {"conflicting_facts", "near_duplicate"} & set(scenario.adversarial)
    if lure_kinds and not scenario.must_not_cite:
        bad("must_not_cite", f"{sorted(lure_kinds)} needs the lure events in must_not_cite")

    # Arrival order: a permutation of the haystack; `out_of_order` means it is not by time.
    if scenario.arrival is not None:
        if sorted(scenario.arrival) != sorted(haystack):
            bad("arrival", "must list every haystack event (signal + distractors) exactly once")
        elif "out_of_order" in scenario.adversarial and _chronological(scenario.arrival, universe):
            bad("arrival", "is chronological, yet the scenario claims out_of_order arrival")
    if "out_of_order" in scenario.adversarial and scenario.arrival is None:
        bad("arrival", "out_of_order needs an arrival order that differs from event time")

    # Questions.
    latest = max(universe[e].timestamp for e in haystack)
    for qi, q in enumerate(scenario.questions):
        where = f"questions[{qi}]"
        if q.evidence is not None:
            if not set(q.evidence) <= signal:
                bad(f"{where}.evidence", f"{sorted(set(q.evidence) - signal)} are not signal")
            if not q.evidence:
                bad(f"{where}.evidence", "empty: leave it out to use every signal event")
        cite = question_must_cite(scenario, q)
        evidence_ids = {s.event for s in question_evidence(scenario, q)}
        if not set(cite) <= evidence_ids:
            extra = sorted(set(cite) - evidence_ids)
            bad(f"{where}.must_cite", f"{extra} are not evidence of this question")
        if not cite and not q.abstention:
            bad(f"{where}.must_cite", "an answerable question must cite at least one event")
        if q.asked_at is not None and q.asked_at <= latest:
            bad(
                f"{where}.asked_at",
                f"{q.asked_at.isoformat()} is not after the latest haystack event "
                f"({latest.isoformat()})",
            )
    return out
