"""manifest.json: what a run measured (its pins), where its numbers came from, when.

Typed where the pipeline owns the shape. Left open (`dict[str, Any]`), each saying why: what
a plug-in or a memory system pins about itself, the upstream dataset's own pin, the LLM
layer's accounting and role pins, the judge-check record. Fields added after the first
bundles (partitioning, repeat, memory, batches, status...) have defaults, so an older
manifest still reads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from eval_pipeline.runs.records.base import Part, Record
from eval_pipeline.runs.records.canaries import CanaryPin
from eval_pipeline.runs.records.summary import InfrastructureReport, VerdictChoicePin

MANIFEST_SCHEMA_VERSION = 2  # 2: memory.provider


class SampleSpecPin(Part):
    """How the questions were drawn (corpus.sampling.SampleSpec, as drawn)."""

    sample: int | None = None  # None: every question
    seed: int = 0
    floor: int = 1
    max_sessions_per_question: int | None = None  # None: full haystacks


class CorpusPins(Part):
    # The upstream file's own pin: its fields depend on the source (Hugging Face revision,
    # the bundled sample's path, a local file), and the corpus stage owns them.
    upstream: dict[str, Any]
    sample_spec: SampleSpecPin
    subsampled: bool
    tiers: str = "1"
    light: bool = False
    tier2_digest: str | None = None
    canaries: CanaryPin | None = None  # the planted canary set (absent: none planted)
    goldens_sha256: str
    fixtures_sha256: str


# K instances that disagree on a value pin the list of values, in batch order.
_PerBatch = list[Any]


class GraphPins(Part):
    """What the graph held when retrieval read it, read from the graph itself."""

    backend: str | _PerBatch | None = None
    server_version: str | _PerBatch | None = None
    schema_version: int | _PerBatch | None = None  # the injection schema, not this record's
    fingerprint: str | None = None


class PartitioningPin(Part):
    """How the questions were split across graph instances (corpus.batches)."""

    batches: int
    assignment: str
    version: int


class PanelMemberPin(Part):
    """One judge-panel member (score.panel.member_pin): what its verdicts depend on."""

    member: str  # METHOD or METHOD=MODEL, the key of its verdicts in rows and summaries
    method: str
    method_hash: str
    model: str | None = None  # None: a method that needs no model
    role: dict[str, Any] | None = None  # its model's role pins (llm.config), provider-specific


class JudgePins(Part):
    model: str  # "offline", or PROVIDER:MODEL[@BASE_URL]
    prompt_hash: str | None = None
    criteria_prompt_hash: str | None = None
    invariant_prompt_hash: str | None = None
    # The stored judge-check of each prompt (score.agreement.agreement_pin): a record of a
    # check, its fields owned there; not a comparability pin.
    agreement: dict[str, Any] | None = None
    invariant_agreement: dict[str, Any] | None = None
    # The judge role's own pins (llm.config): provider-specific (a local model adds its
    # weights' sha256, server version and sampling settings).
    role: dict[str, Any] | None = None
    # The answer judge (score.answer_judge): a plug-in's own pins, its fields its own.
    method: dict[str, Any] | None = None
    # The built-in's verdict method and whether it was asked for or the judge's default.
    verdict: VerdictChoicePin | None = None
    # The judge panel (`--judge-panel`), absent without one; compare's band needs equal panels.
    panel: list[PanelMemberPin] | None = None


class GatePins(Part):
    evidence_recall: str  # "recall_all@10"


class ErrataPin(Part):
    """The dataset errata a run applied (corpus.errata_apply), or why none did."""

    mode: Literal["flag", "exclude", "off"]
    applied: bool
    reason: str | None = None  # applied false: why (no errata for this file, --errata off)
    file: str | None = None
    version: str | None = None
    sha256: str | None = None  # of the errata file's bytes
    # The upstream file the errata name (repo, revision, file name, sha256, size).
    applies_to: dict[str, Any] | None = None
    verified: bool | None = None  # the errata file's own word: checked on the pinned file
    flagged: int = 0  # selected questions with a flag
    by_status: dict[str, int] = Field(default_factory=dict)
    excluded: list[str] = Field(default_factory=list)  # left out of the sample (exclude)
    not_in_file: list[str] = Field(default_factory=list)  # named, but not in the file


class TokenizerPin(Part):
    tokenizer: str
    bpe_sha256: str


class ReaderPromptPin(Part):
    """What a reader answers from a given context besides its model (retrieve.reader)."""

    version: int  # READER_PROMPT_VERSION: the prompts' and the extractive rules' version
    prompt: str | None = None  # project | longmemeval | longmemeval-cot; None: no prompt
    prompt_hash: str | None = None  # sha256 of the prompt's text


class Pins(Part):
    corpus: CorpusPins
    graph: GraphPins
    partitioning: PartitioningPin | None = None  # absent: before batches, one instance
    # A memory system's own pins (plus pins_key, sessions_failed), or {"mixed": [...],
    # "pending": n} when the graph held memory of several configurations: the plug-in
    # decides what identifies it.
    reconciler: dict[str, Any] | None
    retriever: dict[str, Any] | None  # the retriever plug-in's own pins
    scope: str | None
    top_k: int | None
    reader: str | None
    reader_prompt: ReaderPromptPin | None = None  # absent before reader prompts were pinned
    judge: JudgePins
    # Reader and graph-agent roles as retrieval ran them: provider-specific role pins.
    llm_roles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    gate: GatePins
    errata: ErrataPin | None = None  # absent before errata
    tokenizer: TokenizerPin
    code_version: str


class RepeatRecord(Part):
    """Which sample of a repeated configuration (`run --repeat N`) this run is."""

    index: int
    of: int | None = None
    salt: str
    sample_identity: str  # "<salt>/<index>"
    includes_reconcile: bool = False


class MemoryConfiguration(Part):
    pins_key: str
    pins: dict[str, Any] | None = None  # the memory system's own pins (open, as above)
    done: int = 0
    failed: int = 0


class MemoryCensus(Part):
    """What memory the graph held, by the configuration that made it (reconcile.reader)."""

    configurations: list[MemoryConfiguration] = Field(default_factory=list)
    pending: int = 0
    sessions: int = 0
    # A memory provider (`providers`): its name; `done`/`failed`/`pending` then count
    # (namespace, session) pairs, since a provider ingests a session once per namespace.
    provider: str | None = None


# One stage's LLM accounting, as the LLM layer exports it (llm.accounting: a UsageSnapshot,
# or one role's RoleUsage in older bundles); None for an offline stage. Owned and versioned
# by the accounting, read leniently by calibrate.
StageUsage = dict[str, Any] | None


class LLMUsage(Part):
    retrieval: StageUsage = None
    reconcile: StageUsage = None
    judge: StageUsage = None
    judge_panel: dict[str, StageUsage] | None = None  # per panel model
    canaries: StageUsage = None  # the canaries' judge calls (absent offline)


class BatchGraph(GraphPins):
    injected_at: str | None = None


class BatchProvenance(Part):
    """One question batch: its graph instance, what it held, its questions and its runs."""

    batch: str  # "batch-01-of-02"
    graph: BatchGraph | None = None
    questions: int | None = None
    sessions: int | None = None
    runs: dict[str, str | None] = Field(default_factory=dict)  # stage -> Dagster run id
    seconds: dict[str, float | None] = Field(default_factory=dict)  # stage -> seconds


class StageRun(Part):
    """The run a stage's output came from; `{"materialized": false}` when it has none."""

    run_id: str | None = None
    seconds: float | None = None
    artifact: str | None = None  # the stage's artifact directory
    materialized: bool | None = None


