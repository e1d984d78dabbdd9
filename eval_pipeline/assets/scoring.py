"""Scoring stage asset: scored_run, one run bundle per materialization.

It reads the retrieval results this run consumes (this run's materialization, else the
latest) and, through the record chain of that artifact, the goldens, fixtures and graph they
came from; scores every question (deterministic metrics always, judged metrics when a judge
model is configured), aggregates per tier and writes the bundle. Every pin and count in the
manifest comes from that chain of records and from what retrieval read in the graph, never
from whatever is latest on the instance. A question left unscored by an infrastructure
failure makes the bundle `incomplete`; the blocking check `scored_run_complete` then fails.
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
from eval_pipeline.assets import GROUP
from eval_pipeline.assets.artifacts import (
    ARTIFACT_ASSETS,
    StageRecord,
    materialization_metadata,
)
from eval_pipeline.assets.batches import (
    BATCHED_ASSETS,
    batch_provenance,
    batch_retrievals,
    merged_graph_pins,
    merged_memory,
)
from eval_pipeline.assets.resources import CorpusSettings, ProjectPaths
from eval_pipeline.corpus.batches import BatchKey, partitioning_pin
from eval_pipeline.corpus.convert import GOLDENS_FILE, MANIFEST_FILE
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.llm import LLMLayer, LLMSettings, ensure_no_confident_upload
from eval_pipeline.llm.accounting import merge_usage
from eval_pipeline.llm.config import parse_role_settings
from eval_pipeline.ops.sensors import records_failures
from eval_pipeline.ops.tags import CHAIN_PARENT_TAG
from eval_pipeline.retrieve.results import QuestionRetrieval
from eval_pipeline.runs.bundle import write_bundle
from eval_pipeline.runs.calibrate import floor_key
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.report import write_run_report
from eval_pipeline.score.judge_check import judge_agreement_pins
from eval_pipeline.score.judges import judge_batch, offline_judge_results, prompt_hash
from eval_pipeline.score.scorer import retrieval_unmeasured, score_question
from eval_pipeline.score.summary import summarize, summary_markdown
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.settings import REPO_DIR
from eval_pipeline.tier2.ingestion import INGESTION_FILE
from eval_pipeline.tier2.invariant_judge import invariant_judge_batch
from eval_pipeline.tier2.metrics import (
    add_tier2_metrics,
    criteria_judge_batch,
    criteria_prompt_hash,
)
from eval_pipeline.tier2.panels import tier2_panels, tier2_panels_markdown
from eval_pipeline.tier2.pass_criteria import pass_report_markdown, tier2_pass_report

RESULTS_FILE = "retrieval_results.jsonl"
STAGES = ARTIFACT_ASSETS  # the stages a bundle's numbers come from, in chain order


class ScoringSettings(dg.ConfigurableResource):
    """Judge, tokenizer, gate and where bundles go. Default: offline, no judge."""

    judge: str = Field(default="offline", description="offline | PROVIDER:MODEL[@BASE_URL]")
    judge_concurrency: int = Field(default=4, ge=1)
    llm_roles: str = Field(
        default="{}",
        description="JSON {role: {timeout_s, concurrency, max_tokens, structured_output}}: "
        "per-role LLM settings (eval-pipeline run's --judge-timeout etc.)",
    )
    tokenizer: str = Field(default="o200k_base", description="pinned tiktoken encoding")
    gate_k: int = Field(default=10, ge=1, description="evidence recall gate: recall_all@k")
    runs_dir: str | None = Field(default=None, description="default: <state dir>/runs")
    label: str | None = None
    llm_cache_path: str | None = Field(default=None, description="default: state dir")
    # Repeats (`eval-pipeline run --repeat N`): repeat k of N draws sample "<salt>/<k>".
    repeat_index: int | None = Field(default=None, ge=1)
    repeats: int | None = Field(default=None, ge=1)
    repeat_salt: str | None = None
    repeat_includes_reconcile: bool = False

    @property
    def sample_identity(self) -> str | None:
        if self.repeat_index is None or not self.repeat_salt:
            return None
        return f"{self.repeat_salt}/{self.repeat_index}"

    def repeat_record(self) -> dict[str, Any] | None:
        """`manifest["repeat"]`: which sample of a repeated configuration this run is."""
        if self.sample_identity is None:
            return None
        return {
            "index": self.repeat_index,
            "of": self.repeats,
            "salt": self.repeat_salt,
            "sample_identity": self.sample_identity,
            "includes_reconcile": self.repeat_includes_reconcile,
        }

    def llm_layer(self) -> LLMLayer | None:
        if self.judge == "offline":
            return None
        extra: dict[str, Any] = {}
        if self.llm_cache_path:
            extra["cache_path"] = Path(self.llm_cache_path)
        if self.sample_identity:
            extra["sample_identity"] = self.sample_identity
        overrides = parse_role_settings(self.llm_roles)
        return LLMLayer(
            LLMSettings.from_specs({"judge": self.judge}, role_overrides=overrides, **extra)
        )


def judge_role_pins(scoring: ScoringSettings) -> dict[str, Any] | None:
    if scoring.judge == "offline":
        return None
    overrides = parse_role_settings(scoring.llm_roles)
    return (
        LLMSettings.from_specs({"judge": scoring.judge}, role_overrides=overrides)
        .role("judge")
        .pins()
    )


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


def stage_records(
    instance: dg.DagsterInstance, batches: list[StageRecord]
) -> dict[str, dict[str, Any]]:
    """Per stage this run's scores come from, following the records retrieval consumed (never
    the latest materializations on the instance): its Dagster run and how long its step took.
    With several question batches, each graph stage is listed per batch
    (`injected_graph [batch-01-of-02]`)."""
    out: dict[str, dict[str, Any]] = {}
    for key in STAGES:
        for retrieval in batches if key in BATCHED_ASSETS else batches[:1]:
            name = key
            batch = retrieval.facts.get("batch")
            if key in BATCHED_ASSETS and len(batches) > 1 and batch:
                name = f"{key} [{BatchKey.model_validate(batch).key}]"
            out[name] = _stage_record(instance, retrieval.find(key), key)
    return out


def _stage_record(
    instance: dg.DagsterInstance, record: StageRecord | None, key: str
) -> dict[str, Any]:
    if record is None:
        return {"materialized": False}
    seconds = None
    stats = instance.get_run_step_stats(record.run_id, step_keys=[key])
    if stats and stats[0].end_time and stats[0].start_time:
        seconds = round(stats[0].end_time - stats[0].start_time, 3)
    return {"run_id": record.run_id, "seconds": seconds, "artifact": record.dir}


def memory_pins(memory: dict[str, Any]) -> dict[str, Any] | None:
    """The reconciler pins of the memory the graph held when retrieval read it: one
    configuration's pins, or `{"mixed": ...}` when sessions came from several (or none)."""
    configs = memory.get("configurations") or []
    if len(configs) == 1 and configs[0].get("pins") is not None and not memory.get("pending"):
        c = configs[0]
        return {**c["pins"], "pins_key": c["pins_key"], "sessions_failed": c["failed"]}
    if not configs:
        return None
    return {
        "mixed": [
            {
                "pins_key": c["pins_key"],
                "name": (c.get("pins") or {}).get("name"),
                "done": c["done"],
                "failed": c["failed"],
            }
            for c in configs
        ],
        "pending": memory.get("pending", 0),
    }


