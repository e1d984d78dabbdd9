"""Canaries: planted sessions with known facts, and the questions that ask for them.

A canary is a short session in the upstream turn shape whose user states one made-up,
unguessable fact (a code word, a number, a name), with a question asking for it, its
expected answer and its evidence turn (`has_answer`). The bundled set lives in
`corpus/canaries/` beside the other committed corpora (a data directory named like this
module cannot sit inside the package). Canaries are planted beside the run's haystacks and
scored apart, never mixed into a tier's score: a memory system that cannot return a fact it
was just given is broken, whatever the dataset says.

How they are planted (the corpus stages):
- their questions go to `canaries.jsonl` in the goldens artifact, in the goldens' row shape,
  never into `goldens.jsonl` (sampling, deepeval users and the question set are unchanged);
- their sessions join the fixtures, so injection writes them like any session; each canary
  question's haystack is every canary session plus a few of the run's distractor sessions
  (ones that are no question's evidence), chosen by a seeded hash, so a namespaced memory
  system forms memory for it as for any question;
- ids carry the reserved prefix `canary_` (a corpus question or session using it is refused),
  and every question batch holds every canary (`BatchKey.holds`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.longmemeval import UpstreamQuestion, parse_record
from eval_pipeline.settings import BUNDLED_CORPUS_DIR

CANARY_PREFIX = "canary_"
CANARY_SET_VERSION = 1
CANARIES_DIR = BUNDLED_CORPUS_DIR / "canaries"
CANARY_SET_FILE = CANARIES_DIR / f"canaries-v{CANARY_SET_VERSION}.json"
CANARIES_FILE = "canaries.jsonl"  # the canary questions, in the goldens artifact
DISTRACTORS = 2  # run sessions added to every canary haystack
TIER = 0  # never a tier: canary rows are scored apart


def is_canary(identifier: str) -> bool:
    """A canary's question or session id (the reserved prefix)."""
    return identifier.startswith(CANARY_PREFIX)


@dataclass(frozen=True)
class CanarySet:
    version: int
    sha256: str
    source: str  # file name, for error messages and the goldens' source_file
    questions: list[UpstreamQuestion]

    @property
    def session_ids(self) -> list[str]:
        return [s.session_id for q in self.questions for s in q.sessions]

    def pin(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "sha256": self.sha256,
            "file": self.source,
            "questions": len(self.questions),
            "sessions": len(self.session_ids),
        }


def load_canaries(path: Path = CANARY_SET_FILE) -> CanarySet:
    """The canary set at `path`, each record checked as an upstream record and as a canary:
    reserved-prefix ids, one session, exactly one evidence turn, answerable."""
    raw_bytes = path.read_bytes()
    try:
        records = json.loads(raw_bytes)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"canary set {path.name}: invalid JSON ({exc.msg})") from None
    if not isinstance(records, list) or not records:
        raise CorpusError(f"canary set {path.name}: expected a non-empty JSON array of records")
    questions = []
    seen: set[str] = set()
    for index, raw in enumerate(records):
        q = parse_record(index, raw)
        where = f"canary set {path.name}"

        def bad(field: str, why: str, q: UpstreamQuestion = q, where: str = where) -> CorpusError:
            return CorpusError(f"{where}: {why}", record=q.question_id, field=field)

        if not is_canary(q.question_id):
            raise bad("question_id", f"a canary id must start with {CANARY_PREFIX!r}")
        if q.abstention:
            raise bad("question_id", "a canary must be answerable")
        if len(q.sessions) != 1:
            raise bad("haystack_sessions", "a canary has exactly one session")
        session = q.sessions[0]
        if not is_canary(session.session_id):
            raise bad("haystack_session_ids[0]", f"must start with {CANARY_PREFIX!r}")
        if len(q.evidence_turn_ids) != 1:
            raise bad("haystack_sessions[0]", "exactly one turn must have has_answer: true")
        for ident in (q.question_id, session.session_id):
            if ident in seen:
                raise bad("question_id", f"id {ident!r} used twice in the canary set")
            seen.add(ident)
        questions.append(q)
    return CanarySet(
        version=CANARY_SET_VERSION,
        sha256=hashlib.sha256(raw_bytes).hexdigest(),
        source=path.name,
        questions=questions,
    )


def refuse_reserved_ids(goldens: Iterable[dict[str, Any]]) -> None:
    """A corpus question or haystack session using the canary prefix would be taken for a
    canary (and held by every batch): refused, naming the first one."""
    for g in goldens:
        if is_canary(g["name"]):
            raise CorpusError(
                f"question id uses the prefix {CANARY_PREFIX!r} reserved for canaries "
                "(rename it, or run with --no-canaries)",
                record=g["name"],
                field="question_id",
            )
        for sid in g["additional_metadata"]["haystack_session_ids"]:
            if is_canary(sid):
                raise CorpusError(
                    f"session {sid!r} uses the prefix {CANARY_PREFIX!r} reserved for canaries "
                    "(rename it, or run with --no-canaries)",
                    record=g["name"],
                    field="haystack_session_ids",
                )


