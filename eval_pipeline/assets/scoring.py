"""Scoring stage asset: scored_run, one run bundle per materialization.

It receives the retrieval results of every question batch of this chain and, through their
chain of outputs, the goldens, fixtures and graphs they came from; scores every question
(deterministic metrics always, judged metrics when a judge model is configured), judges the
reference arms' answers when they ran (`score.arms`), puts each question that was not covered
at the stage it failed (`score.attribution`), aggregates per tier and writes the bundle. Every
pin and count in the manifest comes from that chain of outputs (`manifest.py`). A question
left unscored by an infrastructure failure makes the bundle `incomplete`; the asset's blocking
check `scored_run_complete` then fails. Its protocol checks: abstention questions, and only
they, were judged under the abstention rubric (blocking); the system is not above its
ceiling arm (warns); the manifest's `protocol` map holds them and every earlier stage's.
"""

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline import build, interrupts
from eval_pipeline.assets import GROUP
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.handoff import StageOutput, publish, stage_label
from eval_pipeline.assets.manifest import batch_of_output, build_manifest, stage_records
from eval_pipeline.assets.protocol import protocol_results, protocol_spec
from eval_pipeline.assets.resources import (
    CorpusResource,
    PathsResource,
    RepeatResource,
    ScoringResource,
)
from eval_pipeline.assets.retrieval import CANARY_RESULTS_FILE, RESULTS_FILE
from eval_pipeline.assets.tags import BUNDLE_WRITTEN, CHAIN_TAG
from eval_pipeline.config import ModelRole, ScoringConfig
from eval_pipeline.corpus.batches import batch_keys
from eval_pipeline.corpus.canaries import CANARIES_FILE
from eval_pipeline.corpus.convert import GOLDENS_FILE, MANIFEST_FILE
from eval_pipeline.corpus.errata_apply import ERRATA_FILE, read_flags, with_errata
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.llm import LLMLayer, ensure_no_confident_upload
from eval_pipeline.llm.accounting import merge_usage
from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.progress import Progress
from eval_pipeline.providers.audit import merge as merge_audits
from eval_pipeline.retrieve.arms import ARMS_FILE, ArmAnswer
from eval_pipeline.retrieve.evidence_trace import TRACE_FILE
from eval_pipeline.retrieve.results import QuestionRetrieval
from eval_pipeline.runs.bundle import write_bundle
from eval_pipeline.runs.calibrate import floor_key
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.markdown import md_row
from eval_pipeline.runs.report import write_run_report
from eval_pipeline.runs.series_label import series_label
from eval_pipeline.score import panel, protocol
from eval_pipeline.score.arms import judge_arms, row_arms
from eval_pipeline.score.arms import markdown as arms_markdown
from eval_pipeline.score.attribution import attribute, funnel_markdown
from eval_pipeline.score.canaries import canary_row, canary_summary, canary_verdict
from eval_pipeline.score.coverage_meaning import coverage_meaning
from eval_pipeline.score.judges import judge_batch
from eval_pipeline.score.scorer import evidence_level, retrieval_unmeasured, score_question
from eval_pipeline.score.summary import summarize, summary_markdown
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.tier2.ingestion import INGESTION_FILE
from eval_pipeline.tier2.invariant_judge import invariant_judge_batch
from eval_pipeline.tier2.metrics import add_tier2_metrics, criteria_judge_batch
from eval_pipeline.tier2.panels import tier2_panels, tier2_panels_markdown
from eval_pipeline.tier2.pass_criteria import pass_report_markdown, tier2_pass_report


def judge_layer(scoring: ScoringConfig, repeat: Any) -> LLMLayer | None:
    return build.llm_layer({"judge": scoring.judge}, sample_identity=repeat.sample_identity)


def judge_concurrency(layer: LLMLayer) -> int:
    """Questions judged at once: the judge role's own limit (its default for the provider)."""
    return layer.settings.role("judge").concurrency