def build_manifest(
    corpus_manifest: dict,
    batches: list[StageRecord],
    stages: dict,
    scoring: ScoringSettings,
    tokenizer: PayloadTokenizer,
    judge_usage: Any,
    started: datetime,
    ended: datetime,
) -> dict[str, Any]:
    retrieval = batches[0]
    facts = retrieval.facts
    retrieval_pins = facts.get("pins", {})
    memory = merged_memory(batches)
    reconciled = [r.find("reconciled_graph") for r in batches]
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
            # What the graph held when retrieval read it, read from the graph itself.
            "graph": {
                k: merged_graph_pins(batches).get(k)
                for k in ("backend", "server_version", "schema_version", "fingerprint")
            },
            # How the questions were split across graph instances (one batch: one instance).
            "partitioning": partitioning_pin(len(batches)),
            "reconciler": memory_pins(memory),
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
                # The invariant judge's pin, and the stored judge-check of each prompt.
                **judge_agreement_pins(scoring.judge),
                # The judge role's own pins: for `local`, the weights' sha256, the server's
                # version and its sampling settings (the spec alone does not name the weights).
                "role": judge_role_pins(scoring),
            },
            # Reader and graph-agent roles as retrieval ran them (weights sha256 for `local`).
            "llm_roles": {
                name: role
                for name, role in ((retrieval_pins.get("llm") or {}).items())
                if isinstance(role, dict) and role.get("provider") != "offline"
            },
            "gate": {"evidence_recall": f"recall_all@{scoring.gate_k}"},
            "tokenizer": tokenizer.pin(),
            "code_version": code_version(),
        },
        "comparable": corpus_manifest["comparable"],
        "repeat": scoring.repeat_record(),
        "memory": memory,
        "llm_usage": {
            "retrieval": merge_usage([r.facts.get("llm_usage") for r in batches]),
            "reconcile": merge_usage([r.facts.get("llm_usage") if r else None for r in reconciled]),
            "judge": judge_usage,
        },
        # Per batch: its graph instance, what it held, its questions and its runs.
        "batches": batch_provenance(batches),
        "stages": stages,
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
    pairs = [(goldens[rows[i]["question_id"]], rows[i]["answer"]) for i in tier2]
    try:
        criteria = criteria_judge_batch(layer, pairs, concurrency=layer_spec.judge_concurrency)
        # Beside the criteria judge: the invariant judge, against the signal events.
        invariant = invariant_judge_batch(layer, pairs, concurrency=layer_spec.judge_concurrency)
    finally:
        if layer is not None:
            layer.close()
    out = list(rows)
    for i, crit, inv in zip(tier2, criteria, invariant, strict=True):
        golden = goldens[out[i]["question_id"]]
        out[i] = add_tier2_metrics(out[i], golden, criteria=crit, invariant=inv)
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
        if s.get("pass_criteria"):
            out[f"tier{tier}_pass_criteria"] = dg.MetadataValue.md(
                pass_report_markdown(s["pass_criteria"])
            )
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


