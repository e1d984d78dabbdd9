"""summary.json: per tier, never one blended headline (layout: score.summary).

Every rate, mean and median is null when nothing was scored, never 0. The keys of the
nested maps are data, not fields: question types, metric names, retrieval levels and
variants, `recall_all@k` names, use cases. Tier 2 adds its panels, ingestion axis and pass
criteria (`tier2_summary`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eval_pipeline.runs.records.base import Part, Record
from eval_pipeline.runs.records.canaries import CanarySummary
from eval_pipeline.runs.records.tier2_summary import Ingestion, PassReport, Tier2Panels

SUMMARY_SCHEMA_VERSION = 2  # 2: formation_audit


class InfrastructureReport(Part):
    """Questions the pipeline's own failures left unscored: how many, by cause and stage."""

    questions: int
    by_cause: dict[str, int] = Field(default_factory=dict)
    by_stage: dict[str, int] = Field(default_factory=dict)
    question_ids: list[str] = Field(default_factory=list)


class Counts(Part):
    questions: int
    abstention: int
    covered: int
    not_covered: int
    unscored: int
    unscored_infrastructure: int = 0  # ... of which the pipeline's own failure left unmeasured


class RateEstimate(Part):
    """A rate with its percentile-bootstrap interval (score.stats.RateEstimate)."""

    rate: float
    low: float
    high: float
    n_scored: int
    n_unscored: int
    level: float | None = None
    resamples: int | None = None
    seed: int | None = None


class MeanEstimate(Part):
    """Mean of a per-question metric; an interval only when the metric is binary."""

    mean: float | None
    low: float | None = None
    high: float | None = None
    n: int


class MetricStats(Part):
    mean: float | None
    n_scored: int
    n_unscored: int
    pass_rate: float | None


class AbstentionSummary(Part):
    """The abstention questions, aggregated apart from the answerable ones."""

    questions: int
    coverage: RateEstimate | None
    weakest_link: dict[str, int] = Field(default_factory=dict)
    metrics: dict[str, MetricStats] = Field(default_factory=dict)


class Efficiency(Part):
    median_payload_tokens_covered: float | None  # the comparable figure
    median_payload_tokens_all: float | None  # context only, not comparable
    note: str = ""


class PanelSplit(Part):
    questions: int
    question_ids: list[str] = Field(default_factory=list)


class PanelMemberSummary(Part):
    """One judge-panel member's coverage (score.panel.tier_summary), answerable questions
    apart from abstention ones, as the main coverage."""

    coverage: RateEstimate | None
    coverage_by_type: dict[str, RateEstimate | None] = Field(default_factory=dict)
    abstention_coverage: RateEstimate | None = None
    unjudged: int = 0  # questions it gave no verdict on (null, never 0)


class PanelTierSummary(Part):
    members: dict[str, PanelMemberSummary]  # member key -> its coverage
    split: PanelSplit


class PanelRunSummary(Part):
    members: list[str]
    split: PanelSplit  # every tier's questions the members disagree on


class StageCounts(Part):
    """Questions covered and lost at each stage (score.attribution: the funnel)."""

    questions: int
    covered: int
    gold_suspect: int = 0
    formation: int = 0
    retrieval: int = 0
    reader: int = 0
    judge_split: int = 0
    unscored: int = 0  # the pipeline's own failure: never a stage
    undecided: int = 0  # not covered, no gate failed (a gate was not taken)


class Funnel(Part):
    stages: list[str]
    answerable: StageCounts
    by_type: dict[str, StageCounts]  # answerable questions by type
    abstention: StageCounts


class ArmSummary(Part):
    """One reference arm's coverage over a tier (score.arms.arm_summary)."""

    coverage: RateEstimate | None
    coverage_by_type: dict[str, RateEstimate | None] = Field(default_factory=dict)
    abstention_coverage: RateEstimate | None = None
    unscored: int = 0  # questions it has no decided coverage for (null, never 0)
    unscored_infrastructure: int = 0  # ... of which the reader or judge failed (ours)


