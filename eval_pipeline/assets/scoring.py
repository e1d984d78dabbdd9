"""Scoring stage asset: scored_run, one run bundle per materialization.

It reads goldens and retrieval results, scores every question (deterministic metrics always,
judged metrics when a judge model is configured), aggregates per tier and writes the bundle.
Pins and timings of the upstream stages are collected from their latest materializations,
so the manifest says exactly what produced the numbers.
"""

import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline import __version__
from eval_pipeline.assets.resources import ProjectPaths
from eval_pipeline.corpus.convert import GOLDENS_FILE, MANIFEST_FILE
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.llm import LLMLayer, LLMSettings, ensure_no_confident_upload
from eval_pipeline.retrieve.results import QuestionRetrieval
from eval_pipeline.runs.bundle import write_bundle
from eval_pipeline.score.judges import judge_batch, offline_judge_results, prompt_hash
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize, summary_markdown
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.settings import REPO_DIR
from eval_pipeline.tier2.metrics import (
    add_tier2_metrics,
    criteria_judge_batch,
    criteria_prompt_hash,
)
from eval_pipeline.tier2.panels import tier2_panels, tier2_panels_markdown

GROUP = "score"
RETRIEVAL_DIR = "retrieval"
RETRIEVAL_RESULTS = "retrieval_results.jsonl"
RETRIEVAL_MANIFEST = "retrieval_manifest.json"
STAGES = (
    "longmemeval_upstream",
    "goldens",
    "session_fixtures",
    "injected_graph",
    "reconciled_graph",
    "retrieval_results",
)


class ScoringSettings(dg.ConfigurableResource):
    """Judge, tokenizer, gate and where bundles go. Default: offline, no judge."""

    judge: str = Field(default="offline", description="offline | PROVIDER:MODEL[@BASE_URL]")
    judge_concurrency: int = Field(default=4, ge=1)
    tokenizer: str = Field(default="o200k_base", description="pinned tiktoken encoding")
    gate_k: int = Field(default=10, ge=1, description="evidence recall gate: recall_all@k")
    runs_dir: str | None = Field(default=None, description="default: <state dir>/runs")
    label: str | None = None
    llm_cache_path: str | None = Field(default=None, description="default: state dir")

    def llm_layer(self) -> LLMLayer | None:
        if self.judge == "offline":
            return None
        extra = {"cache_path": Path(self.llm_cache_path)} if self.llm_cache_path else {}
        return LLMLayer(LLMSettings.from_specs({"judge": self.judge}, **extra))


def code_version() -> str:
    """Package version plus the git commit when running from a checkout."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{__version__}+{commit}" if commit else __version__


def _json_value(value: Any) -> Any:
    data = getattr(value, "value", value)
    try:
        json.dumps(data)
    except TypeError:
        return str(data)
    return data


def stage_records(instance: dg.DagsterInstance) -> dict[str, dict[str, Any]]:
    """Per upstream stage: its latest materialization's metadata and how long its step took."""
    out: dict[str, dict[str, Any]] = {}
    for key in STAGES:
        event = instance.get_latest_materialization_event(dg.AssetKey(key))
        if event is None or event.asset_materialization is None:
            out[key] = {"materialized": False}
            continue
        meta = {k: _json_value(v) for k, v in event.asset_materialization.metadata.items()}
        seconds = None
        stats = instance.get_run_step_stats(event.run_id, step_keys=[key])
        if stats and stats[0].end_time and stats[0].start_time:
            seconds = round(stats[0].end_time - stats[0].start_time, 3)
        out[key] = {"run_id": event.run_id, "seconds": seconds, "metadata": meta}
    return out