NOT_JUDGED = "not judged: retrieval was not measured (infrastructure failure)"
MAX_QUESTION_ROWS = 200


def configuration_label(manifest: dict) -> str:
    """What a configuration key stands for, in a few words."""
    pins = manifest["pins"]
    reconciler = (pins.get("reconciler") or {}).get("name") or "mixed/none"
    retriever = (pins.get("retriever") or {}).get("retriever")
    sample = pins["corpus"]["sample_spec"].get("sample") or "all"
    return (
        f"{pins['corpus']['upstream'].get('file_name')} sample {sample}, reconciler "
        f"{reconciler}, retriever {retriever}, scope {pins.get('scope')}, judge "
        f"{pins['judge']['model']}"
    )


def questions_markdown(rows: list[dict]) -> str:
    """Per question: covered, and why not (the weakest link, or the unscored cause)."""
    out = ["| question | tier | type | covered | why |", "|---|---|---|---|---|"]
    for r in rows[:MAX_QUESTION_ROWS]:
        causes = sorted({f["cause"] for f in r.get("infra_failures") or []})
        covered = {True: "yes", False: "no", None: "unscored"}[r["covered"]]
        why = (
            f"infrastructure: {', '.join(causes)}"
            if causes
            else r.get("weakest_link") or ("abstention" if r["abstention"] else "")
        )
        out.append(
            f"| {r['question_id']} | {r['tier']} | {r['question_type']} | {covered} | {why} |"
        )
    if len(rows) > MAX_QUESTION_ROWS:
        out.append(f"| … {len(rows) - MAX_QUESTION_ROWS} more in results.jsonl | | | | |")
    return "\n".join(out)


