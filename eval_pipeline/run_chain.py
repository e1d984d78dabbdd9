"""Run the eval chain headless, through the same Dagster job the UI launches.

Options become the job's resource config; secrets are never put in run config (Dagster
stores it): the graph credentials are passed as `{"env": NAME}` references instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eval_pipeline.corpus.batches import MAX_BATCHES
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec
from eval_pipeline.graph.dialects import DIALECTS
from eval_pipeline.llm.config import (
    ROLE_OPTION_PREFIXES,
    ROLE_SETTING_OPTIONS,
    StructuredOutputMode,
)


class RunOptions(BaseModel):
    """Everything `eval-pipeline run` can set (also the keys of a --config file)."""

    model_config = ConfigDict(extra="forbid")

    upstream: UpstreamSpec = Field(default_factory=UpstreamSpec)
    sample: SampleSpec = Field(default_factory=SampleSpec)
    runs_dir: str | None = None
    label: str | None = None
    reconciler: str = "extractive"
    reconciler_model: str = "offline"
    retriever: str = "fulltext"
    retrieval_agent: str = "offline"
    scope: str = "question"
    top_k: int = 10
    reader: str = "offline"
    judge: str = "offline"
    backend: str = "arcadedb"
    graph_uri: str | None = None
    graph_database: str | None = None
    graph_http_url: str | None = None
    repeat: int = Field(default=1, ge=1)
    # Repeats re-run reconciliation too (each repeat reconciles afresh under its own sample
    # identity), so an LLM reconciler's variance is part of the noise floor.
    repeat_reconcile: bool = False
    repeat_salt: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    wait_for_graph: float = Field(default=0.0, ge=0.0)
    # Question batches, each on its own graph instance, run in parallel (corpus/batches.py).
    batches: int = Field(default=1, ge=1, le=MAX_BATCHES)
    verbose: bool = False
    tier: str = Field(default="1", pattern="^(1|2|all)$")
    light: bool = False
    # Per-role LLM settings (--judge-timeout, --reader-max-tokens, ...); None: the provider's
    # default (for `local`: minutes of timeout, one request at a time, max_tokens per role).
    reader_timeout: float | None = Field(default=None, gt=0)
    reader_concurrency: int | None = Field(default=None, ge=1, le=1024)
    reader_max_tokens: int | None = Field(default=None, ge=1)
    reader_structured_output: StructuredOutputMode | None = None
    judge_timeout: float | None = Field(default=None, gt=0)
    judge_concurrency: int | None = Field(default=None, ge=1, le=1024)
    judge_max_tokens: int | None = Field(default=None, ge=1)
    judge_structured_output: StructuredOutputMode | None = None
    retrieval_agent_timeout: float | None = Field(default=None, gt=0)
    retrieval_agent_concurrency: int | None = Field(default=None, ge=1, le=1024)
    retrieval_agent_max_tokens: int | None = Field(default=None, ge=1)
    retrieval_agent_structured_output: StructuredOutputMode | None = None
    reconciler_timeout: float | None = Field(default=None, gt=0)
    reconciler_concurrency: int | None = Field(default=None, ge=1, le=1024)
    reconciler_max_tokens: int | None = Field(default=None, ge=1)
    reconciler_structured_output: StructuredOutputMode | None = None

    @field_validator("reader", "judge", "reconciler_model", "retrieval_agent")
    @classmethod
    def _provider_spec(cls, value: str) -> str:
        # Checked up front: a typo must not surface after the graph was built.
        from eval_pipeline.llm import LLMConfigError, parse_provider_spec

        try:
            parse_provider_spec(value)
        except LLMConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    def llm_roles(self) -> str:
        """The per-role LLM settings as the resources take them (JSON, only those given)."""
        roles: dict[str, dict[str, Any]] = {}
        for role, prefix in ROLE_OPTION_PREFIXES.items():
            for setting, suffix in ROLE_SETTING_OPTIONS.items():
                value = getattr(self, f"{prefix}_{suffix}".replace("-", "_"))
                if value is not None:
                    roles.setdefault(role, {})[setting] = value
        return json.dumps(roles, sort_keys=True)


def chain_run_config(opts: RunOptions) -> dict[str, Any]:
    up, sample = opts.upstream, opts.sample
    corpus = {
        "source": up.source,
        "path": up.path,
        "variant": up.variant,
        "revision": up.revision,
        "sha256": up.sha256,
        "cache_dir": up.cache_dir,
        **sample.model_dump(),
        "tiers": opts.tier,
        "light": opts.light,
        "batches": opts.batches,
    }
    graph: dict[str, Any] = {"backend": opts.backend, "lease_wait_s": opts.wait_for_graph}
    if opts.graph_uri:
        graph["uri"] = opts.graph_uri
        graph["database"] = opts.graph_database or DIALECTS[opts.backend].default_database
        graph["http_url"] = opts.graph_http_url
        for field, env in (("user", "EVAL_GRAPH_USER"), ("password", "EVAL_GRAPH_PASSWORD")):
            if os.environ.get(env):
                graph[field] = {"env": env}
    elif opts.graph_database:
        graph["database"] = opts.graph_database
    llm_roles = opts.llm_roles()
    return {
        "resources": {
            "corpus": {"config": corpus},
            "graph": {"config": graph},
            "reconcile": {
                "config": {
                    "reconciler": opts.reconciler,
                    "llm": opts.reconciler_model,
                    "llm_roles": llm_roles,
                }
            },
            "retrieval": {
                "config": {
                    "retriever": opts.retriever,
                    "scope": opts.scope,
                    "top_k": opts.top_k,
                    "reader": opts.reader,
                    "retrieval_agent": opts.retrieval_agent,
                    "llm_roles": llm_roles,
                }
            },
            "scoring": {
                "config": {
                    "judge": opts.judge,
                    "runs_dir": opts.runs_dir,
                    "label": opts.label,
                    "llm_roles": llm_roles,
                }
            },
        },
        # Dagster's own console lines only with --verbose: the CLI prints a line per stage and
        # one line per problem; the full log (tracebacks included) is in Dagster's event log.
        "loggers": {"console": {"config": {"log_level": "INFO" if opts.verbose else "CRITICAL"}}},
    }


def _fmt(value: float | None) -> str:
    return "unscored" if value is None else f"{100 * value:.1f}%"


def print_summary(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    for tier, s in summary["tiers"].items():
        c, cov = s["counts"], s["coverage"]
        # Tier-2 evidence is never a user turn: only the all-evidence variant applies there.
        variant = "upstream" if tier == "1" else "all"
        recall = s["retrieval"]["turn"][variant]["recall_any@5"]["mean"]
        tokens = s["efficiency"]["median_payload_tokens_covered"]
        coverage = _fmt(cov["rate"] if cov else None)
        tokens_text = "n/a" if tokens is None else f"{tokens:g}"
        print(
            f"tier {tier}: {c['questions']} questions, coverage {coverage} "
            f"({c['covered']} covered, {c['not_covered']} not, {c['unscored']} unscored), "
            f"turn recall_any@5 ({variant}) {_fmt(recall)}, "
            f"median payload tokens (covered) {tokens_text}, "
            f"abstention {s['abstention']['questions']} apart"
        )


# Exit codes of `eval-pipeline run` (the README lists them).
EXIT_OK = 0  # complete: every question measured
EXIT_FAILED = 1  # a stage failed (its error printed); no bundle, or one from an earlier stage
EXIT_BAD_INPUT = 2  # an option or input is wrong; nothing ran
EXIT_REFUSED = 3  # the graph instance is held by another chain, or holds someone else's data
EXIT_INCOMPLETE = 4  # a bundle was written, but some questions are unscored (infrastructure)

# Repeats re-run only what can vary between runs of one configuration (retrieval, reading,
# judging) over the same graph, and with `repeat_reconcile` the reconciliation too.
REPEAT_STAGES = ("retrieval_results", "scored_run")


class RepeatOutcome(BaseModel):
    """One chain (or repeat) as `eval-pipeline run` reports it."""

    code: int
    run_dir: Path | None = None
    incomplete: dict[str, Any] | None = None
    error: str | None = None


def _outcome(chain: Any) -> RepeatOutcome:
    """Exit code, bundle and error of a stage-by-stage chain (`ops.chain.ChainOutcome`)."""
    meta = chain.metadata("scored_run")
    run_dir = Path(meta["run_dir"]) if meta.get("run_dir") else None
    failed = chain.failed
    if failed is not None:
        return RepeatOutcome(
            code=EXIT_FAILED, run_dir=run_dir, error=f"stage {failed.name} failed: {failed.error}"
        )
    if run_dir is None:
        return RepeatOutcome(code=EXIT_FAILED, error="the chain wrote no run bundle")
    if chain.incomplete or meta.get("status") == "incomplete":
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        return RepeatOutcome(
            code=EXIT_INCOMPLETE, run_dir=run_dir, incomplete=summary["incomplete"]
        )
    return RepeatOutcome(code=EXIT_OK, run_dir=run_dir)


def _progress(i: int, n: int, stage: Any) -> None:
    """One line per stage on stderr (stdout is the summary, the bundle path last)."""
    text = stage.progress(i, n, with_error=False)  # errors are printed last, once
    if stage.warned_checks:
        text += f"; check(s) failed, not blocking: {', '.join(stage.warned_checks)}"
    print(text, file=sys.stderr, flush=True)


def repeat_run_config(opts: RunOptions, k: int, salt: str) -> dict:
    """Repeat k of N draws sample "<salt>/<k>": that identity is part of every LLM cache key
    (one cache file for all), so repeat k is a fresh sample, never a replay of another repeat,
    yet a re-run of repeat k with the same salt reproduces it from the cache."""
    config = chain_run_config(opts)
    identity = f"{salt}/{k}"
    resources = config["resources"]
    resources["retrieval"]["config"]["sample_identity"] = identity
    resources["scoring"]["config"].update(
        repeat_index=k,
        repeats=opts.repeat,
        repeat_salt=salt,
        repeat_includes_reconcile=opts.repeat_reconcile,
        label=f"{opts.label or 'run'}-repeat{k}",
    )
    if opts.repeat_reconcile:
        resources["reconcile"]["config"]["sample_identity"] = identity
    return config


def graph_store_for(opts: RunOptions):
    """The GraphStore the chain's `graph` resource will be (credentials from the env)."""
    return chain_resources(opts)["graph"]


