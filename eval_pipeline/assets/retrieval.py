"""Retrieval stage asset: retrieval_results, and its checks.

`retrieval_results` reads the goldens and the reconciled graph this run consumes, retrieves and
answers every question with the configured retriever and reader, and publishes
`retrieval_results.jsonl` (one `QuestionRetrieval` per line) in its run-scoped artifact, with a
record of the pins, of what the graph held (injection and memory census) and of the questions
left unscored by infrastructure failures.

Checks: the graph is the one built from this run's goldens and fixtures (blocking: else
nothing is retrieved); the graph's content fingerprint is the same before and after (blocking);
no question was left unscored by the pipeline's own infrastructure (not blocking, see below).
"""

import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.artifacts import (
    ARTIFACT_META,
    StageRecord,
    input_record,
    own_record,
    publish,
)
from eval_pipeline.assets.batches import QUESTION_BATCHES, batch_of
from eval_pipeline.assets.graph_lease import graph_answers, graph_step
from eval_pipeline.assets.resources import ProjectPaths, json_options
from eval_pipeline.corpus.convert import GOLDENS_FILE
from eval_pipeline.corpus.jsonl import read_jsonl, write_jsonl
from eval_pipeline.graph.checks import graph_holds, read_graph_fingerprint
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMConfigError, LLMLayer, LLMSettings
from eval_pipeline.llm.config import parse_role_settings
from eval_pipeline.ops.sensors import records_failures
from eval_pipeline.reconcile.reader import memory_census
from eval_pipeline.retrieve.graph_state import graph_state
from eval_pipeline.retrieve.protocol import (
    SCOPES,
    RetrievalEnv,
    Retriever,
    RetrieverLoadError,
    load_retriever,
)
from eval_pipeline.retrieve.provenance import ProvenanceResolver
from eval_pipeline.retrieve.reader import (
    OFFLINE_SPECS,
    READER_PROMPT_VERSION,
    Reader,
    make_reader,
)
from eval_pipeline.retrieve.results import RESULTS_SCHEMA_VERSION, QuestionRetrieval
from eval_pipeline.retrieve.runner import RetrievalRunner, questions_from_goldens
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.tier2.ingestion import INGESTION_FILE, tier2_ingestion

RESULTS_FILE = "retrieval_results.jsonl"
ASSET_KEY = dg.AssetKey("retrieval_results")
FINGERPRINT_BEFORE = "graph_fingerprint_before"
FINGERPRINT_AFTER = "graph_fingerprint_after"


class RetrievalSettings(dg.ConfigurableResource):
    """Which retriever and reader, at which scope and k. Defaults: fully offline."""

    retriever: str = Field(
        default="fulltext",
        description="fulltext | graph_agent | a plug-in 'package.module:ClassName'",
    )
    retriever_options: str = Field(
        default="{}", description="JSON object of keyword options for the retriever"
    )
    scope: str = Field(default="question", description="question (its haystack) | batch")
    top_k: int = Field(default=10, ge=1)
    reader: str = Field(
        default="offline",
        description="offline (extractive) | PROVIDER:MODEL[@BASE_URL] for the reader role",
    )
    retrieval_agent: str = Field(
        default="offline",
        description="PROVIDER:MODEL[@BASE_URL] for graph_agent's retrieval_agent role",
    )
    payload_cap_tokens: int = Field(default=4000, ge=1, description="graph_agent context cap")
    max_steps: int = Field(default=6, ge=1, description="graph_agent step budget")
    query_timeout_s: float = Field(default=10.0, gt=0)
    max_rows: int = Field(default=500, ge=1, description="row cap of one agent query")
    llm_cache_path: str | None = Field(default=None, description="default: state dir")
    llm_roles: str = Field(
        default="{}",
        description="JSON {role: {timeout_s, concurrency, max_tokens, structured_output}}: "
        "per-role LLM settings (eval-pipeline run's --judge-timeout etc.)",
    )
    sample_identity: str | None = Field(
        default=None,
        description="a repeat's sample identity (run --repeat): part of the LLM cache key, so "
        "each repeat is a fresh sample that a re-run of the same repeat reproduces",
    )

    def checked_scope(self) -> str:
        if self.scope not in SCOPES:
            raise dg.Failure(f"retrieval scope must be one of {list(SCOPES)}, not {self.scope!r}")
        return self.scope

    def options(self) -> dict[str, Any]:
        options = json_options(self.retriever_options, "retriever_options")
        if self.retriever == "graph_agent":
            options.setdefault("max_steps", self.max_steps)
            options.setdefault("payload_cap_tokens", self.payload_cap_tokens)
        return options

    def reader_spec(self) -> str:
        """What `make_reader` takes: offline, or `llm` when a reader model is configured."""
        return "offline" if self.reader.strip() in OFFLINE_SPECS else "llm"

    def llm_layer(self) -> LLMLayer | None:
        """A layer for the reader and retrieval_agent roles, or None when both are offline."""
        specs = {}
        if self.reader_spec() == "llm":
            specs["reader"] = self.reader
        if self.retrieval_agent.strip() != "offline":
            specs["retrieval_agent"] = self.retrieval_agent
        if not specs:
            return None
        extra: dict[str, Any] = {}
        if self.llm_cache_path:
            extra["cache_path"] = Path(self.llm_cache_path)
        if self.sample_identity:
            extra["sample_identity"] = self.sample_identity
        try:
            overrides = parse_role_settings(self.llm_roles)
            return LLMLayer(LLMSettings.from_specs(specs, role_overrides=overrides, **extra))
        except LLMConfigError as exc:
            raise dg.Failure(f"retrieval LLM: {exc}") from None

    def build(self, env: RetrievalEnv, llm: LLMLayer | None) -> tuple[Retriever, Reader]:
        """The retriever and reader, or a dg.Failure saying what is wrong with the settings."""
        try:
            return load_retriever(self.retriever, env, self.options()), make_reader(
                self.reader_spec(), llm
            )
        except (RetrieverLoadError, ValueError) as exc:
            raise dg.Failure(str(exc)) from None


