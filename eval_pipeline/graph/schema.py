"""The injected graph's schema, version 1. Later stages read the graph through these names.

Nodes (every property a plain scalar; ArcadeDB refuses map values, Memgraph accepts them, so
we never write maps):

    (:Session  {session_id, date, started_at, reconcile_status})
        session_id        fixture id, validated against ^[A-Za-z0-9_-]{1,128}$
        date              upstream form, "2023/05/30 (Tue) 23:40"
        started_at        ISO 8601 of `date`, naive ("2023-05-30T23:40:00")
        reconcile_status  "pending" at injection; the reconciliation stage moves it on
    (:Turn     {turn_id, session_id, role, text, index, timestamp})
        turn_id           "<session_id>#<index>", the id used in goldens and run results
        text              the turn's content as one plain string (never JSON in a property)
        index             0-based position of the turn in its upstream session
        timestamp         started_at + index seconds, ISO 8601: sorting by it orders turns
    (:Question {question_id})
        one node per question whose haystack is in the batch: scoping only, no question
        text, answer or evidence
    (:EvalPipelineClaim       {owner, claimed_at, schema_version, checkpoint, content,
                               checkpoint_at, writers, foreign, foreign_since, wiped_at})
        marks the instance as the pipeline's own: the wipe refuses to run without it (on
        an instance that is not empty). `checkpoint` is what the instance held (JSON of the
        store's inventory: records by label and type, types, indexes, constraints, triggers;
        our lease and claim left out) when a write phase of ours last ended, at
        `checkpoint_at`, and `content` the digest of every node and relationship it held
        then (`state.py`; our lease and claim left out); `writers` lists the write phases of
        ours under way (written before their first write, removed at their checkpoint). A
        chain's claim and the wipe refuse when the instance holds more than the checkpoint,
        or other content, and no write phase of ours is open: someone else wrote. A phase
        that opens and finds such a change keeps it in `foreign` (JSON, what changed) since
        `foreign_since`, so that its own checkpoint does not absorb it. The wipe keeps the
        claim node (and its type) and resets these fields
    (:EvalPipelineFingerprint {fingerprint, schema_version, sessions, turns, questions,
                               injected_at, source})
        written last, after the counts were verified: its presence means "injection
        completed", its fingerprint names the fixtures the graph was built from
    (:EvalPipelineLease       {token, holder, run_id, host, pid, what, acquired_at,
                               expires_at})
        which chain holds the instance now (`lease.py`); the wipe never removes it

Relationships:

    (:Session)-[:HAS_TURN]->(:Turn)     every turn of a session
    (:Turn)-[:NEXT]->(:Turn)            consecutive turns of one session, by index
    (:Question)-[:HAYSTACK]->(:Session) the question's haystack holds the session
                                         (LongMemEval scopes retrieval to it)

Indexes: Session.session_id, Turn.turn_id, Question.question_id, and a full-text index on
Turn.text (its name and query syntax are the dialect's: see `dialects/`).

Never in the graph: `has_answer`, `holds_evidence`, answer or evidence session ids, in any
spelling, as a label, a relationship type or a property (`evidence_markers` finds them).

Bump SCHEMA_VERSION on any change a reader could notice; the fingerprint includes it, so a
graph built under an older schema no longer matches current fixtures.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import cache, lru_cache

from eval_pipeline.corpus.models import SESSION_ID_PATTERN

SCHEMA_VERSION = 1

SESSION = "Session"
TURN = "Turn"
QUESTION = "Question"
CLAIM = "EvalPipelineClaim"
FINGERPRINT = "EvalPipelineFingerprint"
LEASE = "EvalPipelineLease"
MEMORY = "EvalPipelineMemory"  # which reconciler configurations made the memory (reconcile/)
# The pipeline's own bookkeeping, not memory: hidden from agents, kept out of content checks.
BOOKKEEPING_LABELS: tuple[str, ...] = (CLAIM, FINGERPRINT, LEASE, MEMORY)

HAS_TURN = "HAS_TURN"
NEXT = "NEXT"
HAYSTACK = "HAYSTACK"

PENDING = "pending"
CLAIM_OWNER = "eval_pipeline"

# (label, property) pairs with an ordinary index; lookups by id and the haystack join use them.
PROPERTY_INDEXES: tuple[tuple[str, str], ...] = (
    (SESSION, "session_id"),
    (TURN, "turn_id"),
    (QUESTION, "question_id"),
)
FULLTEXT_PROPERTY: tuple[str, str] = (TURN, "text")

SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)

# Names that would tell retrieval where the answer is. Compared after lower-casing and
# dropping everything but letters and digits, as substrings, so `hasAnswer`, `HAS_ANSWER`
# and `has-answer` all match. Plain "evidence" is matched only as a whole label name: a
# reconciler may well write an EVIDENCE relationship of its own making.
FORBIDDEN_NAME_TOKENS: tuple[str, ...] = (
    "hasanswer",
    "holdsevidence",
    "answersession",
    "evidencesession",
    "evidenceturn",
    "isanswer",
    "isevidence",
)
FORBIDDEN_LABELS: frozenset[str] = frozenset({"evidence", "answer"})


def _normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def is_evidence_name(name: str, *, label: bool = False) -> bool:
    norm = _normalise(name)
    if label and norm in FORBIDDEN_LABELS:
        return True
    return any(token in norm for token in FORBIDDEN_NAME_TOKENS)


def turn_timestamp(started_at: datetime, index: int) -> str:
    """started_at + index seconds: turns of a session sort by time in upstream order."""
    return (started_at + timedelta(seconds=index)).isoformat()


# --- Portable Cypher (both dialects run it unchanged) -------------------------------------

CREATE_QUESTIONS = f"UNWIND $rows AS qid CREATE (:{QUESTION} {{question_id: qid}})"

# Sessions are written grouped by turn count: for k turns one statement creates the session,
# its k turns, k HAS_TURN and k-1 NEXT edges as a fixed pattern, then its haystack edges. Every
# node is bound in the statement, so no relationship needs an index lookup except the one into
# the ~500 Question nodes. A fixed pattern measured ~1.8x faster on ArcadeDB than building the
# NEXT chain from `collect()` + `range()` (27.9 s -> 15.5 s for 196k turns). Longer sessions
# than MAX_PATTERN_TURNS use one generic statement instead of a very long query text.
MAX_PATTERN_TURNS = 64

_TURN_PROPS = (
    "turn_id: {t}.turn_id, session_id: row.session_id, role: {t}.role, text: {t}.text, "
    "index: {t}.index, timestamp: {t}.timestamp"
)
_SESSION_CREATE = (
    f"UNWIND $rows AS row\n"
    f"CREATE (s:{SESSION} {{session_id: row.session_id, date: row.date, "
    f"started_at: row.started_at, reconcile_status: '{PENDING}'}})"
)
# Last clause: the UNWIND drops a session with no questions, after everything was created.
_HAYSTACK = (
    f"WITH s, row\n"
    f"UNWIND row.question_ids AS qid\n"
    f"MATCH (q:{QUESTION} {{question_id: qid}})\n"
    f"CREATE (q)-[:{HAYSTACK}]->(s)"
)


@cache
def create_sessions_statement(turns: int) -> str:
    """The statement for a batch of sessions that all have `turns` turns (sorted by index)."""
    if turns > MAX_PATTERN_TURNS:
        return create_sessions_generic()
    lines = [_SESSION_CREATE]
    for i in range(turns):
        props = _TURN_PROPS.format(t=f"row.turns[{i}]")
        lines.append(f"CREATE (s)-[:{HAS_TURN}]->(t{i}:{TURN} {{{props}}})")
    lines += [f"CREATE (t{i})-[:{NEXT}]->(t{i + 1})" for i in range(turns - 1)]
    lines.append(_HAYSTACK)
    return "\n".join(lines)


@lru_cache(maxsize=1)
def create_sessions_generic() -> str:
    """Any turn count: turns from an UNWIND, the NEXT chain over their collected list."""
    props = _TURN_PROPS.format(t="t")
    return "\n".join(
        [
            _SESSION_CREATE,
            "WITH s, row",
            "CALL {",
            "  WITH s, row",
            "  UNWIND row.turns AS t",
            f"  CREATE (s)-[:{HAS_TURN}]->(u:{TURN} {{{props}}})",
            "  WITH collect(u) AS us",  # collect keeps UNWIND order: turns arrive sorted
            "  FOREACH (i IN range(0, size(us) - 2) |",
            f"    FOREACH (a IN [us[i]] | FOREACH (b IN [us[i + 1]] | CREATE (a)-[:{NEXT}]->(b))))",
            "}",
            _HAYSTACK,
        ]
    )


WRITE_FINGERPRINT = f"""
CREATE (:{FINGERPRINT} {{fingerprint: $fingerprint, schema_version: $schema_version,
                         sessions: $sessions, turns: $turns, questions: $questions,
                         injected_at: $injected_at, source: $source}})