class ArmsPosition(Part):
    """Where the system's coverage sits between the arms, as lines."""

    overall: str
    by_type: dict[str, str] = Field(default_factory=dict)
    abstention: str = ""
    outside: list[str] = Field(default_factory=list)  # below the floor or above the ceiling


class ArmsTierSummary(Part):
    arms: dict[str, ArmSummary]  # floor | ceiling -> its coverage
    position: ArmsPosition


class ErrataSummary(Part):
    """Tier 1 with and without its suspect questions (score.errata_summary)."""

    flagged: int
    by_status: dict[str, int] = Field(default_factory=dict)
    suspect_ids: list[str] = Field(default_factory=list)
    coverage_without_suspect: RateEstimate | None = None
    coverage_task_averaged_without_suspect: float | None = None


class TierSummary(Part):
    counts: Counts
    infrastructure: InfrastructureReport | None = None
    # level -> variant -> "recall_any@k" | "recall_all@k" | "ndcg@k" -> estimate
    retrieval: dict[str, dict[str, dict[str, MeanEstimate]]]
    excluded: dict[str, dict[str, str]] = Field(default_factory=dict)  # variant -> id -> why
    coverage: RateEstimate | None
    coverage_by_type: dict[str, RateEstimate | None]
    coverage_task_averaged: float | None
    abstention: AbstentionSummary | None = None
    efficiency: Efficiency
    weakest_link: dict[str, int]  # metric -> questions it was the weakest link of
    metrics: dict[str, MetricStats]
    panels: Tier2Panels | None = None  # tier 2 only, as are the two below
    ingestion: Ingestion | None = None
    pass_criteria: PassReport | None = None
    judge_panel: PanelTierSummary | None = None  # with --judge-panel only
    funnel: Funnel | None = None  # absent before failure stages were attributed
    arms: ArmsTierSummary | None = None  # with --arms only
    errata: ErrataSummary | None = None  # tier 1, when errata flag a question of the run


class AuditedMemory(Part):
    namespace: str
    memory_id: str
    session_id: str | None
    verdict: Literal["supported", "unsupported", "unsourced"]
    support: float | None
    text: str


class FormationAudit(Part):
    """Every memory a provider stored, checked against the session it names."""

    method: str
    threshold: float
    memories: int
    supported: int
    unsupported: int
    unsourced: int
    unsupported_share: float | None
    unsourced_share: float | None
    examples: list[AuditedMemory] = Field(default_factory=list)


class VerdictChoicePin(Part):
    """Which verdict method decided the answer verdicts (`score.verdict_choice`): asked for
    with --judge-verdict, or the default for the judge given (a model: reference; none:
    match). A record, not a comparability pin: the method's hash is the pin."""

    method: str
    chosen: Literal["asked", "default"]
    text: str  # "reference (LongMemEval's prompt; the default with a judge model)"


class JudgeSummary(Part):
    """Who judged the run's answers and by which method (absent before it was recorded)."""

    model: str  # "offline", or PROVIDER:MODEL[@BASE_URL]
    verdict: VerdictChoicePin | None = None  # None: a plug-in judge, or nothing was judged


class Summary(Record):
    """summary.json of a run bundle."""

    VERSION: ClassVar[int] = SUMMARY_SCHEMA_VERSION
    FILE: ClassVar[str] = "summary.json"

    status: Literal["complete", "incomplete"] | None = None  # absent before infra failures
    incomplete: InfrastructureReport | None = None
    tiers: dict[str, TierSummary]  # "1", "2": tiers keyed as text
    # A memory provider's formation audit (`providers.audit`): None for graph memory.
    formation_audit: FormationAudit | None = None
    judge_panel: PanelRunSummary | None = None  # with --judge-panel only
    judge: JudgeSummary | None = None  # the judge and its verdict method
    # The planted canaries, scored apart from every tier (absent: none planted).
    canaries: CanarySummary | None = None