class _Summary:
    """Running totals of the results, so the asset never holds all of them at once."""

    def __init__(self) -> None:
        self.questions = 0
        self.failed: list[str] = []  # retrieval raised: the system's own failure (a miss)
        self.unscored: list[str] = []  # the pipeline's own failure: unscored
        self.causes: dict[str, int] = {}
        self.with_errors = 0  # any error, retrieval or reader
        self.no_answer = 0
        self.empty = 0
        self.queries = 0
        self.latency_ms: list[float] = []
        self.reader_ms: list[float] = []
        self.tokens: list[int] = []

    def add(self, r: QuestionRetrieval) -> None:
        self.questions += 1
        if any(e.startswith("retrieval: ") for e in r.errors):
            self.failed.append(r.question_id)
        if r.infra_failures:
            self.unscored.append(r.question_id)
            for cause in {f.cause for f in r.infra_failures}:
                self.causes[cause] = self.causes.get(cause, 0) + 1
        self.with_errors += bool(r.errors)
        self.no_answer += r.answer is None
        self.empty += not r.items
        self.queries += len(r.queries)
        if r.retrieval_latency_ms is not None:
            self.latency_ms.append(r.retrieval_latency_ms)
        if r.reader_latency_ms is not None:
            self.reader_ms.append(r.reader_latency_ms)
        if r.payload_tokens is not None:
            self.tokens.append(r.payload_tokens)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def graph_currency(
    graph: GraphStore, goldens: StageRecord, fixtures: StageRecord, reconciled: StageRecord
) -> tuple[bool, str]:
    """(current, why): the fixtures were built from these goldens, the reconciled graph was
    injected from these fixtures, and the graph still holds that injection. Compared by
    content digests, so re-materializing identical files does not count as a change."""
    built_from = fixtures.inputs.get("goldens")
    if built_from is None or built_from.facts.get("goldens_sha256") != goldens.facts.get(
        "goldens_sha256"
    ):
        return False, (
            "session_fixtures were not built from the current goldens: materialize "
            "session_fixtures and injected_graph again"
        )
    injected = reconciled.find("injected_graph")
    injected_from = injected.inputs.get("session_fixtures") if injected else None
    if (
        injected is None
        or injected_from is None
        or injected_from.facts.get("fixtures_sha256") != fixtures.facts.get("fixtures_sha256")
    ):
        return False, (
            "the reconciled graph was not built from the current session_fixtures: "
            "materialize injected_graph and reconciled_graph again"
        )
    return graph_holds(graph, injected.facts["fingerprint"])


