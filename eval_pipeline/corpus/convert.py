"""LongMemEval records → goldens (deepeval `Golden` shape) and deduplicated session fixtures.

Two steps, each one streaming pass over the upstream file:
- `plan_corpus`: validate every record (refusing the oracle variant by content), draw the
  sample (capped to what the file holds), build the golden rows;
- `FixtureWriter`: write each selected question's haystack sessions once per batch.
`build_corpus` runs both, in a single pass when every question is taken.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from eval_pipeline import __version__
from eval_pipeline.atomic import staged_files
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.json_stream import iter_json_array
from eval_pipeline.corpus.jsonl import dumps_line, write_json, write_jsonl
from eval_pipeline.corpus.longmemeval import HaystackSession, UpstreamQuestion, parse_record
from eval_pipeline.corpus.models import FIXTURE_SCHEMA_VERSION
from eval_pipeline.corpus.sampling import (
    SampleSpec,
    effective_spec,
    sample_note,
    select_questions,
    stratum_key,
)
from eval_pipeline.corpus.upstream import ResolvedUpstream
from eval_pipeline.settings import REPO_DIR

GOLDENS_FILE = "goldens.jsonl"
FIXTURES_FILE = "fixtures.jsonl"
MANIFEST_FILE = "manifest.json"
PLAN_FILE = "plan.json"


ORACLE_REFUSAL = (
    "precision and payload efficiency would score well by construction; use a file with "
    "distractor sessions (LongMemEval S or M)"
)


def is_distractor(session: HaystackSession) -> bool:
    """A haystack session that is no answer session: not in `answer_session_ids` and with
    no turn flagged `has_answer`."""
    return not session.is_evidence


class OracleContentGuard:
    """Tells the oracle variant by content: a file in which no haystack holds a distractor.

    The rule, over the whole file (never only the sampled questions):
    - a slot is a *distractor* when its session is neither listed in `answer_session_ids`
      nor holds a turn flagged `has_answer` (`is_distractor`);
    - the file is refused when it holds at least one record and not one distractor slot in
      any record. That is LongMemEval's oracle variant, whose haystacks are exactly the
      answer sessions, whatever the file or its variant is called;
    - abstention questions count like any other: upstream gives them answer sessions too
      (a related mention, not the answer), and the oracle file gives them only those, so
      exempting them would let an oracle file of abstention questions through;
    - a question with an empty haystack holds no distractor, so a file whose haystacks are
      all empty is refused as well (there is nothing to retrieve among);
    - a file where only *some* questions lack distractors is accepted (their count is in
      `file_stats["questions_without_distractors"]`): a real haystack can be that small.
    """

    __slots__ = ("records", "slots", "distractors", "without_distractors")

    def __init__(self) -> None:
        self.records = 0
        self.slots = 0
        self.distractors = 0
        self.without_distractors = 0

    def add(self, q: UpstreamQuestion) -> None:
        n = sum(1 for s in q.sessions if is_distractor(s))
        self.records += 1
        self.slots += len(q.sessions)
        self.distractors += n
        self.without_distractors += n == 0

    @property
    def is_oracle(self) -> bool:
        return self.records > 0 and self.distractors == 0

    def check(self, file_name: str = "the upstream file") -> None:
        """Raise CorpusError (one line) when the file is the oracle variant by content."""
        if not self.is_oracle:
            return
        if self.slots == 0:
            why = f"none of the {self.records} records of {file_name} has a haystack session"
        else:
            why = (
                f"every one of the {self.slots} haystack sessions of the {self.records} "
                f"records of {file_name} is an answer session (no distractor anywhere)"
            )
        raise CorpusError(
            f"{why}: this is the oracle variant by content, refused ({ORACLE_REFUSAL})",
            field="haystack_sessions",
        )


def check_not_oracle_content(
    questions: Iterable[UpstreamQuestion], file_name: str = "the upstream file"
) -> Iterator[UpstreamQuestion]:
    """Pass `questions` through; after the last one, refuse the file if it is the oracle
    variant by content (`OracleContentGuard`). Nothing is refused before the end: a
    distractor may come in the last record."""
    guard = OracleContentGuard()
    for q in questions:
        guard.add(q)
        yield q
    guard.check(file_name)


def _iter_parsed(path: str | Path, *, on_bytes=None) -> Iterator[UpstreamQuestion]:
    seen: set[str] = set()
    for index, raw in iter_json_array(path, on_bytes=on_bytes):
        q = parse_record(index, raw)
        if q.question_id in seen:
            raise CorpusError("duplicate question_id", record=q.question_id, field="question_id")
        seen.add(q.question_id)
        yield q


def iter_questions(path: str | Path, *, on_bytes=None) -> Iterator[UpstreamQuestion]:
    """Every record of an upstream file, validated; the oracle variant is refused by content
    once the last record is read (a consumer that reads to the end always sees that)."""
    return check_not_oracle_content(_iter_parsed(path, on_bytes=on_bytes), Path(path).name)


def oracle_by_content(path: str | Path) -> bool:
    """True when the file is the oracle variant by content (`OracleContentGuard`'s rule).

    Stops at the first distractor, so on a real haystack file it reads one record; only a
    file that is (nearly) oracle is read to the end. Records are validated as they are read
    (a bad record raises CorpusError).
    """
    guard = OracleContentGuard()
    for q in _iter_parsed(path):
        guard.add(q)
        if guard.distractors:
            return False
    return guard.is_oracle


def kept_sessions(q: UpstreamQuestion, max_sessions: int | None) -> list[HaystackSession]:
    """Per-question subsampling: every evidence session, then distractors in upstream order."""
    if max_sessions is None:
        return q.sessions
    room = max(0, max_sessions - sum(1 for s in q.sessions if s.is_evidence))
    kept = []
    for s in q.sessions:
        if s.is_evidence:
            kept.append(s)
        elif room > 0:
            kept.append(s)
            room -= 1
    return kept


def golden_row(q: UpstreamQuestion, kept: list[HaystackSession], source_file: str) -> dict:
    return {
        "input": q.question,
        "expected_output": q.answer,
        "context": list(q.evidence_texts),
        "name": q.question_id,
        "source_file": source_file,
        "additional_metadata": {
            "tier": 1,
            "question_type": q.question_type,
            "question_date": q.question_date,
            "abstention": q.abstention,
            "evidence_turn_ids": list(q.evidence_turn_ids),
            "evidence_turn_roles": list(q.evidence_turn_roles),
            "evidence_session_ids": list(q.answer_session_ids),
            "haystack_session_ids": [s.session_id for s in kept],
            "upstream_haystack_size": len(q.sessions),
        },
    }


@dataclass(slots=True)
class _SessionEntry:
    turns_digest: int
    date: str
    first_question: str
    turns: int
    question_ids: list[str] = field(default_factory=list)
    holds_evidence: list[str] = field(default_factory=list)


class FixtureWriter:
    """Accumulates the batch's sessions, deduplicated by id, with bounded memory.

    Each session's body is serialised once into a spill file as it is first seen; only a
    digest and the question lists stay in memory. `finish` streams the spill into the
    final JSONL, closing each line with its question lists.
    """

    def __init__(self, spill_dir: Path) -> None:
        # Binary spill: each body is encoded once and copied as bytes, never decoded again.
        self._spill: IO[bytes] = tempfile.TemporaryFile("w+b", dir=spill_dir)
        self.sessions: dict[str, _SessionEntry] = {}
        self.slots = 0
        self.date_disagreements: dict[str, list[str]] = {}

    def add(self, q: UpstreamQuestion, kept: list[HaystackSession]) -> None:
        for s in kept:
            self.slots += 1
            # In-process comparison only: Python's 64-bit hash of the (role, content) pairs
            # tells a reused id with other content, far cheaper than serialising to compare.
            digest = hash(tuple((t["role"], t["content"]) for t in s.turns))
            entry = self.sessions.get(s.session_id)
            if entry is None:
                entry = _SessionEntry(digest, s.date, q.question_id, len(s.turns))
                self.sessions[s.session_id] = entry
                turns = [
                    {"role": t["role"], "content": t["content"], "index": i}
                    for i, t in enumerate(s.turns)
                ]
                # ASCII-escaped: the C encoder is about 1.6x faster that way on this bulk
                # (fixtures are read by programs; goldens stay readable UTF-8).
                turns_json = json.dumps(turns, separators=(", ", ": "))
                head = json.dumps(
                    {"session_id": s.session_id, "date": s.date, "started_at": s.started_at},
                    separators=(", ", ": "),
                )
                self._spill.write(f'{head[:-1]}, "turns": {turns_json}\n'.encode())
            elif entry.turns_digest != digest:
                raise CorpusError(
                    f"session {s.session_id!r} is reused with different content: question "
                    f"{entry.first_question!r} and question {q.question_id!r} disagree "
                    "(a conflict is an error, never merged)",
                    record=q.question_id,
                    field="haystack_sessions",
                )
            elif entry.date != s.date:
                # Same content under another date: we keep the first date and report it.
                self.date_disagreements.setdefault(s.session_id, []).append(q.question_id)
            entry.question_ids.append(q.question_id)
            if s.is_evidence:
                entry.holds_evidence.append(q.question_id)

    def finish(self, path: Path) -> dict[str, Any]:
        """Write the fixtures JSONL; returns counts and the file's sha256."""
        self._spill.seek(0)
        turns = 0
        hasher = hashlib.sha256()
        with open(path, "wb") as out:
            for entry, body in zip(self.sessions.values(), self._spill, strict=True):
                tail = dumps_line(
                    {"question_ids": entry.question_ids, "holds_evidence": entry.holds_evidence}
                )
                line = body[:-1] + f", {tail[1:]}\n".encode()
                out.write(line)
                hasher.update(line)
                turns += entry.turns
        self._spill.close()
        return {
            "sessions": len(self.sessions),
            "turns": turns,
            "haystack_slots": self.slots,
            "repeated_slots": self.slots - len(self.sessions),
            "session_date_disagreements": len(self.date_disagreements),
            "sha256": hasher.hexdigest(),
        }


@dataclass
class CorpusPlan:
    """What pass 1 learned: the selected goldens and the facts about the whole file."""

    upstream: ResolvedUpstream
    spec: SampleSpec
    goldens: list[dict]
    strata: dict[str, dict[str, int]]
    file_stats: dict[str, Any]
    tiers: str = "1"
    light: bool = False
    tier2: dict[str, Any] | None = None  # stats of the tier-2 scenarios in the batch
    # `spec` is the spec as drawn (`sampling.effective_spec`); this is what --sample asked.
    requested_sample: int | None = None
    # One line when the draw is not what --sample asked (capped, or short by equal quotas).
    sample_note: str | None = None

    @property
    def selected_ids(self) -> set[str]:
        return {g["name"] for g in self.goldens}

    @property
    def sample_capped(self) -> bool:
        available = sum(s["available"] for s in self.strata.values())
        return self.requested_sample is not None and self.requested_sample > available

    def to_json(self) -> dict:
        return {
            "upstream": self.upstream.model_dump(),
            "spec": self.spec.model_dump(),
            "requested_sample": self.requested_sample,
            "sample_note": self.sample_note,
            "selected": [g["name"] for g in self.goldens],
            "strata": self.strata,
            "file_stats": self.file_stats,
            "tiers": self.tiers,
            "light": self.light,
            "tier2": self.tier2,
        }

    @classmethod
    def from_json(cls, raw: dict, goldens: list[dict]) -> CorpusPlan:
        """The plan `to_json` wrote, with the goldens read back from their file."""
        spec = SampleSpec.model_validate(raw["spec"])
        return cls(
            upstream=ResolvedUpstream.model_validate(raw["upstream"]),
            spec=spec,
            goldens=goldens,
            strata=raw["strata"],
            file_stats=raw["file_stats"],
            tiers=raw.get("tiers", "1"),
            light=raw.get("light", False),
            tier2=raw.get("tier2"),
            requested_sample=raw.get("requested_sample", spec.sample),
            sample_note=raw.get("sample_note"),
        )


def plan_corpus(
    upstream: ResolvedUpstream,
    spec: SampleSpec,
    *,
    fixtures: FixtureWriter | None = None,
    exclude: Callable[[dict], bool] | None = None,
) -> CorpusPlan:
    """Pass 1: validate every record and draw the sample.

    With `fixtures` given (only valid when every question is taken) the same pass also
    feeds the fixture writer, so the whole corpus is built in one read of the file.
    `exclude` sees every record's golden row; a row it answers True for is left out of the
    population the sample is drawn from (dataset errata, `corpus/errata_apply.py`).
    """
    if fixtures is not None and spec.sample is not None:
        raise ValueError("single-pass build needs spec.sample=None")
    hasher = hashlib.sha256()
    rows: list[tuple[str, tuple[str, bool], dict]] = []
    by_type: Counter[str] = Counter()
    repeated: dict[str, list[str]] = {}  # question -> session ids repeated in its haystack
    guard = OracleContentGuard()
    # iter_questions refuses the oracle variant too; the guard here counts for file_stats.
    records = abstention = 0
    for q in iter_questions(upstream.path, on_bytes=hasher.update):
        kept = kept_sessions(q, spec.max_sessions_per_question)
        row = golden_row(q, kept, "")
        by_type[q.question_type] += 1
        if q.repeated_session_ids:
            repeated[q.question_id] = list(q.repeated_session_ids)
        guard.add(q)
        records += 1
        abstention += q.abstention
        if exclude is not None and exclude(row):
            continue
        rows.append((q.question_id, q.stratum, row))
        if fixtures is not None:
            fixtures.add(q, kept)
    digest = hasher.hexdigest()
    if upstream.expected_sha256 and digest != upstream.expected_sha256:
        raise CorpusError(
            f"sha256 of {upstream.file_name} is {digest}, expected the pinned "
            f"{upstream.expected_sha256}",
            field="sha256",
        )
    if not rows:
        raise CorpusError("the upstream file holds no records")
    guard.check(upstream.file_name)
    upstream = upstream.model_copy(update={"sha256": digest})
    # The label carries the digest of this very pass (a local file's only revision).
    source = upstream.source_label()
    for _, _, g in rows:
        g["source_file"] = source
    requested = spec.sample
    spec = effective_spec(spec, len(rows), strata=len({st for _, st, _ in rows}))
    selected, counts = select_questions(((qid, st) for qid, st, _ in rows), spec)
    goldens = [g for qid, _, g in rows if qid in selected]
    strata = {
        stratum_key(s): {"available": a, "selected": n} for s, (a, n) in sorted(counts.items())
    }
    file_stats = {
        "records": records,
        "by_question_type": dict(sorted(by_type.items())),
        "abstention": abstention,
        "questions_without_distractors": guard.without_distractors,
        "repeated_sessions": repeated,
    }
    return CorpusPlan(
        upstream,
        spec,
        goldens,
        strata,
        file_stats,
        requested_sample=requested,
        sample_note=sample_note(requested, len(rows), len(goldens)),
    )


def evidence_report(goldens: list[dict]) -> dict[str, Any]:
    """Questions with no evidence turn, split by whether that is expected."""
    missing = [g for g in goldens if not g["additional_metadata"]["evidence_turn_ids"]]
    abstention = [g["name"] for g in missing if g["additional_metadata"]["abstention"]]
    unexpected = [g["name"] for g in missing if not g["additional_metadata"]["abstention"]]
    assistant_only = [
        g["name"]
        for g in goldens
        if g["additional_metadata"]["evidence_turn_ids"]
        and "user" not in g["additional_metadata"]["evidence_turn_roles"]
    ]
    return {
        "without_evidence_turns_abstention": abstention,
        "without_evidence_turns_unexpected": unexpected,
        "assistant_side_evidence_only": assistant_only,
    }


REPEAT_RULE = "first occurrence kept, each later one dropped"


def repeated_sessions_report(plan: CorpusPlan) -> dict[str, Any]:
    """Session ids repeated within one haystack among the selected questions (found by
    `longmemeval.parse_record`, which keeps the first): how many, where, and the rule."""
    in_file = plan.file_stats.get("repeated_sessions") or {}
    selected = plan.selected_ids
    questions = {q: ids for q, ids in sorted(in_file.items()) if q in selected}
    return {
        "repeats": sum(len(ids) for ids in questions.values()),
        "haystacks": len(questions),
        "questions": questions,
        "in_file": {
            "repeats": sum(len(ids) for ids in in_file.values()),
            "haystacks": len(in_file),
        },
        "rule": REPEAT_RULE,
    }


def upstream_pins(upstream: ResolvedUpstream) -> dict[str, Any]:
    """The upstream as pinned in a manifest; a path inside the checkout is kept relative so
    the committed sample manifest is the same on every clone."""
    pins = upstream.model_dump()
    path = Path(pins["path"])
    if path.is_relative_to(REPO_DIR):
        pins["path"] = str(path.relative_to(REPO_DIR))
    return pins


def manifest_for(plan: CorpusPlan, fixture_stats: dict[str, Any], goldens_sha256: str) -> dict:
    """Deterministic (no clock): the same spec on the same input gives the same bytes."""
    goldens = plan.goldens
    # `sample_spec` is the spec as drawn (the effective sample size): it is the pin. What
    # --sample asked, and the one-line note, are kept beside it only when they differ, so a
    # run asking 1000 of 31 pins exactly like one asking 31.
    request: dict[str, Any] = {}
    if plan.sample_capped:
        request["sample_requested"] = plan.requested_sample
    if plan.sample_note:
        request["sample_note"] = plan.sample_note
    return {
        "schema_version": FIXTURE_SCHEMA_VERSION,
        "code_version": __version__,
        "upstream": upstream_pins(plan.upstream),
        "sample_spec": plan.spec.model_dump(),
        **request,
        "tiers": plan.tiers,
        "light": plan.light,
        "tier2": plan.tier2,
        "comparable": not plan.spec.subsampled,
        "comparability_note": (
            "haystacks subsampled per question: scores are an upper bound, not comparable "
            "to full-haystack runs"
            if plan.spec.subsampled
            else "full haystacks"
        ),
        "counts": {
            "questions_selected": len(goldens),
            "abstention_selected": sum(g["additional_metadata"]["abstention"] for g in goldens),
            "strata": plan.strata,
            **{k: v for k, v in fixture_stats.items() if k != "sha256"},
        },
        "file_stats": plan.file_stats,
        "evidence": evidence_report(goldens),
        "repeated_sessions": repeated_sessions_report(plan),
        "files": {GOLDENS_FILE: goldens_sha256, FIXTURES_FILE: fixture_stats["sha256"]},
    }


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_goldens(plan: CorpusPlan, path: Path) -> None:
    write_jsonl(path, plan.goldens)


def build_fixtures(plan: CorpusPlan, path: Path, *, spill_dir: Path) -> dict[str, int]:
    """Pass 2: fixtures for the selected questions only."""
    writer = FixtureWriter(spill_dir)
    selected = plan.selected_ids
    for q in iter_questions(plan.upstream.path):
        if q.question_id in selected:
            writer.add(q, kept_sessions(q, plan.spec.max_sessions_per_question))
    return writer.finish(path)


def check_out_dir(out_dir: Path, *, force: bool = False) -> None:
    """Refuse to replace files in `out_dir` that this command did not write: a goldens,
    fixtures or manifest file there is replaced only when the manifest beside it is ours and
    names each file's sha256 as it is now (a user's own goldens.jsonl, or ours edited since,
    stays), or with `force`."""
    present = [
        name for name in (GOLDENS_FILE, FIXTURES_FILE, MANIFEST_FILE) if (out_dir / name).exists()
    ]
    if force or not present:
        return
    try:
        recorded = json.loads((out_dir / MANIFEST_FILE).read_text(encoding="utf-8"))["files"]
        ok = all(
            _sha256_file(out_dir / name) == recorded.get(name)
            for name in present
            if name != MANIFEST_FILE
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise CorpusError(
            f"{out_dir} already holds {', '.join(present)} that this command did not write (or "
            "that changed since); choose another --out, or pass --force to replace them",
            field="--out",
        )


def build_corpus(upstream: ResolvedUpstream, out_dir: Path, spec: SampleSpec) -> dict:
    """Write goldens.jsonl, fixtures.jsonl and manifest.json into `out_dir`, all or nothing."""
    out_dir = Path(out_dir)
    with staged_files(out_dir, [GOLDENS_FILE, FIXTURES_FILE, MANIFEST_FILE]) as stage:
        if spec.sample is None:
            writer = FixtureWriter(stage)
            plan = plan_corpus(upstream, spec, fixtures=writer)
            fixture_stats = writer.finish(stage / FIXTURES_FILE)
        else:
            plan = plan_corpus(upstream, spec)
            fixture_stats = build_fixtures(plan, stage / FIXTURES_FILE, spill_dir=stage)
        write_goldens(plan, stage / GOLDENS_FILE)
        manifest = manifest_for(plan, fixture_stats, _sha256_file(stage / GOLDENS_FILE))
        write_json(stage / MANIFEST_FILE, manifest)
    return manifest
