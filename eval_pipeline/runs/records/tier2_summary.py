"""Tier 2's parts of summary.json: panels (tier2.panels), the ingestion axis
(tier2.ingestion, as retrieval read it from the graph) and the pass criteria
(tier2.pass_criteria). Keys of the maps are use cases, difficulties, source mixes,
dimensions and scenario ids."""

from __future__ import annotations

from pydantic import Field

from eval_pipeline.runs.records.base import Part


class ScoredMean(Part):
    mean: float | None
    n_scored: int


class PanelCell(Part):
    questions: int
    abstention: int
    covered: int
    not_covered: int
    unscored: int
    coverage_rate: float | None  # answerable questions, scored ones only
    abstention_coverage_rate: float | None
    citation_precision: ScoredMean
    citation_recall: ScoredMean
    criteria_score: ScoredMean
    invariant_score: ScoredMean | None = None  # absent before the invariant judge
    must_not_cite_hit_questions: int


class Tier2Panels(Part):
    tier: int
    questions: int
    skipped_other_tiers: int
    by_use_case: dict[str, PanelCell]
    by_difficulty: dict[str, PanelCell]
    by_source_mix: dict[str, PanelCell]
    by_dimension: dict[str, PanelCell]


class IngestionScenario(Part):
    """One scenario's ingestion score (tier2.ingestion.IngestionResult, keyed by its id)."""

    score: float | None  # 0..100
    reason: str
    entities_missing: list[str] = Field(default_factory=list)
    claims_missing: list[str] = Field(default_factory=list)
    forbidden_held: list[str] = Field(default_factory=list)
    declared: int = 0


class Ingestion(Part):
    version: int  # tier2.ingestion's own INGESTION_VERSION
    searchable: list[str]
    namespace: str | None
    texts_read: int
    reason: str
    scenarios: dict[str, IngestionScenario]


class ScenarioVerdict(Part):
    use_case: str
    difficulty: str
    source_mix: str
    axes: dict[str, float | None]  # ingestion, retrieval, agent_use (0..100)
    weighted: float | None
    pass_score: float
    dimension_scores: dict[str, float | None] = Field(default_factory=dict)
    passed: bool | None  # None: an axis was not taken
    failed_because: list[str] = Field(default_factory=list)


class BucketVerdict(Part):
    scenarios: int
    scored: int
    passed: int
    pass_rate: float | None
    bucket_passed: bool | None
    ingestion_mean: float | None
    retrieval_mean: float | None
    agent_use_mean: float | None
    weighted_mean: float | None


class PassReport(Part):
    weights: dict[str, dict[str, int]]  # use case -> axis -> percent
    thresholds: dict[str, float]  # axis -> floor
    default_pass_score: float
    bucket_pass_rate: float
    combo_dimension_min: float
    ingestion_reason: str
    scenarios: dict[str, ScenarioVerdict]
    by_use_case: dict[str, BucketVerdict]
    by_difficulty: dict[str, BucketVerdict]
    by_source_mix: dict[str, BucketVerdict]
