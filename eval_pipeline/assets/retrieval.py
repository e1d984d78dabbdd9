"""Retrieval stage asset: retrieval_results, and the check that retrieval wrote nothing.

`retrieval_results` reads goldens.jsonl and the reconciled graph, retrieves and answers every
question with the configured retriever and reader, and writes `retrieval/retrieval_results.jsonl`
(one `QuestionRetrieval` per line) plus a manifest with the pins, atomically. The graph's
content fingerprint is computed before and after and recorded in the metadata; the blocking
check compares them, so nothing downstream scores a run whose retrieval changed the graph.
"""

import math
import statistics
import time
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline.assets.resources import ProjectPaths, json_options
from eval_pipeline.corpus.convert import GOLDENS_FILE
from eval_pipeline.corpus.jsonl import read_jsonl, staged_outputs, write_json, write_jsonl
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMConfigError, LLMLayer, LLMSettings
from eval_pipeline.retrieve.graph_state import graph_state
from eval_pipeline.retrieve.protocol import (
    SCOPES,
    RetrievalEnv,
    Retriever,
    RetrieverLoadError,
    load_retriever,
)
from eval_pipeline.retrieve.reader import (
    OFFLINE_SPECS,
    READER_PROMPT_VERSION,
    Reader,
    make_reader,
)
from eval_pipeline.retrieve.results import RESULTS_SCHEMA_VERSION, QuestionRetrieval
from eval_pipeline.retrieve.runner import RetrievalRunner, questions_from_goldens
from eval_pipeline.score.tokens import PayloadTokenizer

GROUP = "retrieval"
RESULTS_FILE = "retrieval_results.jsonl"
MANIFEST_FILE = "retrieval_manifest.json"
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
        try:
            return LLMLayer(LLMSettings.from_specs(specs, **extra))
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
        self.failed: list[str] = []  # retrieval raised
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


@dg.asset(
    key=ASSET_KEY,
    group_name=GROUP,
    deps=[dg.AssetKey("reconciled_graph"), dg.AssetKey("goldens")],
    pool="graph_instance",
    description="Per question: ranked items, the reader's context and answer, queries, errors.",
)
def retrieval_results(
    context: dg.AssetExecutionContext,
    paths: ProjectPaths,
    graph: GraphStore,
    retrieval: RetrievalSettings,
) -> dg.MaterializeResult:
    scope = retrieval.checked_scope()
    questions = questions_from_goldens(read_jsonl(paths.corpus_dir() / GOLDENS_FILE))
    graph.ensure_running()
    before = graph_state(graph)
    context.log.info(
        f"graph before retrieval: {before.nodes} nodes, {before.relationships} relationships, "
        f"{before.fingerprint} ({before.seconds:.1f} s)"
    )
    tokenizer = PayloadTokenizer()
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
        )
        summary = _Summary()
        every = max(1, len(questions) // 20)
        started = time.perf_counter()

        def progress(done: int, total: int, result: QuestionRetrieval) -> None:
            summary.add(result)
            if done % every == 0 or done == total:
                rate = done / max(time.perf_counter() - started, 1e-9)
                context.log.info(
                    f"retrieval {done}/{total} ({rate:.1f} q/s), "
                    f"{len(summary.failed)} failed so far"
                )

        out_dir = paths.root() / "retrieval"
        with staged_outputs(out_dir, [RESULTS_FILE, MANIFEST_FILE]) as stage:
            write_jsonl(
                stage / RESULTS_FILE,
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
            write_json(
                stage / MANIFEST_FILE,
                {
                    "pins": pins,
                    "questions": summary.questions,
                    "failed": summary.failed,
                    "graph_before": before.model_dump(),
                    "graph_after": after.model_dump(),
                    "llm_usage": usage,
                },
            )
    finally:
        if llm is not None:
            llm.close()

    if before.fingerprint != after.fingerprint:
        context.log.error(
            f"the graph changed during retrieval: {before.fingerprint} -> {after.fingerprint}"
        )
    tokens_median = statistics.median(summary.tokens) if summary.tokens else None
    metadata: dict[str, Any] = {
        "questions": summary.questions,
        "retrieval_failed": len(summary.failed),
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
        FINGERPRINT_BEFORE: before.fingerprint,
        FINGERPRINT_AFTER: after.fingerprint,
        "graph_nodes": after.nodes,
        "graph_relationships": after.relationships,
        "path": dg.MetadataValue.path(str(out_dir / RESULTS_FILE)),
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
    event = context.instance.get_latest_materialization_event(ASSET_KEY)
    materialization = event.asset_materialization if event is not None else None
    meta = materialization.metadata if materialization is not None else {}
    if FINGERPRINT_BEFORE not in meta or FINGERPRINT_AFTER not in meta:
        return dg.AssetCheckResult(
            passed=False, description="no fingerprints recorded by retrieval_results"
        )
    before = meta[FINGERPRINT_BEFORE].value
    after = meta[FINGERPRINT_AFTER].value
    return dg.AssetCheckResult(
        passed=before == after,
        description=None if before == after else "the graph changed while retrieval ran",
        metadata={"before": before, "after": after},
    )


RETRIEVAL_ASSETS = [retrieval_results]
RETRIEVAL_CHECKS = [retrieval_left_graph_unchanged]
RETRIEVAL_RESOURCES = {"retrieval": RetrievalSettings()}