def chain_batches(retrieval_results: dict[str, StageOutput], batches: int) -> list[StageOutput]:
    """The retrieval output of every batch of this run, in batch order, checked to belong
    together: one goldens file, each graph current."""
    missing = [b.key for b in batch_keys(batches) if b.key not in retrieval_results]
    if missing:
        raise dg.Failure(
            f"retrieval_results has not been materialized for {', '.join(missing)}: "
            "materialize every batch"
        )
    outputs = [retrieval_results[b.key] for b in batch_keys(batches)]
    if len({o.inputs["goldens"].facts.get("goldens_sha256") for o in outputs}) > 1:
        raise dg.Failure(
            "the batches' retrieval_results were made for different goldens: materialize "
            "every batch again"
        )
    for output in outputs:
        if not output.facts.get("graph_current"):
            raise dg.Failure(
                f"retrieval_results {batch_of_output(output).key} (run {output.run_id}) "
                f"retrieved nothing: {output.facts.get('graph_current_reason')}"
            )
    return outputs


def add_tier2_scores(
    rows: list[dict], goldens: dict[str, dict], *, scoring: ScoringConfig, repeat: Any
) -> list[dict]:
    """Tier-2 rows get citation metrics and the weighted-criteria judge (unscored offline)."""
    tier2 = [i for i, r in enumerate(rows) if r["tier"] == 2]
    if not tier2:
        return rows
    layer = judge_layer(scoring, repeat)
    pairs = [(goldens[rows[i]["question_id"]], rows[i]["answer"]) for i in tier2]
    try:
        concurrency = judge_concurrency(layer) if layer is not None else 1
        criteria = criteria_judge_batch(layer, pairs, concurrency=concurrency)
        # Beside the criteria judge: the invariant judge, against the signal events.
        invariant = invariant_judge_batch(layer, pairs, concurrency=concurrency)
    finally:
        if layer is not None:
            layer.close()
    out = list(rows)
    for i, crit, inv in zip(tier2, criteria, invariant, strict=True):
        golden = goldens[out[i]["question_id"]]
        out[i] = add_tier2_metrics(out[i], golden, criteria=crit, invariant=inv)
    return out


def evidence_traces_of(batches: list[StageOutput]) -> dict[str, dict]:
    """What memory held of each question's evidence, as its retrieval stage traced it (none
    for a run retrieved before traces were kept)."""
    out: dict[str, dict] = {}
    for output in batches:
        path = output.file(TRACE_FILE)
        if path.exists():
            out.update((t["question_id"], t) for t in read_jsonl(path))
    return out


def summary_metadata(summary: dict) -> dict[str, dg.MetadataValue]:
    """One markdown entry per tier (and the tier-2 panels apart): the UI shows a short entry
    inline but folds a long one behind a link, so the first tier's tables stay in view."""
    out: dict[str, dg.MetadataValue] = {}
    for i, (tier, s) in enumerate(summary["tiers"].items()):
        # Long sections get entries of their own, the summary's tables stay short.
        tables = {k: v for k, v in s.items() if k not in ("panels", "funnel", "arms")}
        key = "summary" if i == 0 else f"summary_tier{tier}"
        out[key] = dg.MetadataValue.md(summary_markdown({"tiers": {tier: tables}}))
        if s.get("funnel"):
            out[f"tier{tier}_failure_funnel"] = dg.MetadataValue.md(
                "\n".join(funnel_markdown(s["funnel"]))
            )
        if s.get("arms"):
            out[f"tier{tier}_arms"] = dg.MetadataValue.md("\n".join(arms_markdown(s["arms"])))
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
NO_JUDGE = "unscored: no judge"
MAX_QUESTION_ROWS = 200


