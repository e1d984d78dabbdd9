"""Injection: fixtures.jsonl → a wiped, claimed graph in the schema of `schema.py`.

Order matters for safety and for recovery:
1. read and validate every fixture before touching the graph (a bad file wipes nothing);
2. wipe (claim-before-wipe, see GraphStore.wipe), then the id indexes;
3. questions, then sessions with turns, NEXT chain and haystack edges, in batched UNWINDs;
4. the full-text index, built once over the loaded turns (cheaper than maintaining it);
5. verify the counts, and only then write the fingerprint record.
A run killed anywhere leaves no fingerprint, so the fingerprint check fails until a re-run,
which starts again from the wipe.

The file is streamed twice (issue 18): once to validate it, count it and fingerprint it, once
to write it, each session dropped as soon as its batch is sent. Holding every row cost ~850 MB
at LongMemEval_S scale (~226 MB of fixtures); a second parse costs ~2 s there.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from eval_pipeline.corpus import limits, strict_input
from eval_pipeline.corpus.models import FixtureTurn, SessionFixture, turn_id
from eval_pipeline.graph import schema
from eval_pipeline.graph.batched_writes import BatchStats, row_problem
from eval_pipeline.graph.errors import FixtureError, InjectionMismatchError
from eval_pipeline.graph.fingerprint import fixtures_fingerprint
from eval_pipeline.graph.store import GraphStore


class GraphCounts(BaseModel):
    """What the fixtures imply, or what the graph holds, in schema terms."""

    sessions: int
    turns: int
    questions: int
    has_turn: int
    next: int
    haystack: int

    def diff(self, other: GraphCounts) -> dict[str, tuple[int, int]]:
        """{field: (self, other)} for every field that differs."""
        mine, theirs = self.model_dump(), other.model_dump()
        return {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}


class InjectionReport(BaseModel):
    source: str
    fingerprint: str
    schema_version: int
    counts: GraphCounts
    nodes: int
    relationships: int
    backend: str
    server_version: str
    uri: str
    batches: int
    bytes_sent: int
    timings_s: dict[str, float]

    @property
    def turns_per_s(self) -> float:
        return self.counts.turns / max(self.timings_s.get("total", 0.0), 1e-9)


_FIXTURE_FIELDS = frozenset(SessionFixture.model_fields)
_REQUIRED_FIELDS = frozenset(k for k, f in SessionFixture.model_fields.items() if f.is_required())
_TURN_FIELDS = frozenset(FixtureTurn.model_fields)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _fixture_problem(d: Any) -> str | None:
    """Why `d` breaks the SessionFixture contract, or None.

    A structural check on plain dicts: building 200k pydantic models costs ~6 s on the full
    corpus, json.loads plus this check ~2 s. On a problem the line is re-validated with the
    model itself for its message, so SessionFixture stays the one authority on the contract.
    """
    if not isinstance(d, dict):
        return "not a JSON object"
    keys = d.keys()
    if not _REQUIRED_FIELDS <= keys or not keys <= _FIXTURE_FIELDS:
        return f"fields {sorted(keys)} are not those of a session fixture"
    sid = d["session_id"]
    if not isinstance(sid, str) or not schema.SESSION_ID_RE.match(sid):
        return f"invalid session id {sid!r} (allowed: {schema.SESSION_ID_RE.pattern})"
    if not isinstance(d["date"], str) or not isinstance(d["started_at"], str):
        return "date and started_at must be strings"
    try:
        datetime.fromisoformat(d["started_at"])
    except ValueError:
        return f"started_at {d['started_at']!r} is not ISO 8601"
    if not _is_str_list(d["question_ids"]) or not _is_str_list(d.get("holds_evidence", [])):
        return "question_ids and holds_evidence must be lists of strings"
    turns = d["turns"]
    if not isinstance(turns, list):
        return "turns must be a list"
    too_big = limits.session_problem(len(turns), 0)
    if too_big:
        return f"session {sid!r}: {too_big}"
    seen: set[int] = set()
    chars = 0
    for t in turns:
        if not isinstance(t, dict) or t.keys() != _TURN_FIELDS:
            return "every turn must have exactly role, content and index"
        idx = t["index"]
        if not isinstance(t["role"], str) or not isinstance(t["content"], str):
            return "turn role and content must be strings"
        if type(idx) is not int or idx < 0:
            return f"turn index {idx!r} must be an integer >= 0"
        if idx in seen:
            return f"repeated turn index {idx}"
        seen.add(idx)
        too_big = limits.text_problem(t["role"], t["content"])
        if too_big:
            return f"turn {turn_id(sid, idx)}: {too_big}"
        chars += len(t["role"]) + len(t["content"])
    too_big = limits.session_problem(len(turns), chars)
    return f"session {sid!r}: {too_big}" if too_big else None


def read_fixtures(path: str | Path) -> list[dict[str, Any]]:
    """Every fixture of the file as a dict, validated; one-line FixtureError on a problem."""
    return list(iter_fixtures(path))


def iter_fixtures(path: str | Path) -> Iterator[dict[str, Any]]:
    """The fixtures of the file one by one, each validated before it is yielded (a problem
    further down raises only when reached: validate the whole file before acting on it)."""
    path = Path(path)
    if not path.is_file():
        raise FixtureError(f"no fixtures file at {path}: materialize session_fixtures first")
    seen: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = strict_input.loads(line)
            except json.JSONDecodeError as exc:
                raise FixtureError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
            except strict_input.StrictInputError as exc:  # a lone surrogate fails at the write
                raise FixtureError(f"{path}:{lineno}: {exc}") from None
            problem = _fixture_problem(d)
            if problem is not None:
                try:
                    SessionFixture.model_validate(d)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(p) for p in err["loc"])
                    problem += f" ({loc}: {err['msg']})"
                raise FixtureError(f"{path}:{lineno}: {problem}")
            if d["session_id"] in seen:
                raise FixtureError(f"{path}:{lineno}: duplicate session id {d['session_id']!r}")
            seen.add(d["session_id"])
            yield d


def session_row(fx: dict[str, Any]) -> dict[str, Any]:
    """The parameters of one session: an explicit allow-list, so `holds_evidence` (and any
    evidence field a future fixture version might add) can never reach the graph."""
    sid = fx["session_id"]
    start = datetime.fromisoformat(fx["started_at"])
    return {
        "session_id": sid,
        "date": fx["date"],
        "started_at": fx["started_at"],
        "turns": [
            {
                "turn_id": turn_id(sid, t["index"]),
                "role": t["role"],
                "text": t["content"],
                "index": t["index"],
                "timestamp": schema.turn_timestamp(start, t["index"]),
            }
            for t in sorted(fx["turns"], key=lambda t: t["index"])
        ],
        "question_ids": list(dict.fromkeys(fx["question_ids"])),
    }


def session_rows(path: str | Path) -> list[dict[str, Any]]:
    """The graph rows of a fixtures file (validated)."""
    return list(iter_session_rows(path))


def iter_session_rows(path: str | Path, *, check_size: bool = False) -> Iterator[dict[str, Any]]:
    """The graph rows of a fixtures file, one at a time (each validated when reached). With
    `check_size`, a row too large for one Bolt message is refused here (the validation pass
    before the wipe), not by the write after it."""
    for fx in iter_fixtures(path):
        row = session_row(fx)
        problem = row_problem(row) if check_size else None
        if problem is not None:
            raise FixtureError(f"{path}: session {row['session_id']!r}: {problem}")
        yield row


def expected_counts(rows: Iterable[dict[str, Any]]) -> GraphCounts:
    return summarize(rows).counts


class FixturesSummary(BaseModel):
    """What one pass over the rows tells: the counts they imply, their fingerprint and their
    question ids (sorted)."""

    counts: GraphCounts
    fingerprint: str
    questions: list[str]


def summarize(rows: Iterable[dict[str, Any]]) -> FixturesSummary:
    """Counts, fingerprint and question ids of `rows` in one pass, keeping no row."""
    sessions = turns = next_ = haystack = 0
    questions: set[str] = set()

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal sessions, turns, next_, haystack
        for r in rows:
            sessions += 1
            turns += len(r["turns"])
            next_ += max(len(r["turns"]) - 1, 0)
            haystack += len(r["question_ids"])
            questions.update(r["question_ids"])
            yield r

    fingerprint = fixtures_fingerprint(counted())
    counts = GraphCounts(
        sessions=sessions,
        turns=turns,
        questions=len(questions),
        has_turn=turns,
        next=next_,
        haystack=haystack,
    )
    return FixturesSummary(counts=counts, fingerprint=fingerprint, questions=sorted(questions))


def graph_counts(store: GraphStore) -> tuple[GraphCounts, dict[str, Any]]:
    """The graph's counts in schema terms, and the raw counts (totals, every label)."""
    raw = store.counts()
    labels, types = raw["labels"], raw["relationship_types"]
    counts = GraphCounts(
        sessions=labels.get(schema.SESSION, 0),
        turns=labels.get(schema.TURN, 0),
        questions=labels.get(schema.QUESTION, 0),
        has_turn=types.get(schema.HAS_TURN, 0),
        next=types.get(schema.NEXT, 0),
        haystack=types.get(schema.HAYSTACK, 0),
    )
    return counts, raw