def build_manifest(
    corpus_manifest: dict,
    retrieval_manifest: dict,
    stages: dict,
    scoring: ScoringSettings,
    tokenizer: PayloadTokenizer,
    judge_usage: Any,
    started: datetime,
    ended: datetime,
) -> dict[str, Any]:
    graph_meta = stages.get("injected_graph", {}).get("metadata", {})
    reconcile_meta = stages.get("reconciled_graph", {}).get("metadata", {})
    retrieval_pins = retrieval_manifest.get("pins", {})
    return {
        "pins": {
            "corpus": {
                "upstream": corpus_manifest["upstream"],
                "sample_spec": corpus_manifest["sample_spec"],
                "subsampled": not corpus_manifest["comparable"],
                "tiers": corpus_manifest.get("tiers", "1"),
                "light": corpus_manifest.get("light", False),
                "tier2_digest": (corpus_manifest.get("tier2") or {}).get("corpus_digest"),
                "goldens_sha256": corpus_manifest["files"][GOLDENS_FILE],
                "fixtures_sha256": corpus_manifest["files"]["fixtures.jsonl"],
            },
            "graph": {
                k: graph_meta.get(k)
                for k in ("backend", "server_version", "schema_version", "fingerprint")
            },
            "reconciler": reconcile_meta.get("pins"),
            "retriever": retrieval_pins.get("retriever"),
            "scope": retrieval_pins.get("scope"),
            "top_k": retrieval_pins.get("top_k"),
            "reader": retrieval_pins.get("reader"),
            "judge": {
                "model": scoring.judge,
                "prompt_hash": prompt_hash() if scoring.judge != "offline" else None,
                "criteria_prompt_hash": (
                    criteria_prompt_hash() if scoring.judge != "offline" else None
                ),
            },
            "gate": {"evidence_recall": f"recall_all@{scoring.gate_k}"},
            "tokenizer": tokenizer.pin(),
            "code_version": code_version(),
        },
        "comparable": corpus_manifest["comparable"],
        "llm_usage": {
            "retrieval": retrieval_manifest.get("llm_usage"),
            "reconcile": reconcile_meta.get("llm_usage"),
            "judge": judge_usage,
        },
        "stages": {
            k: {"seconds": v.get("seconds"), "run_id": v.get("run_id")} for k, v in stages.items()
        },
        "started_at": started.isoformat(),
        "ended_at": ended.isoformat(),
    }


def add_tier2_scores(
    rows: list[dict], goldens: dict[str, dict], *, layer_spec: ScoringSettings
) -> list[dict]:
    """Tier-2 rows get citation metrics and the weighted-criteria judge (unscored offline)."""
    tier2 = [i for i, r in enumerate(rows) if r["tier"] == 2]
    if not tier2:
        return rows
    layer = layer_spec.llm_layer()
    try:
        criteria = criteria_judge_batch(
            layer,
            [(goldens[rows[i]["question_id"]], rows[i]["answer"]) for i in tier2],
            concurrency=layer_spec.judge_concurrency,
        )
    finally:
        if layer is not None:
            layer.close()
    out = list(rows)
    for i, result in zip(tier2, criteria, strict=True):
        out[i] = add_tier2_metrics(out[i], goldens[out[i]["question_id"]], criteria=result)
    return out


def summary_metadata(summary: dict) -> dict[str, dg.MetadataValue]:
    """One markdown entry per tier (and the tier-2 panels apart): the UI shows a short entry
    inline but folds a long one behind a link, so the first tier's tables stay in view."""
    out: dict[str, dg.MetadataValue] = {}
    for i, (tier, s) in enumerate(summary["tiers"].items()):
        tables = {k: v for k, v in s.items() if k != "panels"}
        key = "summary" if i == 0 else f"summary_tier{tier}"
        out[key] = dg.MetadataValue.md(summary_markdown({"tiers": {tier: tables}}))
        if s.get("panels"):
            out[f"tier{tier}_panels"] = dg.MetadataValue.md(tier2_panels_markdown(s["panels"]))
    return out


def headline(summary: dict) -> dict[str, float | int | None]:
    """Numeric values Dagster can chart across materializations (None when unscored)."""
    out: dict[str, float | int | None] = {}
    for tier, s in summary["tiers"].items():
        cov = s["coverage"]
        out[f"tier{tier}_coverage"] = cov["rate"] if cov else None
        out[f"tier{tier}_unscored"] = s["counts"]["unscored"]
        # Tier-2 turns are events, never user turns: only the all-evidence variant applies.
        variant = "upstream" if tier == "1" else "all"
        out[f"tier{tier}_turn_recall_any@5"] = s["retrieval"]["turn"][variant]["recall_any@5"][
            "mean"
        ]
        out[f"tier{tier}_session_recall_all@10"] = s["retrieval"]["session"]["all"][
            "recall_all@10"
        ]["mean"]
        out[f"tier{tier}_median_payload_tokens_covered"] = s["efficiency"][
            "median_payload_tokens_covered"
        ]
    return out