def questions_markdown(rows: list[dict]) -> str:
    """Per question: covered, and why not (the weakest link, or the unscored cause)."""
    out = [
        "| question | tier | type | covered | failed at | why |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows[:MAX_QUESTION_ROWS]:
        causes = sorted({f["cause"] for f in r.get("infra_failures") or []})
        covered = {True: "yes", False: "no", None: "unscored"}[r["covered"]]
        why = (
            f"infrastructure: {', '.join(causes)}"
            if causes
            else r.get("weakest_link") or ("abstention" if r["abstention"] else "")
        )
        stage = r.get("failure_stage") or ""
        # The id and type come from the input file: escaped, so they cannot forge cells.
        out.append(md_row([r["question_id"], r["tier"], r["question_type"], covered, stage, why]))
    if len(rows) > MAX_QUESTION_ROWS:
        out.append(f"| … {len(rows) - MAX_QUESTION_ROWS} more in results.jsonl | | | | | |")
    return "\n".join(out)


@dg.asset(
    group_name=GROUP,
    description="Scores, summary and a run bundle (manifest, results, summary, hypotheses).",
    check_specs=[
        dg.AssetCheckSpec(
            "scored_run_complete",
            asset="scored_run",
            blocking=True,
            description="Every question was measured: none left unscored by an infrastructure "
            "failure (else the bundle says `incomplete`, and nothing compares or calibrates it).",
        ),
        protocol_spec(protocol.ABSTENTION_RUBRIC, "scored_run"),
        protocol_spec(protocol.WITHIN_CEILING, "scored_run"),
        # Blocking: scores of a memory system that loses what it was just told measure a
        # broken system, so nothing compares or calibrates them (the bundle is still written).
        dg.AssetCheckSpec(
            "canaries_returned",
            asset="scored_run",
            blocking=True,
            description="Every planted canary fact was returned by retrieval (its evidence turn "
            "in the top k): else the memory system is broken, not the dataset. A canary left "
            "unscored by infrastructure only warns; passes with no canaries planted.",
        ),
    ],
)
@records_failures
def scored_run(
    context: dg.AssetExecutionContext,
    paths: PathsResource,
    scoring: ScoringResource,
    repeat: RepeatResource,
    corpus: CorpusResource,
    retrieval_results: dict[str, StageOutput],
) -> Iterator[Any]:
    # The UI path too: refuse to score while deepeval could upload results.
    ensure_no_confident_upload()
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    # One output per question batch (one for a run on one instance), in batch order.
    batches = chain_batches(retrieval_results, corpus.batches)
    retrieval = batches[0]
    goldens = {g["name"]: g for g in read_jsonl(retrieval.inputs["goldens"].file(GOLDENS_FILE))}
    by_id = {
        r["question_id"]: r for output in batches for r in read_jsonl(output.file(RESULTS_FILE))
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
    judged, judge_usage = _judge(context, scoring, repeat, goldens, retrievals)
    level = evidence_level(retrievals)
    rows = [
        score_question(
            goldens[r.question_id], r, tokenizer, judged=j, gate_k=scoring.gate_k, level=level
        )
        for r, j in zip(retrievals, judged, strict=True)
    ]
    rows = add_tier2_scores(rows, goldens, scoring=scoring, repeat=repeat)
    rows, panel_usage = _judge_panel(context, scoring, repeat, goldens, retrievals, rows)
    # The dataset errata the goldens stage applied: each tier-1 row's flag, or None (before
    # the stages are attributed: a suspect gold is a stage of its own).
    rows = with_errata(rows, read_flags(retrieval.inputs["goldens"].file(ERRATA_FILE)))
    # The arms before the stages: a miss the reader makes with the evidence in front of it
    # too (the ceiling) is the reader's, whatever retrieval returned.
    rows, arms_record = _score_arms(context, scoring, repeat, goldens, batches, rows)
    rows = attribute(rows, evidence_traces_of(batches))
    summary = summarize(rows)
    canaries, canary_usage = _score_canaries(context, scoring, repeat, batches, tokenizer, level)
    if canaries is not None:
        pin = retrieval.inputs["goldens"].facts.get("canaries")
        summary["canaries"] = canary_summary(canaries, pin)
    # A provider's formation audit, as its reconcile stages recorded it.
    summary["formation_audit"] = merge_audits(
        (o.find("reconciled_graph") or o).facts.get("formation_audit") for o in batches
    )
    if "2" in summary["tiers"]:
        summary["tiers"]["2"]["panels"] = tier2_panels(rows, goldens)
        # Ingestion (read from the graph by retrieval_results), retrieval and agent use:
        # tier 2 is one namespace, so one batch read it.
        taken = [o.file(INGESTION_FILE) for o in batches if o.file(INGESTION_FILE).exists()]
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
        repeat,
        tokenizer,
        judge_usage,
        started,
        datetime.now(UTC),
        panel_usage=panel_usage,
    )
    if arms_record is not None:
        manifest["arms"] = arms_record  # which arms ran, on what; never a pin
    # Who judged and by which verdict method, as the manifest pins it (said in the summary).
    summary["judge"] = {
        "model": scoring.judge.model,
        "verdict": manifest["pins"]["judge"]["verdict"],
    }
    rubric = protocol.abstention_rubric_check(rows, scoring.method)
    if not rubric.ok:
        context.log.error(f"{protocol.ABSTENTION_RUBRIC}: {rubric.status}: {rubric.detail}")
    manifest["protocol"][protocol.ABSTENTION_RUBRIC] = rubric.model_dump()
    within_ceiling = protocol.within_ceiling_check(summary["tiers"])
    if within_ceiling.status == "warning":
        context.log.warning(f"{protocol.WITHIN_CEILING}: {within_ceiling.detail}")
    manifest["protocol"][protocol.WITHIN_CEILING] = within_ceiling.model_dump()
    if canary_usage is not None:
        # The canaries' judge calls, apart from the questions' (whose percentiles they keep).
        manifest["llm_usage"]["canaries"] = canary_usage
    manifest["dagster_run_id"] = context.run.run_id
    manifest["chain"] = context.run.tags.get(CHAIN_TAG)  # the chain this run was part of
    manifest["status"] = summary["status"]
    manifest["incomplete"] = summary["incomplete"]
    run_dir = write_bundle(
        paths.runs_dir(scoring),
        manifest=manifest,
        rows=rows,
        summary=summary,
        label=scoring.label,
        started=started,
        canaries=canaries,
    )
    context.log.info(f"run bundle: {run_dir}")
    # Said as it is written: a chain interrupted anywhere later in this step (the IO manager,
    # the checks) must find the bundle to withdraw it, with no materialization to read.
    context.log_event(
        dg.AssetObservation(
            asset_key=context.asset_key,
            metadata={BUNDLE_WRITTEN: dg.MetadataValue.path(str(run_dir))},
        )
    )
    incomplete = summary["incomplete"]
    if incomplete["questions"]:
        context.log.error(
            f"run incomplete: {incomplete['questions']} question(s) unscored by infrastructure "
            f"failures {incomplete['by_cause']}; bundle {run_dir}"
        )
    try:
        report = write_run_report(run_dir)
        with publish(context, paths.root(), dict(retrieval_results)) as pub:
            pub.facts.update(run_dir=str(run_dir), status=summary["status"], incomplete=incomplete)
    except BaseException as exc:
        if interrupts.is_interrupt(type(exc).__name__):
            # Ctrl-C after the bundle was written: the stage did not end, so neither does the
            # run; its bundle must not read as complete (the driver says where it went).
            interrupts.withdraw_bundle(run_dir)
        raise
    yield dg.Output(pub.output, metadata=_metadata(summary, manifest, rows, run_dir, report))
    verdict, line = canary_verdict(summary.get("canaries"))
    if verdict == "broken":
        context.log.error(line)
    yield dg.AssetCheckResult(
        check_name="canaries_returned",
        passed=verdict in ("ok", "off"),
        # Unscored canaries were not checked: a warning, never "broken".
        severity=dg.AssetCheckSeverity.WARN
        if verdict == "unchecked"
        else dg.AssetCheckSeverity.ERROR,
        description=line,
        metadata={
            "planted": (summary.get("canaries") or {}).get("planted", 0),
            "returned": (summary.get("canaries") or {}).get("returned"),
            "failed": dg.MetadataValue.json((summary.get("canaries") or {}).get("failed", [])),
        },
    )
    causes = incomplete["by_cause"]
    yield dg.AssetCheckResult(
        check_name="scored_run_complete",
        passed=incomplete["questions"] == 0,
        description=None
        if incomplete["questions"] == 0
        else f"run incomplete: {incomplete['questions']} question(s) unscored by infrastructure "
        "failures (" + ", ".join(f"{k} {v}" for k, v in causes.items()) + ")",
        metadata={
            "unscored_infrastructure": incomplete["questions"],
            "by_cause": dg.MetadataValue.json(causes),
            "run_dir": dg.MetadataValue.path(str(run_dir)),
        },
    )
    yield from protocol_results(
        {protocol.ABSTENTION_RUBRIC: rubric, protocol.WITHIN_CEILING: within_ceiling}
    )


def _score_canaries(
    context: dg.AssetExecutionContext,
    scoring: ScoringResource,
    repeat: RepeatResource,
    batches: list[StageOutput],
    tokenizer: PayloadTokenizer,
    level: str,
) -> tuple[list[dict] | None, Any]:
    """Every batch's canaries scored as any question is, then read as returned/answered
    (`score.canaries`), and their judge's usage; None when none were planted. Never among
    the tiers' rows."""
    planted = batches[0].inputs["goldens"].file(CANARIES_FILE)
    if not planted.exists():
        return None, None
    goldens = {g["name"]: g for g in read_jsonl(planted)}
    pairs = []
    for output in batches:
        batch = batch_of_output(output).key if len(batches) > 1 else None
        results = output.file(CANARY_RESULTS_FILE)
        found = {r["question_id"]: r for r in read_jsonl(results)} if results.exists() else {}
        missing = sorted(set(goldens) - set(found))
        if missing:
            raise dg.Failure(
                f"retrieval_results {batch or ''} lacks the planted canaries {missing[:5]}: "
                "re-materialize retrieval_results"
            )
        pairs += [(batch, QuestionRetrieval.model_validate(found[q])) for q in goldens]
    retrievals = [r for _, r in pairs]
    judged, usage = _judge(context, scoring, repeat, goldens, retrievals, "canaries")
    rows = []
    for (batch, r), j in zip(pairs, judged, strict=True):
        golden = goldens[r.question_id]
        scored = score_question(golden, r, tokenizer, judged=j, gate_k=scoring.gate_k, level=level)
        rows.append(canary_row(golden, scored, j, batch=batch, gate_k=scoring.gate_k, level=level))
    return rows, usage


def _judge(
    context: dg.AssetExecutionContext,
    scoring: ScoringResource,
    repeat: RepeatResource,
    goldens: dict[str, dict],
    retrievals: list[QuestionRetrieval],
    what: str = "questions",
) -> tuple[list[dict], Any]:
    """Each question's judged metrics (unscored without a judge, or when retrieval itself was
    not measured), and the judge's usage; `what` names them in the progress line."""

    def abstains(r: QuestionRetrieval) -> bool:
        return bool(goldens[r.question_id]["additional_metadata"]["abstention"])

    try:
        method = build.answer_judge(scoring)
    except PluginLoadError as exc:
        raise dg.Failure(str(exc)) from None
    layer = judge_layer(scoring, repeat)
    try:
        judged: list[dict] = [
            method.unscored(abstains(r), NOT_JUDGED)
            if retrieval_unmeasured(r)
            else method.unscored(abstains(r), NO_JUDGE)
            if layer is None
            else {}
            for r in retrievals
        ]
        if layer is None:
            offline = getattr(method, "judge_offline", None)
            if offline is None:
                context.log.info("no judge configured: judged metrics are unscored")
                return judged, None
            # A judge that needs no model (the `match` verdict) still judges the answer.
            for i, r in enumerate(retrievals):
                if not retrieval_unmeasured(r):
                    judged[i] = offline(goldens[r.question_id], r.answer, judged[i])
            return judged, None
        todo = [i for i, r in enumerate(retrievals) if not retrieval_unmeasured(r)]
        context.log.info(f"judging {len(todo)} {what} with {scoring.judge.model}")
        with Progress(
            f"{stage_label(context)} judging {what}", len(todo), unit="q", log=context.log.info
        ) as bar:
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
                concurrency=judge_concurrency(layer),
                answer_judge=method,
                progress=bar.update,
            )
        for i, result in zip(todo, results, strict=True):
            judged[i] = result
        return judged, layer.snapshot().to_metadata()
    finally:
        if layer is not None:
            layer.close()