@dg.asset(
    key=ASSET_KEY,
    group_name=GROUP,
    deps=[dg.AssetKey("reconciled_graph"), dg.AssetKey("goldens")],
    partitions_def=QUESTION_BATCHES,
    pool="graph_instance",
    description="Per question: ranked items, the reader's context and answer, queries, errors.",
)
@records_failures
def retrieval_results(
    context: dg.AssetExecutionContext,
    paths: ProjectPaths,
    graph: GraphStore,
    retrieval: RetrievalSettings,
) -> dg.MaterializeResult:
    scope = retrieval.checked_scope()
    inputs = {
        "goldens": input_record(context, "goldens"),
        "session_fixtures": input_record(context, "session_fixtures"),
        "reconciled_graph": input_record(context, "reconciled_graph"),
    }
    batch = batch_of(context)
    graph = graph.for_batch(batch)
    # This batch's questions: their namespaces are the ones its graph instance holds.
    goldens = [
        g for g in read_jsonl(inputs["goldens"].file(GOLDENS_FILE)) if batch.holds(g["name"])
    ]
    questions = questions_from_goldens(goldens)
    tokenizer = PayloadTokenizer()
    summary = _Summary()
    with (
        graph_step(context, graph, "retrieval_results"),
        publish(paths.root(), "retrieval_results", context.run.run_id, inputs) as pub,
    ):
        current, why = graph_currency(graph, *inputs.values())
        if not current:
            # Nothing is retrieved from a graph that is not this run's: the blocking check
            # says why, and nothing downstream scores it.
            context.log.error(f"not retrieving: {why}")
            write_jsonl(pub.stage / RESULTS_FILE, [])
            pub.facts.update(graph_current=False, graph_current_reason=why)
            return dg.MaterializeResult(
                metadata={
                    "graph_current": False,
                    "graph_current_reason": dg.MetadataValue.text(why),
                    ARTIFACT_META: dg.MetadataValue.path(str(pub.final)),
                }
            )
        before = graph_state(graph)
        context.log.info(
            f"graph before retrieval: {before.nodes} nodes, {before.relationships} "
            f"relationships, {before.fingerprint} ({before.seconds:.1f} s)"
        )
        llm = retrieval.llm_layer()
        try:
            env = RetrievalEnv(
                store=graph,
                backend=graph.dialect.name,
                llm=llm,
                tokenizer=tokenizer,
                query_timeout_s=retrieval.query_timeout_s,
                max_rows=retrieval.max_rows,
            )
            retriever, reader = retrieval.build(env, llm)
            runner = RetrievalRunner(
                retriever,
                reader,
                scope=scope,  # type: ignore[arg-type]
                top_k=retrieval.top_k,
                count_tokens=tokenizer.count_context,
                graph_alive=lambda: graph_answers(graph),
                provenance=ProvenanceResolver(graph),
            )
            every = max(1, len(questions) // 20)
            started = time.perf_counter()

            def progress(done: int, total: int, result: QuestionRetrieval) -> None:
                summary.add(result)
                if done % every == 0 or done == total:
                    rate = done / max(time.perf_counter() - started, 1e-9)
                    context.log.info(
                        f"retrieval {done}/{total} ({rate:.1f} q/s), "
                        f"{len(summary.failed)} failed, {len(summary.unscored)} unscored so far"
                    )

            write_jsonl(
                pub.stage / RESULTS_FILE,
                (r.model_dump(mode="json") for r in runner.run(questions, progress)),
            )
            wall_s = time.perf_counter() - started
            after = graph_state(graph)
            pins = {
                "retriever": retriever.pins(),
                "scope": scope,
                "top_k": retrieval.top_k,
                "reader": reader.label,
                "reader_prompt_version": READER_PROMPT_VERSION,
                "tokenizer": tokenizer.pin(),
                "results_schema_version": RESULTS_SCHEMA_VERSION,
                "llm": llm.pins() if llm is not None else None,
            }
            usage = llm.snapshot().to_metadata() if llm is not None else None
        finally:
            if llm is not None:
                llm.close()
        # Tier 2's ingestion axis: what the memory held, read through its searchable texts.
        ingestion = tier2_ingestion(graph, goldens)
        if ingestion is not None:
            (pub.stage / INGESTION_FILE).write_text(json.dumps(ingestion, indent=1), "utf-8")
        injection = read_graph_fingerprint(graph) or {}
        pub.facts.update(
            batch=batch.model_dump(),
            graph_current=True,
            graph_current_reason=why,
            pins=pins,
            # What the graph retrieval read actually held: the manifest pins this.
            graph={
                "backend": graph.dialect.name,
                "server_version": graph.server_version(),
                "schema_version": injection.get("schema_version"),
                "fingerprint": injection.get("fingerprint"),
                "injected_at": injection.get("injected_at"),
            },
            memory=memory_census(graph),
            questions=summary.questions,
            failed=summary.failed,
            unscored=summary.unscored,
            unscored_by_cause=summary.causes,
            graph_before=before.model_dump(),
            graph_after=after.model_dump(),
            llm_usage=usage,
            seconds=round(wall_s, 3),
        )

    if before.fingerprint != after.fingerprint:
        context.log.error(
            f"the graph changed during retrieval: {before.fingerprint} -> {after.fingerprint}"
        )
    if summary.unscored:
        context.log.error(
            f"{len(summary.unscored)} question(s) unscored by infrastructure failures "
            f"({summary.causes}): the run is incomplete"
        )
    tokens_median = statistics.median(summary.tokens) if summary.tokens else None
    metadata: dict[str, Any] = {
        "batch": batch.key,
        "questions": summary.questions,
        "retrieval_failed": len(summary.failed),
        "unscored_infrastructure": len(summary.unscored),
        "unscored_by_cause": dg.MetadataValue.json(summary.causes),
        "questions_with_errors": summary.with_errors,
        "no_answer": summary.no_answer,
        "empty_retrieval": summary.empty,
        "queries": summary.queries,
        "latency_p50_ms": _ms(percentile(summary.latency_ms, 50)),
        "latency_p95_ms": _ms(percentile(summary.latency_ms, 95)),
        "reader_latency_p50_ms": _ms(percentile(summary.reader_ms, 50)),
        "questions_per_s": round(summary.questions / max(wall_s, 1e-9), 2),
        "payload_tokens_median": tokens_median,
        "retriever": retriever.name,
        "scope": scope,
        "reader": reader.label,
        "pins": dg.MetadataValue.json(pins),
        "first_failed": dg.MetadataValue.json(summary.failed[:20]),
        "first_unscored": dg.MetadataValue.json(summary.unscored[:20]),
        "graph_current": True,
        FINGERPRINT_BEFORE: before.fingerprint,
        FINGERPRINT_AFTER: after.fingerprint,
        "graph_nodes": after.nodes,
        "graph_relationships": after.relationships,
        "path": dg.MetadataValue.path(str(pub.final / RESULTS_FILE)),
        ARTIFACT_META: dg.MetadataValue.path(str(pub.final)),
    }
    if usage is not None:
        metadata["llm_usage"] = dg.MetadataValue.json(usage)
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(
    asset=ASSET_KEY,
    blocking=True,
    description="The graph's content fingerprint is the same before and after retrieval.",
)
def retrieval_left_graph_unchanged(
    context: dg.AssetCheckExecutionContext,
) -> dg.AssetCheckResult:
    facts = own_record(context, "retrieval_results").facts
    if not facts.get("graph_current"):
        return dg.AssetCheckResult(passed=False, description="nothing was retrieved")
    before = facts["graph_before"]["fingerprint"]
    after = facts["graph_after"]["fingerprint"]
    return dg.AssetCheckResult(
        passed=before == after,
        description=None if before == after else "the graph changed while retrieval ran",
        metadata={"before": before, "after": after},
    )


@dg.asset_check(
    asset=ASSET_KEY,
    blocking=True,
    description="Retrieval read the graph built from this run's goldens and fixtures.",
)
def retrieval_graph_is_current(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    facts = own_record(context, "retrieval_results").facts
    current = bool(facts.get("graph_current"))
    return dg.AssetCheckResult(
        passed=current,
        description=None if current else str(facts.get("graph_current_reason")),
        metadata={"reason": dg.MetadataValue.text(str(facts.get("graph_current_reason")))},
    )


# Not blocking: the questions that were measured still get scored and the bundle is written,
# marked incomplete; scored_run's blocking check `scored_run_complete` then stops the
# comparison and calibration downstream.
@dg.asset_check(
    asset=ASSET_KEY,
    description="No question was left unscored by an infrastructure failure (graph server, "
    "LLM cache, model provider).",
)
def retrieval_infrastructure_ok(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    facts = own_record(context, "retrieval_results").facts
    unscored = facts.get("unscored") or []
    causes = facts.get("unscored_by_cause") or {}
    return dg.AssetCheckResult(
        passed=not unscored,
        description=(
            None
            if not unscored
            else f"{len(unscored)} question(s) unscored by infrastructure failures: "
            + ", ".join(f"{k} {v}" for k, v in causes.items())
        ),
        metadata={
            "unscored": len(unscored),
            "by_cause": dg.MetadataValue.json(causes),
            "first_unscored": dg.MetadataValue.json(unscored[:20]),
        },
    )


RETRIEVAL_ASSETS = [retrieval_results]
RETRIEVAL_CHECKS = [
    retrieval_left_graph_unchanged,
    retrieval_graph_is_current,
    retrieval_infrastructure_ok,
]
RETRIEVAL_RESOURCES = {"retrieval": RetrievalSettings()}