@dg.asset(
    group_name=GROUP,
    deps=["retrieval_results", "goldens"],
    description="Scores, summary and a run bundle (manifest, results, summary, hypotheses).",
)
@records_failures
def scored_run(
    context: dg.AssetExecutionContext,
    paths: ProjectPaths,
    scoring: ScoringSettings,
    corpus: CorpusSettings,
) -> dg.MaterializeResult:
    # The UI path too: refuse to score while deepeval could upload results.
    ensure_no_confident_upload()
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    # One record per question batch (one for a run on one instance), in batch order.
    batches = batch_retrievals(context, corpus.batches)
    retrieval = batches[0]
    goldens_record = retrieval.inputs["goldens"]
    goldens = {g["name"]: g for g in read_jsonl(goldens_record.file(GOLDENS_FILE))}
    by_id = {
        r["question_id"]: r for record in batches for r in read_jsonl(record.file(RESULTS_FILE))
    }
    # In the goldens' order, whatever batch a question ran in.
    retrievals = [QuestionRetrieval.model_validate(by_id[q]) for q in goldens if q in by_id]
    missing = sorted(set(goldens) - {r.question_id for r in retrievals})
    if missing:
        raise dg.Failure(
            f"retrieval_results lacks {len(missing)} golden question(s), e.g. {missing[:5]}: "
            "re-materialize retrieval_results for the current goldens"
        )
    tokenizer = PayloadTokenizer(scoring.tokenizer)
    layer = scoring.llm_layer()

    def abstains(r: QuestionRetrieval) -> bool:
        return bool(goldens[r.question_id]["additional_metadata"]["abstention"])

    try:
        judged: list[dict] = [
            offline_judge_results(abstains(r), reason=NOT_JUDGED)
            if retrieval_unmeasured(r)
            else offline_judge_results(abstains(r))  # no judge: "unscored: no judge"
            if layer is None
            else {}
            for r in retrievals
        ]
        if layer is None:
            context.log.info("no judge configured: judged metrics are unscored")
            judge_usage = None
        else:
            todo = [i for i, r in enumerate(retrievals) if not retrieval_unmeasured(r)]
            context.log.info(f"judging {len(todo)} questions with {scoring.judge}")
            results = judge_batch(
                layer,
                [
                    (
                        goldens[retrievals[i].question_id],
                        retrievals[i].retrieval_context,
                        retrievals[i].answer,
                    )
                    for i in todo
                ],
                concurrency=scoring.judge_concurrency,
            )
            for i, result in zip(todo, results, strict=True):
                judged[i] = result
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
        # Ingestion (read from the graph by retrieval_results), retrieval and agent use:
        # tier 2 is one namespace, so one batch read it.
        taken = [r.file(INGESTION_FILE) for r in batches if r.file(INGESTION_FILE).exists()]
        ingestion = json.loads(taken[0].read_text("utf-8")) if taken else None
        summary["tiers"]["2"]["ingestion"] = ingestion
        summary["tiers"]["2"]["pass_criteria"] = tier2_pass_report(rows, goldens, ingestion)
    corpus_manifest = json.loads(
        retrieval.inputs["session_fixtures"].file(MANIFEST_FILE).read_text(encoding="utf-8")
    )
    stages = stage_records(context.instance, batches)
    stages["scored_run"] = {
        "run_id": context.run.run_id,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    manifest = build_manifest(
        corpus_manifest,
        batches,
        stages,
        scoring,
        tokenizer,
        judge_usage,
        started,
        datetime.now(UTC),
    )
    manifest["dagster_run_id"] = context.run.run_id
    manifest["chain"] = context.run.tags.get(CHAIN_PARENT_TAG)  # the chain this run was part of
    manifest["status"] = summary["status"]
    manifest["incomplete"] = summary["incomplete"]
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
    incomplete = summary["incomplete"]
    if incomplete["questions"]:
        context.log.error(
            f"run incomplete: {incomplete['questions']} question(s) unscored by infrastructure "
            f"failures {incomplete['by_cause']}; bundle {run_dir}"
        )
    report = write_run_report(run_dir)
    config_key = floor_key(load_run(run_dir))[:8]
    metadata: dict[str, Any] = {
        **summary_metadata(summary),
        "run_dir": dg.MetadataValue.path(str(run_dir)),
        "report": dg.MetadataValue.path(str(report)),
        "questions_table": dg.MetadataValue.md(questions_markdown(rows)),
        "status": summary["status"],
        "unscored_infrastructure": incomplete["questions"],
        "unscored_by_cause": dg.MetadataValue.json(incomplete["by_cause"]),
        "questions": len(rows),
        "judge": scoring.judge,
        "comparable": manifest["comparable"],
        "configuration": dg.MetadataValue.text(
            f"cfg {config_key}: {configuration_label(manifest)}"
        ),
    }
    # Only numbers go in as chartable values (an unscored rate is left out, not shown as 0),
    # one series per configuration: Dagster plots a key across every materialization, and a
    # run of another configuration or sample joined to it would read as a regression.
    metadata.update(
        {
            f"{k} [cfg {config_key}]": round(v, 4) if isinstance(v, float) else v
            for k, v in headline(summary).items()
            if v is not None
        }
    )
    if judge_usage is not None:
        metadata["judge_usage"] = dg.MetadataValue.json(judge_usage)
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(
    asset=scored_run,
    blocking=True,
    description="Every question was measured: none left unscored by an infrastructure "
    "failure (else the bundle says `incomplete`, and nothing compares or calibrates it).",
)
def scored_run_complete(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    meta = materialization_metadata(context, "scored_run")
    unscored = int(meta.get("unscored_infrastructure", 0) or 0)
    causes = meta.get("unscored_by_cause") or {}
    return dg.AssetCheckResult(
        passed=unscored == 0,
        description=(
            None
            if unscored == 0
            else f"run incomplete: {unscored} question(s) unscored by infrastructure "
            "failures (" + ", ".join(f"{k} {v}" for k, v in causes.items()) + ")"
        ),
        metadata={
            "unscored_infrastructure": unscored,
            "by_cause": dg.MetadataValue.json(causes),
            "run_dir": dg.MetadataValue.path(str(meta.get("run_dir", ""))),
        },
    )


SCORING_ASSETS = [scored_run]
SCORING_CHECKS = [scored_run_complete]
SCORING_RESOURCES = {"scoring": ScoringSettings()}