def _judge_panel(
    context: dg.AssetExecutionContext,
    scoring: ScoringResource,
    repeat: RepeatResource,
    goldens: dict[str, dict],
    retrievals: list[QuestionRetrieval],
    rows: list[dict],
) -> tuple[list[dict], dict[str, Any] | None]:
    """Rows with each panel member's verdict and coverage (`score.panel`), and each panel
    model's usage; the rows as they are without a panel."""
    members = panel.parse_panel(scoring.judge_panel, scoring.verdict)
    if not members:
        return rows, None
    items = [
        None if retrieval_unmeasured(r) else (goldens[r.question_id], r.answer) for r in retrievals
    ]
    layers: dict[str, LLMLayer] = {}
    try:
        for model in panel.models(members):
            # One layer per distinct model, as the judge role; a repeat draws its own sample.
            layer = build.llm_layer(
                {"judge": ModelRole(model=model)}, sample_identity=repeat.sample_identity
            )
            if layer is not None:
                layers[model] = layer
        context.log.info(
            f"judge panel: {len(items)} questions under {', '.join(m.key for m in members)}"
        )
        with Progress(
            f"{stage_label(context)} judge panel",
            len(items) * len(members),
            unit="verdict",
            log=context.log.info,
        ) as bar:
            results = panel.judge_panel(
                members,
                items,
                layers,
                {m: judge_concurrency(la) for m, la in layers.items()},
                progress=bar.update,
            )
        usage = {m: la.snapshot().to_metadata() for m, la in layers.items()} or None
    finally:
        for layer in layers.values():
            layer.close()
    out = [{**row, **panel.panel_fields(row, res)} for row, res in zip(rows, results, strict=True)]
    return out, usage