def pick_distractors(
    goldens: Iterable[dict[str, Any]], version: int, count: int = DISTRACTORS
) -> list[str]:
    """`count` of the run's sessions that are no question's evidence, by a seeded hash of
    their id (the same sessions whatever order the goldens come in)."""
    haystack: set[str] = set()
    evidence: set[str] = set()
    for g in goldens:
        meta = g["additional_metadata"]
        haystack.update(meta["haystack_session_ids"])
        evidence.update(meta["evidence_session_ids"])

    def rank(sid: str) -> str:
        return hashlib.sha256(f"canaries-v{version}|{sid}".encode()).hexdigest()

    return sorted(haystack - evidence, key=rank)[:count]


def canary_goldens(canaries: CanarySet, goldens: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per canary question, in the goldens' shape: its haystack is every canary
    session (its own first) and the run's chosen distractors."""
    from eval_pipeline.corpus.convert import golden_row

    distractors = pick_distractors(goldens, canaries.version)
    rows = []
    for q in canaries.questions:
        own = q.sessions[0].session_id
        row = golden_row(q, q.sessions, f"{canaries.source}@sha256:{canaries.sha256[:16]}")
        meta = row["additional_metadata"]
        meta["tier"] = TIER
        meta["canary"] = True
        meta["haystack_session_ids"] = [
            own,
            *(s for s in canaries.session_ids if s != own),
            *distractors,
        ]
        meta["upstream_haystack_size"] = len(meta["haystack_session_ids"])
        rows.append(row)
    return rows


def _fixture_line(q: UpstreamQuestion, question_ids: list[str]) -> dict[str, Any]:
    """A canary session as a fixtures line (the FixtureWriter's shape, has_answer dropped)."""
    s = q.sessions[0]
    return {
        "session_id": s.session_id,
        "date": s.date,
        "started_at": s.started_at,
        "turns": [
            {"role": t["role"], "content": t["content"], "index": i} for i, t in enumerate(s.turns)
        ],
        "question_ids": question_ids,
        "holds_evidence": [q.question_id],
    }


def plant_fixtures(
    fixtures_path: Path,
    canaries: CanarySet,
    rows: list[dict[str, Any]],
    stats: dict[str, Any],
) -> dict[str, Any]:
    """Add the canaries to a written fixtures file: each chosen distractor lists the canary
    questions too, and the canary sessions are appended. Only the distractors' lines are
    parsed; every other line is copied as bytes. Returns the updated stats."""
    from eval_pipeline.corpus.jsonl import dumps_line
    from eval_pipeline.corpus.upstream import file_sha256

    ids = [r["name"] for r in rows]
    own = {r["additional_metadata"]["haystack_session_ids"][0] for r in rows}
    wanted = {sid for r in rows for sid in r["additional_metadata"]["haystack_session_ids"]} - own
    found: set[str] = set()
    staged = fixtures_path.with_name(fixtures_path.name + ".canaries")
    with open(fixtures_path, "rb") as src, open(staged, "wb") as out:
        for line in src:
            if line.strip() and any(f'"{sid}"'.encode() in line for sid in wanted - found):
                fx = json.loads(line)
                if fx["session_id"] in wanted:
                    found.add(fx["session_id"])
                    fx["question_ids"] = [*fx["question_ids"], *ids]
                    line = (dumps_line(fx) + "\n").encode()
            out.write(line)
        for q in canaries.questions:
            out.write((dumps_line(_fixture_line(q, ids)) + "\n").encode())
    missing = sorted(wanted - found)
    if missing:
        staged.unlink()
        raise CorpusError(f"canary distractor sessions not in the fixtures: {missing}")
    staged.replace(fixtures_path)
    turns = sum(len(q.sessions[0].turns) for q in canaries.questions)
    slots = sum(len(r["additional_metadata"]["haystack_session_ids"]) for r in rows)
    return {
        **stats,
        "sessions": stats["sessions"] + len(canaries.questions),
        "turns": stats["turns"] + turns,
        "haystack_slots": stats["haystack_slots"] + slots,
        "sha256": file_sha256(fixtures_path),
    }


def canary_pin(canaries: CanarySet, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a manifest records of the planted set: its version and digest, and where it was
    planted (the distractors its haystacks borrowed)."""
    distractors = rows[0]["additional_metadata"]["haystack_session_ids"][len(canaries.questions) :]
    return {**canaries.pin(), "distractors": list(distractors)}
