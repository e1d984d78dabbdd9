"""The run configuration: every option of a chain, stated once.

`RunConfig` is the one source of
- the flags of `eval-pipeline run` (`run_cli.add_run_options`: a field with `cli=` metadata
  is a flag, its help is the field's description),
- the keys of a `--config` file (a section with its fields, or a flag's name),
- the Dagster run config: each section is the config of the resource of the same name
  (`assets/resources.py`), nested typed `Config`, no JSON strings,
- preflight (`preflight.py` checks a `RunConfig`),
- the options a run's manifest records (`RunConfig.recorded()`).

Adding an option is one field here plus its use. Secrets are never options: graph credentials
and model keys are read from the environment where they are used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import dagster as dg
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from eval_pipeline.corpus.batches import MAX_BATCHES
from eval_pipeline.corpus.errata import Mode as ErrataMode
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import HF_REVISION, UpstreamSpec, check_variant
from eval_pipeline.llm.config import parse_provider_spec
from eval_pipeline.llm.errors import LLMConfigError
from eval_pipeline.llm.names import STRUCTURED_OUTPUT_MODES
from eval_pipeline.retrieve.arms import parse_arms
from eval_pipeline.retrieve.reader_prompts import DEFAULT_READER_PROMPT, ReaderPrompt
from eval_pipeline.score.panel import parse_panel, split_specs
from eval_pipeline.score.verdict_choice import VerdictChoice, choose_verdict
from eval_pipeline.settings import state_dir as default_state_dir

# A run directory is named <stamp>-<label>-<6 hex>[-repeatN]: 64 characters keep it far from
# the file system's 255-byte name limit (a 300-character label failed with ENAMETOOLONG only
# when the bundle was written, after the graph was rebuilt).
MAX_LABEL_CHARS = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Tier = Literal["1", "2", "all"]
Scope = Literal["question", "batch"]
Backend = Literal["arcadedb", "memgraph"]


class Section(dg.Config):
    """A part of the run configuration: an unknown key is refused, never ignored, and a value
    of another type is refused, never coerced (`sample: true` is not 1, `top_k: 5.0` not 5,
    `canaries: "no"` not False); an int is still a float."""

    model_config = ConfigDict(extra="forbid", strict=True)


def cli(flag: str, metavar: str | None = None, aliases: tuple[str, ...] = ()) -> dict[str, Any]:
    """Field metadata: this field is the `eval-pipeline run` flag `flag` (also spelled as
    each of `aliases`, on the command line and in a `--config` file)."""
    return {
        "cli": flag,
        **({"metavar": metavar} if metavar else {}),
        **({"aliases": list(aliases)} if aliases else {}),
    }


class ModelRole(Section):
    """One model role: which model answers (`model`, the CLI form PROVIDER:MODEL[@BASE_URL])
    and how the layer calls it. Unset settings: the provider's defaults (for `local`: 600 s,
    one request at a time, an output budget sized per role; elsewhere 60 s, 8 in flight,
    1024 tokens)."""

    model: str = Field(default="offline", description="offline | PROVIDER:MODEL[@BASE_URL]")
    timeout_s: float | None = Field(default=None, gt=0, description="seconds per request")
    concurrency: int | None = Field(default=None, ge=1, le=1024, description="requests in flight")
    max_tokens: int | None = Field(default=None, ge=1, description="output token budget")
    # A plain string: Dagster's config types take no optional Literal.
    structured_output: str | None = Field(
        default=None,
        description="first mode tried; a server refusing it is asked in the next",
        json_schema_extra={"choices": list(STRUCTURED_OUTPUT_MODES)},
    )

    @model_validator(mode="before")
    @classmethod
    def _spec_alone(cls, data: Any) -> Any:
        # `judge: openai:gpt-4o-mini` in a --config section: the model, settings unset.
        return {"model": data} if isinstance(data, str) else data

    @field_validator("model")
    @classmethod
    def _provider_spec(cls, value: str) -> str:
        # Checked as the option is read: a typo must not surface after the graph was built.
        try:
            parse_provider_spec(value)
        except LLMConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("structured_output")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        if value is not None and value not in STRUCTURED_OUTPUT_MODES:
            raise ValueError(f"must be one of {', '.join(STRUCTURED_OUTPUT_MODES)}")
        return value

    @property
    def offline(self) -> bool:
        return self.model.strip() == "offline"

    def overrides(self) -> dict[str, Any]:
        """The settings given (every field but the model), as `RoleConfig` fields."""
        values = self.model_dump(exclude={"model"}, exclude_none=True)
        return values


def _role(flag: str, prefix: str, help_: str) -> Any:
    """A model role field: `flag` names its model; `--PREFIX-timeout` etc. its settings."""
    return Field(
        default_factory=ModelRole,
        description=help_,
        json_schema_extra={"cli": flag, "metavar": "P:MODEL", "cli_prefix": prefix},
    )


class CorpusConfig(Section):
    """Which upstream file, which sample, which tiers, canaries, how many question batches."""

    upstream: str = Field(
        default="sample",
        description="a LongMemEval JSON file; 'sample' for the bundled sample, 'hf' for "
        "Hugging Face at --revision",
        json_schema_extra=cli("--upstream", "PATH"),
    )
    variant: str | None = Field(
        default=None,
        description="what the file is: s or m for Hugging Face (default s), any label for a "
        "local file (default: what its sha256 pin identifies, else 'local'); oracle is refused",
        json_schema_extra=cli("--variant", "V"),
    )
    revision: str = Field(
        default=HF_REVISION,
        description="Hugging Face commit (40 hex)",
        json_schema_extra=cli("--revision", "SHA"),
    )
    sha256: str | None = Field(
        default=None,
        description="expected sha256 of the upstream file (overrides the pin)",
        json_schema_extra=cli("--sha256", "SHA256"),
    )
    cache_dir: str | None = Field(default=None, description="a pre-seeded Hugging Face cache")
    sample: int | None = Field(
        default=None,
        ge=1,
        description="questions to draw (default: all; above what the file holds: all, with a note)",
        json_schema_extra=cli("--sample", "N"),
    )
    seed: int = Field(default=0, description="sampling seed", json_schema_extra=cli("--seed", "S"))
    floor: int | None = Field(
        default=None,
        ge=0,
        description="minimum questions per stratum (default 1, or 0 for a sample smaller "
        "than the number of strata)",
        json_schema_extra=cli("--floor"),
    )
    max_sessions_per_question: int | None = Field(
        default=None,
        ge=1,
        description="keep evidence sessions and at most K sessions per haystack (non-comparable)",
        json_schema_extra=cli("--max-sessions-per-question", "K"),
    )
    tier: Tier = Field(
        default="1",
        description="1: LongMemEval; 2: the authored organizational-memory scenarios; all",
        json_schema_extra=cli("--tier"),
    )
    light: bool = Field(
        default=False,
        description="tier 2, light scenarios only (one per use case): a quick check",
        json_schema_extra=cli("--light"),
    )
    canaries: bool = Field(
        default=True,
        description="plant the canary sessions and questions, scored apart: a memory system "
        "that cannot return a planted fact fails the run (--no-canaries: a retriever or "
        "memory system that cannot see them by design)",
        json_schema_extra=cli("--canaries"),
    )
    batches: int = Field(
        default=1,
        ge=1,
        le=MAX_BATCHES,
        description="split the questions into K batches, each on a graph instance of its own, "
        "run in parallel (embedded: K servers; else put {batch} in --graph-uri)",
        json_schema_extra=cli("--batches", "K"),
    )

    errata: ErrataMode = Field(
        default="flag",
        description="dataset errata of the exact file (docs/errata.md): flag marks its "
        "questions' rows, exclude leaves suspect questions out of the sample, off ignores them",
        json_schema_extra=cli("--errata"),
    )
    errata_file: str | None = Field(
        default=None,
        description="your own errata file (default: the bundled errata; either applies only "
        "to the file whose sha256 it names)",
        json_schema_extra=cli("--errata-file", "FILE"),
    )

    @field_validator("variant")
    @classmethod
    def _variant(cls, value: str | None) -> str | None:
        check_variant(value)  # a refused label (oracle) stops here, before anything runs
        return value

    def upstream_spec(self) -> UpstreamSpec:
        common = {
            "variant": self.variant,
            "sha256": self.sha256,
            "cache_dir": self.cache_dir,
            "revision": self.revision,
        }
        if self.upstream == "sample":
            return UpstreamSpec(source="sample", **common)
        if self.upstream in ("hf", "huggingface"):
            return UpstreamSpec(source="huggingface", **common)
        return UpstreamSpec(source="path", path=self.upstream, **common)

    def sample_spec(self) -> SampleSpec:
        return SampleSpec(
            sample=self.sample,
            seed=self.seed,
            floor=self.floor,
            max_sessions_per_question=self.max_sessions_per_question,
        )

    def tier_selection(self) -> tuple[bool, bool]:
        """(tier 1 included, tier 2 included); a light run is a tier-2 quick check."""
        return self.tier in ("1", "all"), self.tier in ("2", "all") or self.light


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


class GraphConfig(Section):
    """Which graph server. Unset: the embedded ArcadeDB, unless the deployment's environment
    names one (EVAL_GRAPH_URI, EVAL_GRAPH_BACKEND, ...). Credentials come only from
    EVAL_GRAPH_USER / EVAL_GRAPH_PASSWORD, never from here."""

    backend: Backend = Field(
        default_factory=lambda: (
            _env("EVAL_GRAPH_BACKEND")  # type: ignore[arg-type]
            or ("memgraph" if _env("EVAL_GRAPH_URI") else "arcadedb")
        ),
        description="graph dialect (default: memgraph when EVAL_GRAPH_URI names a server, "
        "else arcadedb)",
        json_schema_extra={**cli("--backend"), "env": "EVAL_GRAPH_BACKEND"},
    )
    uri: str | None = Field(
        default_factory=lambda: _env("EVAL_GRAPH_URI"),
        description="bolt://host:port (default: embedded)",
        json_schema_extra={**cli("--graph-uri", "URI"), "env": "EVAL_GRAPH_URI"},
    )
    database: str | None = Field(
        default_factory=lambda: _env("EVAL_GRAPH_DATABASE"),
        description="database on that server (default: the backend's)",
        json_schema_extra={**cli("--graph-database", "NAME"), "env": "EVAL_GRAPH_DATABASE"},
    )
    http_url: str | None = Field(
        default_factory=lambda: _env("EVAL_GRAPH_HTTP_URL"),
        description="ArcadeDB HTTP API, for indexes",
        json_schema_extra={**cli("--graph-http-url", "URL"), "env": "EVAL_GRAPH_HTTP_URL"},
    )
    batch_uri: str | None = Field(
        default_factory=lambda: _env("EVAL_GRAPH_BATCH_URI"),
        description="bolt URI of each question batch's instance, {batch} its number (a run "
        "over K > 1 batches; unset: the URI itself names one per batch)",
        json_schema_extra={"env": "EVAL_GRAPH_BATCH_URI"},
    )
    wait_s: float = Field(
        default=0.0,
        ge=0.0,
        description="wait this long for another chain holding the graph instance (default: refuse)",
        json_schema_extra=cli("--wait-for-graph", "SECONDS"),
    )
    data_dir: str | None = Field(
        default=None, description="embedded server directory (default: <state>/graph/arcadedb)"
    )
    heap: str = Field(default="1g", description="embedded server JVM heap (-Xmx)")
    keep_running: bool = Field(
        default=True,
        description="leave the embedded graph server(s) a run started running for the next "
        "run (warm: no JVM start; the run says so, with the command that stops them); off: "
        "the run stops them at its end",
        json_schema_extra=cli("--keep-graph-running"),
    )


class ReconcileConfig(Section):
    """Memory formation: which reconciler (or memory system), with what model."""

    reconciler: str = Field(
        default="extractive",
        description="the memory under test: none (the raw transcript) | extractive | "
        "consolidating | llm | mem0 | mem0-platform | a registered plug-in | pkg.mod:Class",
        json_schema_extra=cli("--memory", "NAME", aliases=("--reconciler",)),
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="keyword options for the reconciler's constructor"
    )
    model: ModelRole = _role("--reconciler-model", "reconciler", "model for --reconciler llm")
    concurrency: int | None = Field(
        default=None, ge=1, description="sessions in flight; unset: the reconciler's own, else 4"
    )
    processes: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="worker processes for a CPU-bound reconciler (extractive); unset: one per "
        "core; 1: in the run's own process. Other reconcilers run in the run's process",
        json_schema_extra=cli("--reconcile-processes", "N"),
    )
    redo: bool = Field(default=False, description="reconcile sessions already done, too")
    completeness_threshold: float = Field(
        default=0.95, ge=0.0, le=1.0, description="the completeness check warns below this"
    )


class RetrievalConfig(Section):
    """Retrieval and reading: which retriever at which scope and k, which reader."""

    retriever: str = Field(
        default="fulltext",
        description="fulltext | dense | hybrid | graph_agent | pkg.mod:Class",
        json_schema_extra=cli("--retriever", "NAME"),
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="keyword options for the retriever's constructor"
    )
    scope: Scope = Field(
        default="question", description="retrieval scope", json_schema_extra=cli("--scope")
    )
    top_k: int = Field(
        default=10,
        ge=1,
        description="items retrieved per question",
        json_schema_extra=cli("--top-k", "K"),
    )
    reader: ModelRole = _role("--reader", "reader", "reader model (default: offline)")
    reader_prompt: ReaderPrompt = Field(
        default=DEFAULT_READER_PROMPT,
        description="what a reader model is asked: project (the project's prompt), "
        "longmemeval (LongMemEval's reader prompt, in our words) or longmemeval-cot (its "
        "chain-of-thought variant); a pin: runs under different prompts do not compare",
        json_schema_extra=cli("--reader-prompt", "NAME"),
    )
    agent: ModelRole = _role("--retrieval-agent", "retrieval-agent", "model for graph_agent")
    payload_cap_tokens: int = Field(default=4000, ge=1, description="graph_agent context cap")
    max_steps: int = Field(default=6, ge=1, description="graph_agent step budget")
    query_timeout_s: float = Field(default=10.0, gt=0, description="one agent query, seconds")
    max_rows: int = Field(default=500, ge=1, description="row cap of one agent query")
    arms: list[str] = Field(
        default_factory=list,
        description="reference arms on the same questions, judged apart: floor (the reader "
        "with no memory), ceiling (the reader given the evidence sessions); with an LLM "
        "reader, each arm is one more reader call per question",
        json_schema_extra=cli("--arms", "floor,ceiling"),
    )

    @field_validator("arms", mode="before")
    @classmethod
    def _known_arms(cls, value: Any) -> list[str]:
        return parse_arms(value)  # ValueError names the unknown or repeated arm


class ScoringConfig(Section):
    """Judging, tokens, the gate and where bundles go."""

    judge: ModelRole = _role("--judge", "judge", "judge model (default: none, unscored)")
    method: str = Field(
        default="longmemeval",
        description="the answer judge: longmemeval | a registered judge | pkg.mod:Class",
        json_schema_extra=cli("--judge-method", "NAME"),
    )
    method_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword options for the answer judge's constructor"
    )
    # None: not asked, so the judge decides (`verdict_choice`): its one reading is there.
    verdict: str | None = Field(
        default=None,
        description="how the built-in judge reaches its yes/no: reference (LongMemEval's "
        "prompt) | reasoned | match (rules, no model) | hybrid | cascade (docs/judge.md); "
        "unset: reference with a judge model, match without",
        json_schema_extra=cli("--judge-verdict", "METHOD"),
    )
    judge_panel: list[str] = Field(
        default_factory=list,
        description="score the answers again under each of these judges: METHOD (needing "
        "no model: match), METHOD=MODEL (reference=local:smollm2-135m-instruct) or MODEL "
        "(--judge-verdict with it; unset: reference); compare calls a delta real only if every "
        "member agrees",
        json_schema_extra=cli("--judge-panel", "A,B,..."),
    )
    tokenizer: str = Field(default="o200k_base", description="pinned tiktoken encoding")
    gate_k: int = Field(default=10, ge=1, description="evidence recall gate: recall_all@k")
    runs_dir: str | None = Field(
        default=None,
        description="where run bundles go (default: <state>/runs)",
        json_schema_extra=cli("--runs-dir", "DIR"),
    )
    label: str | None = Field(
        default=None,
        max_length=MAX_LABEL_CHARS,
        description="a label in the run directory name",
        json_schema_extra=cli("--label", "L"),
    )

    @field_validator("runs_dir", "label")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        # "The bundle path is stdout's last line": a newline in it would make that a lie.
        if value is not None and _CONTROL.search(value):
            raise ValueError("must not hold a newline or another control character")
        return value

    @field_validator("verdict")
    @classmethod
    def _known_verdict(cls, value: str | None) -> str | None:
        choose_verdict(value, with_model=False)  # MethodError (a ValueError) names the known
        return value

    @field_validator("judge_panel", mode="before")
    @classmethod
    def _panel_list(cls, value: Any) -> Any:
        return split_specs(value)  # the CLI's A,B,... ; a --config list as it is

    @field_validator("judge_panel")
    @classmethod
    def _known_panel(cls, value: list[str], info: ValidationInfo) -> list[str]:
        # PanelError (a ValueError) names the member; a bare MODEL takes the run's verdict.
        parse_panel(value, info.data.get("verdict"))
        return value

    def verdict_choice(self) -> VerdictChoice:
        """The verdict method that decides this run's answer verdicts, and whether it was
        asked for or is the default for its judge (a model: `reference`; none: `match`)."""
        return choose_verdict(self.verdict, with_model=not self.judge.offline)


class RepeatConfig(Section):
    """Repeats of one configuration, for the noise floor (`eval-pipeline calibrate`)."""

    count: int = Field(
        default=1,
        ge=1,
        description="N runs of retrieval and scoring over one graph; each repeat is a fresh "
        "sample of every model call",
        json_schema_extra=cli("--repeat", "N"),
    )
    reconcile: bool = Field(
        default=False,
        description="repeats reconcile afresh too (measures an LLM reconciler's variance)",
        json_schema_extra=cli("--repeat-reconcile"),
    )
    salt: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the repeats' sample salt (default: a new one): give a run's salt to "
        "reproduce its repeats from the LLM cache",
        json_schema_extra=cli("--repeat-salt", "SALT"),
    )
    # Set by the chain for each repeat, never by a user: repeat `index` of `count` draws the
    # sample "<salt>/<index>".
    index: int | None = Field(default=None, ge=1, description="this repeat (set by the chain)")

    @property
    def sample_identity(self) -> str | None:
        return f"{self.salt}/{self.index}" if self.index is not None and self.salt else None


class ComparisonConfig(Section):
    """Which baseline the run is compared with, and which noise floor decides."""

    baseline: str = Field(
        default="previous",
        description="a run directory, a run name in the runs dir, or 'previous': the newest "
        "earlier run with the same comparability pins",
    )
    noise_floor: str | None = Field(
        default=None,
        description="a noise floor file; default: the one stored for the configuration",
    )
    candidate: str | None = Field(
        default=None, description="default: the bundle this chain's scored_run wrote"
    )


class CalibrationConfig(Section):
    """Which repeats calibrate the noise floor, and where it is saved."""

    runs: list[str] | None = Field(
        default=None,
        description="run directories or names to calibrate over; default: calibrate nothing, "
        "report the floor in force",
    )
    out: str | None = Field(
        default=None, description="default: <runs_dir>/noise_floors/<configuration key>.json"
    )


class PathsConfig(Section):
    """Where the pipeline keeps its state (artifacts, runs, the embedded graph)."""

    state_dir: str | None = Field(
        default=None, description="default: EVAL_PIPELINE_HOME, else <repo>/.eval_state"
    )
    # Not an option of the measurement (paths are never recorded): which chain goes on.
    resume: str | None = Field(
        default=None,
        description="continue an interrupted or incomplete chain with its own options: its "
        "chain run id (printed on Ctrl-C), or its bundle (a path or a name in the runs dir); "
        "stages it finished are kept, retrieved questions are not retrieved again",
        json_schema_extra=cli("--resume", "RUN"),
    )

    def root(self) -> Path:
        """The state directory: this option, else EVAL_PIPELINE_HOME, else the default."""
        if self.state_dir:
            return Path(self.state_dir).expanduser().resolve()
        return default_state_dir()

    def runs_dir(self, scoring: ScoringConfig) -> Path:
        return Path(scoring.runs_dir).expanduser() if scoring.runs_dir else self.root() / "runs"


# Section name → its config class: the resource keys of the Dagster layer, in chain order.
SECTIONS: dict[str, type[dg.Config]] = {
    "paths": PathsConfig,
    "corpus": CorpusConfig,
    "graph": GraphConfig,
    "reconcile": ReconcileConfig,
    "retrieval": RetrievalConfig,
    "scoring": ScoringConfig,
    "repeat": RepeatConfig,
    "comparison": ComparisonConfig,
    "calibration": CalibrationConfig,
}


class RunConfig(Section):
    """Every option of a chain."""

    paths: PathsConfig = Field(default_factory=PathsConfig)
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    reconcile: ReconcileConfig = Field(default_factory=ReconcileConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    repeat: RepeatConfig = Field(default_factory=RepeatConfig)
    comparison: ComparisonConfig = Field(default_factory=ComparisonConfig)
    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig)

    def section(self, name: str) -> dg.Config:
        return getattr(self, name)

    def resources_config(self) -> dict[str, Any]:
        """The Dagster run config's `resources` part: each section as its resource's config."""
        return {name: {"config": self.section(name).model_dump()} for name in SECTIONS}

    def recorded(self) -> dict[str, Any]:
        """The options as the manifest records them (where state lives is not an option of
        the measurement)."""
        return self.model_dump(mode="json", exclude={"paths"})

    def for_repeat(self, index: int, salt: str) -> RunConfig:
        """Repeat `index` of this configuration: its own sample identity and label."""
        repeat = self.repeat.model_copy(update={"index": index, "salt": salt})
        label = f"{self.scoring.label or 'run'}-repeat{index}"
        return self.model_copy(
            update={"repeat": repeat, "scoring": self.scoring.model_copy(update={"label": label})}
        )