def _score_arms(
    context: dg.AssetExecutionContext,
    scoring: ScoringResource,
    repeat: RepeatResource,
    goldens: dict[str, dict],
    batches: list[StageOutput],
    rows: list[dict],
) -> tuple[list[dict], dict[str, Any] | None]:
    """Rows with each reference arm's verdict (`score.arms`), judged by the run's answer
    judge on a layer of its own (the system's judge usage stays its own), and the manifest's
    record of the arms; the rows as they are when no arm ran."""
    ran = [o for o in batches if o.facts.get("arms")]
    if not ran:
        return rows, None
    answers = [ArmAnswer.model_validate(r) for o in ran for r in read_jsonl(o.file(ARMS_FILE))]
    try:
        method = build.answer_judge(scoring)
    except PluginLoadError as exc:
        raise dg.Failure(str(exc)) from None
    layer = judge_layer(scoring, repeat)
    try:
        context.log.info(f"judging {len(answers)} reference-arm answers")
        concurrency = judge_concurrency(layer) if layer is not None else 1
        with Progress(
            f"{stage_label(context)} judging arms",
            len(answers),
            unit="answer",
            log=context.log.info,
        ) as bar:
            results = judge_arms(
                method, layer, goldens, answers, concurrency=concurrency, progress=bar.update
            )
        judge_usage = layer.snapshot().to_metadata() if layer is not None else None
    finally:
        if layer is not None:
            layer.close()
    rows = row_arms(rows, answers, results)
    facts = ran[0].facts["arms"]
    record = {
        "ran": facts["ran"],
        "version": facts["version"],
        "reader": facts.get("reader"),
        "context": facts.get("context") or {},
        "questions": len({a.question_id for a in answers}),
        "unscored": {
            arm: sum(1 for r in rows if ((r["arms"] or {}).get(arm) or {}).get("covered") is None)
            for arm in facts["ran"]
        },
        "llm_usage": {
            "reader": merge_usage([o.facts["arms"].get("llm_usage") for o in ran]),
            "judge": judge_usage,
        },
    }
    return rows, record