def chain_resources(opts: RunOptions) -> dict[str, Any]:
    """The resources the chain's runs will build from `chain_run_config(opts)` (for preflight
    and for the lease held across the chain)."""
    from eval_pipeline.assets.reconcile import ReconcilerSettings
    from eval_pipeline.assets.resources import CorpusSettings
    from eval_pipeline.assets.retrieval import RetrievalSettings
    from eval_pipeline.assets.scoring import ScoringSettings
    from eval_pipeline.graph.store import GraphStore

    config = chain_run_config(opts)["resources"]
    graph = config["graph"]["config"]
    values = {k: v for k, v in graph.items() if not isinstance(v, dict)}
    for field in ("user", "password"):
        ref = graph.get(field)
        if isinstance(ref, dict):
            values[field] = os.environ.get(ref["env"])
    return {
        "corpus": CorpusSettings(**config["corpus"]["config"]),
        "graph": GraphStore(**values),
        "reconcile": ReconcilerSettings(**config["reconcile"]["config"]),
        "retrieval": RetrievalSettings(**config["retrieval"]["config"]),
        "scoring": ScoringSettings(**config["scoring"]["config"]),
    }


def _print_incomplete(outcome: RepeatOutcome) -> None:
    info = outcome.incomplete or {}
    causes = ", ".join(f"{k} {v}" for k, v in (info.get("by_cause") or {}).items())
    print(
        f"eval-pipeline: run incomplete: {info.get('questions', 0)} question(s) unscored by "
        f"infrastructure failures ({causes}); they are not counted as misses. Bundle: "
        f"{outcome.run_dir}",
        file=sys.stderr,
    )


