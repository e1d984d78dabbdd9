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

from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec


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
    tier: str = Field(default="1", pattern="^(1|2|all)$")
    light: bool = False

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


def _innermost_message(error: Any) -> str:
    """The root cause of a step failure, on one line (Dagster wraps it in its own errors)."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    lines = [line for line in error.message.strip().splitlines() if line.strip()]
    return lines[-1] if lines else error.message.strip()


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
    }
    graph: dict[str, Any] = {"backend": opts.backend}
    if opts.graph_uri:
        graph["uri"] = opts.graph_uri
        graph["database"] = opts.graph_database or (
            "memgraph" if opts.backend == "memgraph" else "eval"
        )
        graph["http_url"] = opts.graph_http_url
        for field, env in (("user", "EVAL_GRAPH_USER"), ("password", "EVAL_GRAPH_PASSWORD")):
            if os.environ.get(env):
                graph[field] = {"env": env}
    elif opts.graph_database:
        graph["database"] = opts.graph_database
    return {
        "resources": {
            "corpus": {"config": corpus},
            "graph": {"config": graph},
            "reconcile": {"config": {"reconciler": opts.reconciler, "llm": opts.reconciler_model}},
            "retrieval": {
                "config": {
                    "retriever": opts.retriever,
                    "scope": opts.scope,
                    "top_k": opts.top_k,
                    "reader": opts.reader,
                    "retrieval_agent": opts.retrieval_agent,
                }
            },
            "scoring": {
                "config": {"judge": opts.judge, "runs_dir": opts.runs_dir, "label": opts.label}
            },
        },
        "loggers": {"console": {"config": {"log_level": "INFO"}}},
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


# Repeats re-run only what can vary between runs of one configuration (retrieval, reading,
# judging) over the same graph; the noise floor comes from their spread.
REPEAT_ASSETS = ("retrieval_results", "scored_run")


def _execute(job, instance, run_config: dict, asset_selection=None) -> tuple[int, Path | None]:
    result = job.execute_in_process(
        run_config=run_config,
        instance=instance,
        raise_on_error=False,
        asset_selection=asset_selection,
    )
    run_dir = None
    for mat in result.get_asset_materialization_events():
        if mat.asset_key.to_user_string() == "scored_run":
            run_dir = Path(mat.materialization.metadata["run_dir"].value)
    if not result.success:
        failed = [
            f"{ev.step_key}: {_innermost_message(ev.step_failure_data.error)}"
            for ev in result.all_events
            if ev.is_step_failure and ev.step_failure_data and ev.step_failure_data.error
        ]
        failed += [
            f"check {ev.check_name}"
            for ev in result.get_asset_check_evaluations()
            if not ev.passed and ev.severity.value != "WARN"
        ]
        print(
            f"eval-pipeline: error: run {result.run_id} failed at " + "; ".join(failed),
            file=sys.stderr,
        )
        return 1, run_dir
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            print(f"warning: {ev.asset_key.to_user_string()}:{ev.check_name}", file=sys.stderr)
    if run_dir is None:
        print(f"eval-pipeline: error: run {result.run_id} wrote no run bundle", file=sys.stderr)
        return 1, None
    return 0, run_dir


def repeat_run_config(opts: RunOptions, k: int) -> dict:
    """Repeat k reads and judges afresh: its own LLM cache file, so it is not a replay of
    repeat 1, yet is itself reproducible from that file."""
    from eval_pipeline.settings import state_dir

    config = chain_run_config(opts)
    cache = str(state_dir() / f"llm_cache.repeat-{k}.sqlite3")
    resources = config["resources"]
    resources["retrieval"]["config"]["llm_cache_path"] = cache
    resources["scoring"]["config"]["llm_cache_path"] = cache
    resources["scoring"]["config"]["label"] = f"{opts.label or 'run'}-repeat{k}"
    return config


def run_chain(opts: RunOptions) -> int:
    import dagster as dg

    from eval_pipeline.dagster_home import local_instance
    from eval_pipeline.definitions import defs
    from eval_pipeline.llm import ensure_no_confident_upload

    # Refuse before anything runs, whatever the judge: deepeval would upload results.
    ensure_no_confident_upload()

    instance = local_instance()
    job = defs.resolve_job_def("eval_chain")
    code, run_dir = _execute(job, instance, chain_run_config(opts))
    if code != 0 or run_dir is None:
        return code or 1
    run_dirs = [run_dir]
    for k in range(2, opts.repeat + 1):
        selection = [dg.AssetKey(key) for key in REPEAT_ASSETS]
        code, run_dir = _execute(job, instance, repeat_run_config(opts, k), selection)
        if code != 0 or run_dir is None:
            return code or 1
        run_dirs.append(run_dir)
    print_summary(run_dirs[0])
    if len(run_dirs) > 1:
        print(
            f"{len(run_dirs)} repeats; calibrate with: eval-pipeline calibrate "
            + " ".join(str(d) for d in run_dirs)
        )
    for d in run_dirs:
        print(d)
    return 0