"""

READ_FINGERPRINT = f"""
MATCH (f:{FINGERPRINT})
RETURN f.fingerprint AS fingerprint, f.schema_version AS schema_version,
       f.injected_at AS injected_at, f.source AS source
"""

WRITE_CLAIM = f"""
CREATE (:{CLAIM} {{owner: '{CLAIM_OWNER}', claimed_at: $claimed_at,
                   schema_version: {SCHEMA_VERSION}, checkpoint: $checkpoint,
                   content: $content, checkpoint_at: $checkpoint_at, writers: []}})
"""

READ_CLAIM = f"""
MATCH (c:{CLAIM})
RETURN c.owner AS owner, c.claimed_at AS claimed_at, c.checkpoint AS checkpoint,
       c.content AS content, c.checkpoint_at AS checkpoint_at, c.writers AS writers,
       c.foreign AS foreign, c.foreign_since AS foreign_since
LIMIT 1
"""

# A write phase of ours begins: listed before its first write, so that a phase that never
# reaches its checkpoint (a crash) is known to have been ours. What someone else wrote since
# the last checkpoint ($foreign, or null) is kept, the first finding first.
OPEN_WRITER = f"""
MATCH (c:{CLAIM})
SET c.writers = [w IN coalesce(c.writers, []) WHERE w <> $writer] + [$writer],
    c.foreign = coalesce(c.foreign, $foreign),
    c.foreign_since = coalesce(c.foreign_since, $foreign_since)
RETURN count(c) AS claims
"""

# A write phase of ours ends: what the instance now holds is ours.
RECORD_CHECKPOINT = f"""
MATCH (c:{CLAIM})
SET c.checkpoint = $checkpoint, c.content = $content, c.checkpoint_at = $checkpoint_at,
    c.writers = [w IN coalesce(c.writers, []) WHERE w <> $writer]
RETURN count(c) AS claims
"""

# After a wipe: the checkpoint is the wiped instance; only the listed writers stay open.
RESET_CLAIM = f"""
MATCH (c:{CLAIM})
SET c.checkpoint = $checkpoint, c.content = $content, c.checkpoint_at = $checkpoint_at,
    c.writers = $writers,
    c.wiped_at = $checkpoint_at, c.schema_version = {SCHEMA_VERSION}, c.foreign = null,
    c.foreign_since = null
RETURN count(c) AS claims
"""
