"""results.jsonl (one `ResultRow` per question, tiers 1 and 2) and hypotheses.jsonl (one
`Hypothesis` per tier-1 question: the upstream LongMemEval scorer's input).

A row's `covered` is None when the question was not decided (a gate not taken, or an
infrastructure failure), and every metric not taken is None, never 0. The parts mirror the
domain models they are dumped from (score.gate.MetricResult, retrieve.results.QueryRecord,
failures.InfraFailure); a test keeps their fields in step.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from eval_pipeline.runs.records.base import Part, Record

RESULT_ROW_SCHEMA_VERSION = 1
HYPOTHESIS_SCHEMA_VERSION = 1


class Metric(Part):
    """One metric of one question (score.gate.MetricResult)."""

    score: float | None  # None: not taken (unscored), never 0
    threshold: float | None = None
    passed: bool | None = None
    gating: bool = False
    reason: str = ""
    error: str | None = None
    rubric: str | None = None  # the answer judge's rubric: abstention | answer | mixed


class RetrievalMetrics(Part):
    """score.retrieval_metrics.question_metrics: variant -> "recall_any@k" ... -> value."""

    turn: dict[str, dict[str, float | None]]
    session: dict[str, dict[str, float | None]]
    excluded: dict[str, str | None]  # variant -> why this question is left out, or None


class Latency(Part):
    retrieval: float | None = None
    reader: float | None = None


class Query(Part):
    """A query the retriever ran against the graph (retrieve.results.QueryRecord)."""

    query: str
    # The query's own parameters: whatever the retriever bound (ids, text, lists of them).
    params: dict[str, Any] = Field(default_factory=dict)
    rows: int | None = None
    error: str | None = None
    truncated: bool = False
    latency_ms: float | None = None


class InfraFailureRecord(Part):
    """The pipeline's own failure that left the question unscored (failures.InfraFailure)."""

    stage: str  # retrieval | reader | judge
    cause: str  # graph_server | llm_cache | llm_provider | memory_provider | judge
    error: str


class ArmResult(Part):
    """One reference arm's answer to the question (score.arms.arm_result): covered by the
    answer gate alone; null when not taken (an infrastructure failure, no verdict)."""

    answer: str | None
    covered: bool | None
    answer_judge: float | None
    context_tokens: int | None = None
    reason: str = ""
    infra_failures: list[InfraFailureRecord] = Field(default_factory=list)


class ErrataFlag(Part):
    """A question's dataset errata (corpus.errata.Flag): `suspect` (its gold is in doubt),
    `corrected` or `note`; the upstream issue(s); what is wrong, in a sentence."""

    status: str
    source: list[str]
    what: str


class ResultRow(Record):
    """One line of results.jsonl."""

    VERSION: ClassVar[int] = RESULT_ROW_SCHEMA_VERSION
    FILE: ClassVar[str] = "results.jsonl"

    question_id: str
    tier: int
    question_type: str
    abstention: bool
    # The question as asked and when (the golden's `input` and `question_date`), so the bundle
    # alone reads as a report and as a table; absent in bundles written before.
    question: str | None = None
    question_date: str | None = None
    retrieved_turn_ids: list[str]
    retrieved_session_ids: list[str]
    retrieval_context: list[str]  # the exact strings handed to the reader
    answer: str | None  # None: no answer was produced, never ""
    expected_output: str
    metrics: dict[str, Metric]
    retrieval_metrics: RetrievalMetrics
    covered: bool | None
    weakest_link: str | None
    payload_tokens: int | None
    latency_ms: Latency
    queries: list[Query]
    errors: list[str]  # the system under test's own failures
    notes: list[str] = Field(default_factory=list)  # absent before notes were kept
    infra_failures: list[InfraFailureRecord] = Field(default_factory=list)
    # Tier 2's invariant judge, when it scored the answer: its dimensions and unsupported
    # claims. The judge's own detail, shaped by its prompt (pinned by its hash in the
    # manifest), so left open.
    invariant: dict[str, Any] | None = None
    # The judge panel (score.panel), absent without one: per member its answer_judge score
    # and the coverage the gate decides with it (null: not taken), and whether the members
    # that judged the question disagree (null: fewer than two did).
    judge_panel: dict[str, float | None] | None = None
    panel_covered: dict[str, bool | None] | None = None
    panel_split: bool | None = None
    # Where a not-covered question failed (score.attribution.STAGES), null when covered,
    # unmeasured or undecided; absent before stages were attributed.
    failure_stage: (
        Literal["gold_suspect", "formation", "retrieval", "reader", "judge_split"] | None
    ) = None
    # What memory held of each evidence unit (retrieve.evidence_trace): `level`, `held`
    # (unit -> live | superseded | absent) and `nodes` (unit -> first memory ids).
    evidence_memory: dict[str, Any] | None = None
    # The reference arms (score.arms), absent without --arms: arm -> its result.
    arms: dict[str, ArmResult] | None = None
    # Tier 1: the question's dataset errata, null when none name it (absent before errata).
    errata: ErrataFlag | None = None


class Hypothesis(Record):
    """One line of hypotheses.jsonl; an unanswered question has an empty hypothesis."""

    VERSION: ClassVar[int] = HYPOTHESIS_SCHEMA_VERSION
    FILE: ClassVar[str] = "hypotheses.jsonl"

    question_id: str
    hypothesis: str