def count_problems(
    expected: GraphCounts,
    store: GraphStore,
    *,
    extra_labels: Iterable[str] = (),
    extra_types: Iterable[str] = (),
) -> list[str]:
    """Why the graph does not hold exactly what the fixtures imply (empty when it does).

    `extra_labels`/`extra_types` are what later stages may add on top (a reconciler's
    documented schema); anything else is stray.
    """
    actual, raw = graph_counts(store)
    problems = [f"{k}: expected {e}, graph has {a}" for k, (e, a) in expected.diff(actual).items()]
    known = {schema.SESSION, schema.TURN, schema.QUESTION, *schema.BOOKKEEPING_LABELS}
    known |= set(extra_labels)
    stray = {k: v for k, v in raw["labels"].items() if k not in known}
    if stray:
        problems.append(f"nodes with labels outside the schema: {stray}")
    known_types = {schema.HAS_TURN, schema.NEXT, schema.HAYSTACK} | set(extra_types)
    stray_types = {k: v for k, v in raw["relationship_types"].items() if k not in known_types}
    if stray_types:
        problems.append(f"relationships of types outside the schema: {stray_types}")
    return problems


def read_graph_fingerprint(store: GraphStore) -> dict[str, Any] | None:
    rows = store.read(schema.READ_FINGERPRINT)
    return rows[0] if len(rows) == 1 else None