def run_chain(opts: RunOptions) -> int:
    from eval_pipeline.llm import ensure_no_confident_upload
    from eval_pipeline.llm.local_server import owned_servers
    from eval_pipeline.preflight import preflight

    # Refuse before anything runs, whatever the judge: deepeval would upload results.
    ensure_no_confident_upload()
    # Every option checked before any run is launched, so before the graph is wiped.
    preflight(chain_resources(opts))
    # A local model server this run starts is stopped at its end (one already running, e.g.
    # from `eval-pipeline llm` or another run, is reused and left running).
    with owned_servers():
        return _run_chain(opts)


def _run_chain(opts: RunOptions) -> int:
    import secrets

    from eval_pipeline.assets.graph_lease import run_finished
    from eval_pipeline.dagster_home import local_instance
    from eval_pipeline.definitions import defs
    from eval_pipeline.graph.errors import ForeignDataError, GraphError
    from eval_pipeline.graph.lease import Lease, LeaseHeld
    from eval_pipeline.ops.batch_runs import holding_instances, run_batched
    from eval_pipeline.ops.chain import CHAIN_STAGES
    from eval_pipeline.ops.tags import CHAIN_PARENT_TAG, LEASE_HOLDER_TAG, STAGE_JOB_NAME

    instance = local_instance()
    job = defs.resolve_job_def(STAGE_JOB_NAME)
    chain = "cli-" + secrets.token_hex(8)
    tags = {LEASE_HOLDER_TAG: chain, CHAIN_PARENT_TAG: chain, "eval_pipeline/trigger": "cli"}
    salt = opts.repeat_salt or secrets.token_hex(4)
    store = graph_store_for(opts)
    outcomes: list[RepeatOutcome] = []

    def run(config: dict, stages: tuple[str, ...]) -> Any:
        return run_batched(
            job,
            instance,
            config,
            tags=tags,
            batches=opts.batches,
            stages=stages,
            on_stage=_progress,
        )

    try:
        # One chain per graph instance, across the chain and all its repeats: the lease is
        # held here, by this invocation, on every batch's instance; each of its runs carries
        # the holder in a tag.
        with holding_instances(
            store,
            opts.batches,
            Lease(holder=chain, what="eval-pipeline run"),
            wait_s=opts.wait_for_graph,
            run_finished=run_finished(instance),
        ):
            first = repeat_run_config(opts, 1, salt) if opts.repeat > 1 else chain_run_config(opts)
            outcomes.append(_outcome(run(first, CHAIN_STAGES)))
            stages = (
                ("reconciled_graph", *REPEAT_STAGES) if opts.repeat_reconcile else REPEAT_STAGES
            )
            for k in range(2, opts.repeat + 1):
                if outcomes[-1].code not in (EXIT_OK, EXIT_INCOMPLETE):
                    break
                outcomes.append(_outcome(run(repeat_run_config(opts, k, salt), stages)))
    except (LeaseHeld, ForeignDataError) as exc:
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except GraphError as exc:
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    return _report(outcomes, salt)