def _metadata(
    summary: dict, manifest: dict, rows: list[dict], run_dir: Path, report: Path
) -> dict[str, Any]:
    series = series_label(manifest["pins"], floor_key(load_run(run_dir)))
    incomplete = summary["incomplete"]
    metadata: dict[str, Any] = {
        **summary_metadata(summary),
        "run_dir": dg.MetadataValue.path(str(run_dir)),
        "report": dg.MetadataValue.path(str(report)),
        "questions_table": dg.MetadataValue.md(questions_markdown(rows)),
        "status": summary["status"],
        "unscored_infrastructure": incomplete["questions"],
        "unscored_by_cause": dg.MetadataValue.json(incomplete["by_cause"]),
        "questions": len(rows),
        "canaries": canary_verdict(summary.get("canaries"))[1],
        "judge": manifest["pins"]["judge"]["model"],
        "comparable": manifest["comparable"],
        "configuration": dg.MetadataValue.text(series),
    }
    # Only numbers go in as chartable values (an unscored rate is left out, not shown as 0),
    # one series per configuration: Dagster plots a key across every materialization, and a
    # run of another configuration or sample joined to it would read as a regression.
    metadata.update(
        {
            f"{k} [{series}]": round(v, 4) if isinstance(v, float) else v
            for k, v in headline(summary).items()
            if v is not None
        }
    )
    meaning = coverage_meaning(manifest["pins"])
    if meaning:  # what "covered" means when no model read or judged
        metadata["coverage_means"] = dg.MetadataValue.text(meaning)
    judge_usage = manifest["llm_usage"]["judge"]
    if judge_usage is not None:
        metadata["judge_usage"] = dg.MetadataValue.json(judge_usage)
    return metadata


SCORING_ASSETS = [scored_run]
