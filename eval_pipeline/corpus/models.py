"""Data contracts of the corpus stage: what goldens.jsonl and fixtures.jsonl hold.

Every later stage reads these shapes; keep them stable and versioned.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
FIXTURE_SCHEMA_VERSION = 1


def turn_id(session_id: str, index: int) -> str:
    """The one turn id used in goldens, fixtures, the graph and run results."""
    return f"{session_id}#{index}"


class FixtureTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    content: str
    index: int = Field(ge=0)


class SessionFixture(BaseModel):
    """One line of fixtures.jsonl: a session deduplicated across the batch.

    `holds_evidence` (question ids for which this session is an answer session) is corpus
    bookkeeping for checks and subsampling; it must never reach the graph.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    date: str  # upstream form, "2023/05/30 (Tue) 23:40"
    started_at: str  # ISO 8601 of `date`, naive (the upstream dates carry no zone)
    turns: list[FixtureTurn]
    question_ids: list[str]  # questions whose haystack holds this session, batch order
    holds_evidence: list[str] = Field(default_factory=list)


class GoldenMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    tier: int = 1
    question_type: str
    question_date: str
    abstention: bool
    evidence_turn_ids: list[str]
    evidence_session_ids: list[str]
    haystack_session_ids: list[str]


class Golden(BaseModel):
    """One line of goldens.jsonl, in deepeval `Golden` field names."""

    model_config = ConfigDict(extra="forbid")

    input: str
    expected_output: str
    context: list[str]  # text of the evidence turns only, never whole sessions
    name: str  # question_id
    source_file: str  # upstream file @ revision
    additional_metadata: GoldenMetadata