def _report(outcomes: list[RepeatOutcome], salt: str) -> int:
    """Summary, next steps and bundle paths on stdout (the last line a bundle); errors last on
    stderr. Returns the exit code: a failure wins over an incomplete run."""
    run_dirs = [o.run_dir for o in outcomes if o.run_dir is not None]
    if run_dirs:
        print_summary(run_dirs[0])
        report = run_dirs[0] / "report.html"
        if report.is_file():
            print(f"report: {report}")
        print_next_steps(run_dirs)
    if len(run_dirs) > 1:
        print(
            f"{len(run_dirs)} repeats (salt {salt}); calibrate with: eval-pipeline calibrate "
            + " ".join(str(d) for d in run_dirs)
        )
    for d in run_dirs:
        print(d)
    for outcome in outcomes:
        if outcome.code == EXIT_INCOMPLETE:
            _print_incomplete(outcome)
        elif outcome.error:
            print(f"eval-pipeline: error: {outcome.error}", file=sys.stderr)
    worst = max(outcomes, key=lambda o: (o.code != EXIT_OK, o.code == EXIT_FAILED), default=None)
    return worst.code if worst is not None else EXIT_FAILED


def print_next_steps(run_dirs: list[Path]) -> None:
    from eval_pipeline.dagster_home import ensure_dagster_home

    run = run_dirs[-1]
    home = ensure_dagster_home()
    print("next:")
    print(f"  compare with a baseline:  eval-pipeline compare BASELINE_RUN {run}")
    if len(run_dirs) == 1:
        print("  measure the noise floor:  eval-pipeline run --repeat 3 (same options)")
    print(
        f"  browse it in the UI:      DAGSTER_HOME={home} dagster dev -m eval_pipeline.definitions"
    )