def _write_sessions(
    store: GraphStore, rows: Iterable[dict[str, Any]], *, batch_turns: int, batch_bytes: int
) -> BatchStats:
    """Sessions grouped by turn count (one statement shape per count), each group sent as soon
    as it holds a batch's worth of turns: the batches are those `write_batches` would cut from
    the whole group, only interleaved across groups, and no more than one batch per group is
    held at a time."""
    stats = BatchStats()
    pending: dict[int, list[dict[str, Any]]] = defaultdict(list)
    cost: dict[int, int] = defaultdict(int)

    def flush(turns: int) -> None:
        nonlocal stats
        stats += store.write_batches(
            schema.create_sessions_statement(turns),
            pending.pop(turns),
            batch_rows=batch_turns,
            batch_bytes=batch_bytes,
            row_cost=lambda row: max(len(row["turns"]), 1),
        )
        cost.pop(turns, None)

    for row in rows:
        turns = len(row["turns"])
        pending[turns].append(row)
        cost[turns] += max(turns, 1)
        if cost[turns] >= batch_turns:
            flush(turns)
    for turns in sorted(pending):
        flush(turns)
    return stats


def inject_fixtures(
    store: GraphStore,
    fixtures_path: str | Path,
    *,
    batch_turns: int | None = None,
    batch_bytes: int | None = None,
) -> InjectionReport:
    """Wipe the graph and load `fixtures_path` into it; raise if the result is not exact."""
    timings: dict[str, float] = {}
    start = last = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        timings[name] = round(now - last, 3)
        last = now

    # The whole file validated (and counted, and fingerprinted) before the graph is touched.
    summary = summarize(iter_session_rows(fixtures_path, check_size=True))
    expected, fingerprint = summary.counts, summary.fingerprint
    lap("read_fixtures")

    uri = store.ensure_running()
    # A server that could not hold what injection builds (Memgraph in IN_MEMORY_ANALYTICAL:
    # no transactions, no text index) is refused while the previous graph is still whole.
    store.dialect.require_transactions(store, "injection")
    lap("server")
    store.wipe()
    lap("wipe")

    # Maintaining the id indexes during the load measured no slower than building them after.
    store.dialect.create_indexes(store)
    store.write_batches(
        schema.CREATE_QUESTIONS,
        summary.questions,
        batch_rows=10_000,
        batch_bytes=store.batch_bytes,
    )
    lap("indexes_and_questions")

    stats = _write_sessions(
        store,
        iter_session_rows(fixtures_path),
        batch_turns=batch_turns or store.batch_turns,
        batch_bytes=batch_bytes or store.batch_bytes,
    )
    lap("sessions")

    store.dialect.create_fulltext_index(store)
    lap("fulltext_index")

    problems = count_problems(expected, store)
    if problems:
        raise InjectionMismatchError(
            f"injected graph at {store.where} does not match {fixtures_path}: "
            + "; ".join(problems)
        )
    lap("verify")

    store.write(
        schema.WRITE_FINGERPRINT,
        {
            "fingerprint": fingerprint,
            "schema_version": schema.SCHEMA_VERSION,
            "sessions": expected.sessions,
            "turns": expected.turns,
            "questions": expected.questions,
            "injected_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "source": str(fixtures_path),
        },
    )
    lap("fingerprint")
    timings["total"] = round(time.perf_counter() - start, 3)

    return InjectionReport(
        source=str(fixtures_path),
        fingerprint=fingerprint,
        schema_version=schema.SCHEMA_VERSION,
        counts=expected,
        nodes=expected.sessions + expected.turns + expected.questions + 2,  # + claim, record
        relationships=expected.has_turn + expected.next + expected.haystack,
        backend=store.dialect.name,
        server_version=store.server_version(),
        uri=uri,
        batches=stats.batches,
        bytes_sent=stats.bytes,
        timings_s=timings,
    )
