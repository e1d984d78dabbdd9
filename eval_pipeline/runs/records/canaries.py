"""canaries.jsonl (one `CanaryRow` per planted canary and question batch) and summary.json's
`canaries` block (`CanarySummary`): the canaries, scored apart from every tier
(`score.canaries`). A canary not scored (an infrastructure failure) has `returned` None,
never False."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eval_pipeline.runs.records.base import Part, Record
from eval_pipeline.runs.records.results import InfraFailureRecord

CANARY_ROW_SCHEMA_VERSION = 1


class CanaryRow(Record):
    """One line of canaries.jsonl: one planted canary in one question batch."""

    VERSION: ClassVar[int] = CANARY_ROW_SCHEMA_VERSION
    FILE: ClassVar[str] = "canaries.jsonl"

    canary_id: str
    key: str  # canary_id, or `<canary_id>@<batch>` with several batches
    batch: str | None = None
    question: str
    expected_output: str
    evidence_turn_ids: list[str]
    evidence_rank: int | None  # first rank of an evidence turn in the retrieved list
    k: int  # the top k it had to be in (the coverage gate's)
    level: Literal["turn", "session"]
    retrieved_turn_ids: list[str]
    answer: str | None
    returned: bool | None  # None: unscored (infrastructure), never False
    answered: bool | None  # None: not judged
    status: Literal["returned", "failed", "unscored"]
    errors: list[str] = Field(default_factory=list)
    infra_failures: list[InfraFailureRecord] = Field(default_factory=list)


class CanarySetPin(Part):
    version: int | None = None
    sha256: str | None = None


class CanarySummary(Part):
    """The canaries of a run, apart from every tier (`score.canaries.canary_summary`)."""

    planted: int
    returned: int | None  # None: none scored
    answered: int | None  # None: none judged
    unscored: int = 0
    failed: list[str] = Field(default_factory=list)  # not returned: the memory system's miss
    unanswered: list[str] = Field(default_factory=list)
    unscored_ids: list[str] = Field(default_factory=list)
    set: CanarySetPin | None = None


class CanaryPin(Part):
    """The planted canary set, as the corpus stages planted it (`corpus.canaries.canary_pin`)."""

    version: int
    sha256: str
    file: str
    questions: int
    sessions: int
    distractors: list[str] = Field(default_factory=list)
