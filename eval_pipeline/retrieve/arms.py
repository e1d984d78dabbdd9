"""Reference arms: the run's reader without memory (floor) and with the evidence (ceiling).

An arm answers the same questions as the run with the run's own reader, on a context the
pipeline builds instead of the retriever:

- `floor`: no context at all (the reader's prompt says nothing was retrieved);
- `ceiling`: every turn of each of the question's evidence sessions (`answer_session_ids`),
  sessions in time order (`started_at`, then id) and turns in their order, each labelled as
  the full-text retriever labels a turn (`[2023-05-30 23:40, user] text`). An abstention
  question gets its evidence sessions too: upstream they are the sessions that come closest
  to answering it, so the ceiling measures whether the reader abstains when the near-miss is
  in front of it. A question with no evidence session gets an empty ceiling context.

The arms need the evidence, which a retriever must never see (`runner.QuestionInput`), so
they are not a retriever: this module takes the goldens and the session fixtures itself, and
the retrieval stage runs it after its main loop (`arms.jsonl` in its artifact). Scoring
judges the answers (`score.arms`). A reader failure is classified as the system's is
(`eval_pipeline.failures`): the pipeline's own (provider, cache) leaves that arm's question
unscored, never a miss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.corpus.jsonl import read_jsonl, write_jsonl
from eval_pipeline.corpus.models import FixtureTurn, SessionFixture
from eval_pipeline.failures import InfraFailure
from eval_pipeline.graph.schema import turn_timestamp
from eval_pipeline.retrieve.reader import Reader
from eval_pipeline.retrieve.runner import read_answer

Arm = Literal["floor", "ceiling"]
ARMS: tuple[str, ...] = ("floor", "ceiling")
ARMS_FILE = "arms.jsonl"
# Bumped with any change to what an arm's context holds or how it is formatted.
ARMS_VERSION = 1
OPTION = "--arms"

CONTEXT_RULES = {
    "floor": "no context",
    "ceiling": "every turn of each evidence session (answer_session_ids), sessions in time "
    "order, turns labelled [date time, role]; abstention questions get their evidence "
    "sessions too",
}


def parse_arms(value: Any) -> list[str]:
    """`floor,ceiling` (a string) or a list of arm names: the arms, in the order of `ARMS`.
    An unknown or repeated arm is a ValueError naming it."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else list(value)
    seen: list[str] = []
    for item in items:
        if not isinstance(item, str) or item not in ARMS:
            raise ValueError(f"unknown arm {item!r}: give a comma list of {', '.join(ARMS)}")
        if item in seen:
            raise ValueError(f"arm {item!r} given twice")
        seen.append(item)
    return [a for a in ARMS if a in seen]


class ArmAnswer(BaseModel):
    """One line of arms.jsonl: one arm's answer to one question."""

    model_config = ConfigDict(extra="forbid")

    question_id: str
    arm: Arm
    reader: str
    answer: str | None  # None: no answer was produced, never ""
    context_tokens: int | None = None  # of the arm's context, pinned tokenizer
    sessions: list[str] = Field(default_factory=list)  # the ceiling's evidence sessions
    latency_ms: float | None = None
    errors: list[str] = Field(default_factory=list)  # the reader's own failures
    # The pipeline's own failures (provider, cache): this arm's question is unscored.
    infra_failures: list[InfraFailure] = Field(default_factory=list)
    # The exact strings handed to the reader (kept for the report and a re-judge).
    context: list[str] = Field(default_factory=list)


def turn_text(session: SessionFixture, turn: FixtureTurn) -> str:
    """A turn as the reader sees a retrieved one: `[YYYY-MM-DD HH:MM, role] text`."""
    when = turn_timestamp(datetime.fromisoformat(session.started_at), turn.index)
    return f"[{when.replace('T', ' ')[:16]}, {turn.role}] {turn.content}"


def evidence_session_ids(golden: Mapping[str, Any]) -> list[str]:
    return list(golden["additional_metadata"].get("evidence_session_ids") or [])