class ArmsRecord(Part):
    """Which reference arms ran (score.arms), on what context, with which reader; never a
    pin: the system's own numbers are the same with or without them."""

    ran: list[str]
    version: int  # retrieve.arms.ARMS_VERSION: what an arm's context holds
    reader: str | None = None
    context: dict[str, str] = Field(default_factory=dict)  # arm -> what it was given
    questions: int
    unscored: dict[str, int] = Field(default_factory=dict)  # arm -> questions not decided
    # The arms' own accounting (reader and judge), apart from the system's: the LLM layer's.
    llm_usage: dict[str, Any] | None = None


class ProtocolStatus(Part):
    """One protocol check's outcome (score.protocol.CheckStatus)."""

    status: Literal["passed", "failed", "warning", "not_applicable"]
    detail: str
    effect: Literal["fails_run", "not_comparable", "warns"]  # what a failed status does


class Manifest(Record):
    """manifest.json of a run bundle."""

    VERSION: ClassVar[int] = MANIFEST_SCHEMA_VERSION
    FILE: ClassVar[str] = "manifest.json"

    pins: Pins
    comparable: bool
    # Protocol checks by name (absent before they existed): a failed one whose effect is
    # fails_run or not_comparable refuses every comparison of the run.
    protocol: dict[str, ProtocolStatus] | None = None
    repeat: RepeatRecord | None = None
    memory: MemoryCensus | None = None
    llm_usage: LLMUsage | None = None
    batches: list[BatchProvenance] | None = None
    stages: dict[str, StageRun]  # "injected_graph [batch-01-of-02]" per batch, K > 1
    started_at: str  # ISO 8601, as the writer's clock gave it
    ended_at: str
    dagster_run_id: str | None = None
    chain: str | None = None  # the chain (eval_chain driver or CLI run) this run was part of
    status: Literal["complete", "incomplete"] | None = None
    incomplete: InfrastructureReport | None = None
    # The options the run was made with, section by section as each stage recorded them
    # (eval_pipeline.config.RunConfig): the run configuration's own shape, which it owns.
    options: dict[str, Any] | None = None
    arms: ArmsRecord | None = None  # with --arms only

    @field_validator("started_at", "ended_at")
    @classmethod
    def _iso_time(cls, value: str) -> str:
        # Kept as the text written (readers parse it); only checked to be a timestamp.
        datetime.fromisoformat(value)
        return value