@dg.asset(
    group_name=GROUP,
    deps=["retrieval_results", "goldens"],
    description="Scores, summary and a run bundle (manifest, results, summary, hypotheses).",
)
def scored_run(
    context: dg.AssetExecutionContext, paths: ProjectPaths, scoring: ScoringSettings
) -> dg.MaterializeResult:
    # The UI path too: refuse to score while deepeval could upload results.
    ensure_no_confident_upload()
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    corpus_dir = paths.corpus_dir()
    goldens = {g["name"]: g for g in read_jsonl(corpus_dir / GOLDENS_FILE)}
    retrieval_dir = paths.root() / RETRIEVAL_DIR
    retrievals = [
        QuestionRetrieval.model_validate(r) for r in read_jsonl(retrieval_dir / RETRIEVAL_RESULTS)
    ]
    missing = sorted(set(goldens) - {r.question_id for r in retrievals})
    if missing:
        raise ValueError(
            f"retrieval_results lacks {len(missing)} golden question(s), e.g. {missing[:5]}: "
            "re-materialize retrieval_results for the current goldens"
        )
    tokenizer = PayloadTokenizer(scoring.tokenizer)
    layer = scoring.llm_layer()
    try:
        if layer is None:
            context.log.info("no judge configured: judged metrics are unscored")
            judged = [
                offline_judge_results(
                    bool(goldens[r.question_id]["additional_metadata"]["abstention"])
                )
                for r in retrievals
            ]
            judge_usage = None
        else:
            context.log.info(f"judging {len(retrievals)} questions with {scoring.judge}")
            judged = judge_batch(
                layer,
                [(goldens[r.question_id], r.retrieval_context, r.answer) for r in retrievals],
                concurrency=scoring.judge_concurrency,
            )
            judge_usage = layer.snapshot().to_metadata()
    finally:
        if layer is not None:
            layer.close()
    rows = [
        score_question(goldens[r.question_id], r, tokenizer, judged=j, gate_k=scoring.gate_k)
        for r, j in zip(retrievals, judged, strict=True)
    ]
    rows = add_tier2_scores(rows, goldens, layer_spec=scoring)
    summary = summarize(rows)
    if "2" in summary["tiers"]:
        summary["tiers"]["2"]["panels"] = tier2_panels(rows, goldens)
    corpus_manifest = json.loads((corpus_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    retrieval_manifest = json.loads(
        (retrieval_dir / RETRIEVAL_MANIFEST).read_text(encoding="utf-8")
    )
    stages = stage_records(context.instance)
    stages["scored_run"] = {"seconds": round(time.perf_counter() - t0, 3)}
    manifest = build_manifest(
        corpus_manifest,
        retrieval_manifest,
        stages,
        scoring,
        tokenizer,
        judge_usage,
        started,
        datetime.now(UTC),
    )
    manifest["dagster_run_id"] = context.run.run_id
    runs_dir = Path(scoring.runs_dir) if scoring.runs_dir else paths.runs_dir()
    run_dir = write_bundle(
        runs_dir,
        manifest=manifest,
        rows=rows,
        summary=summary,
        label=scoring.label,
        started=started,
    )
    context.log.info(f"run bundle: {run_dir}")
    metadata: dict[str, Any] = {
        **summary_metadata(summary),
        "run_dir": dg.MetadataValue.path(str(run_dir)),
        "questions": len(rows),
        "judge": scoring.judge,
        "comparable": manifest["comparable"],
    }
    # Only numbers go in as chartable values: an unscored rate is left out, not shown as 0.
    metadata.update({k: v for k, v in headline(summary).items() if v is not None})
    if judge_usage is not None:
        metadata["judge_usage"] = dg.MetadataValue.json(judge_usage)
    return dg.MaterializeResult(metadata=metadata)


SCORING_ASSETS = [scored_run]
SCORING_RESOURCES = {"scoring": ScoringSettings()}