def load_sessions(fixtures: Path, wanted: Iterable[str]) -> dict[str, SessionFixture]:
    """The wanted sessions of a fixtures file, read in one pass keeping only those (a full
    fixtures file holds tens of thousands of sessions)."""
    wanted = set(wanted)
    out: dict[str, SessionFixture] = {}
    for row in read_jsonl(fixtures):
        if row.get("session_id") in wanted:
            out[row["session_id"]] = SessionFixture.model_validate(row)
    return out


def ceiling_context(
    golden: Mapping[str, Any], sessions: Mapping[str, SessionFixture]
) -> tuple[list[str], list[str]]:
    """(context, session ids in the order used). A session the fixtures lack is an error:
    the corpus stage's own check guarantees every haystack session is present."""
    ids = evidence_session_ids(golden)
    missing = [s for s in ids if s not in sessions]
    if missing:
        raise KeyError(f"question {golden['name']}: evidence session(s) {missing} not in fixtures")
    ordered = sorted(
        (sessions[s] for s in dict.fromkeys(ids)), key=lambda s: (s.started_at, s.session_id)
    )
    context = [turn_text(s, t) for s in ordered for t in sorted(s.turns, key=lambda t: t.index)]
    return context, [s.session_id for s in ordered]


def answer_arm(
    reader: Reader,
    golden: Mapping[str, Any],
    arm: str,
    context: list[str],
    *,
    sessions: Sequence[str] = (),
    count_tokens: Callable[[list[str]], int] | None = None,
) -> ArmAnswer:
    """The reader's answer on `context`; its failure recorded as the runner records one."""
    meta = golden["additional_metadata"]
    read = read_answer(reader, golden["input"], meta["question_date"], context)
    return ArmAnswer(
        question_id=golden["name"],
        arm=arm,  # type: ignore[arg-type]
        reader=reader.label,
        answer=read.answer,
        context_tokens=count_tokens(context) if count_tokens else None,
        sessions=list(sessions),
        latency_ms=read.latency_ms,
        errors=read.errors,
        infra_failures=read.infra,
        context=context,
    )


def run_arms(
    arms: Sequence[str],
    goldens: Sequence[Mapping[str, Any]],
    fixtures: Path,
    reader: Reader,
    *,
    count_tokens: Callable[[list[str]], int] | None = None,
) -> Iterator[ArmAnswer]:
    """Every arm's answer to every golden, question by question, in the goldens' order."""
    sessions = (
        load_sessions(fixtures, (s for g in goldens for s in evidence_session_ids(g)))
        if "ceiling" in arms
        else {}
    )
    for golden in goldens:
        for arm in arms:
            if arm == "floor":
                yield answer_arm(reader, golden, arm, [], count_tokens=count_tokens)
            else:
                context, used = ceiling_context(golden, sessions)
                yield answer_arm(
                    reader, golden, arm, context, sessions=used, count_tokens=count_tokens
                )


def write_arms(
    path: Path,
    arms: Sequence[str],
    goldens: Sequence[Mapping[str, Any]],
    fixtures: Path,
    reader: Reader,
    *,
    count_tokens: Callable[[list[str]], int] | None = None,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Write every arm's answers to `path` (one `ArmAnswer` per line, streamed) and return
    what the retrieval stage vouches for about them: which arms ran, on what context, and
    per arm how many questions it answered, left without an answer or left unscored.
    `progress()` is called after each answer."""
    per: dict[str, dict[str, Any]] = {
        a: {"questions": 0, "no_answer": 0, "unscored": []} for a in arms
    }

    def rows() -> Iterator[dict[str, Any]]:
        for a in run_arms(arms, goldens, fixtures, reader, count_tokens=count_tokens):
            entry = per[a.arm]
            entry["questions"] += 1
            entry["no_answer"] += a.answer is None
            if a.infra_failures:
                entry["unscored"].append(a.question_id)
            if progress is not None:
                progress()
            yield a.model_dump(mode="json")

    write_jsonl(path, rows())
    return {
        "ran": list(arms),
        "version": ARMS_VERSION,
        "reader": reader.label,
        "context": {a: CONTEXT_RULES[a] for a in arms},
        "per_arm": per,
    }
