"""Retrieval stage asset: retrieval_results, with its own checks.

`retrieval_results` receives the goldens, fixtures and reconciled graph this chain made,
retrieves and answers every question with the configured retriever and reader, and publishes
`retrieval_results.jsonl` (one `QuestionRetrieval` per line) with what it vouches for: the
pins, what the graph held (injection and memory census) and the questions left unscored by
infrastructure failures. With `retrieval.arms` it then answers every question again with the
same reader on the reference arms' contexts (`retrieve.arms`: no memory, the evidence
sessions) into `arms.jsonl`, apart from the system's results.

Its checks (computed in its step): the graph is the one built from this chain's goldens and
fixtures (blocking: else nothing is retrieved); the graph's content fingerprint is the same
before and after (blocking); no question was left unscored by the pipeline's own
infrastructure (not blocking: the measured questions are still scored, the bundle is marked
incomplete, and scored_run's own check then stops the comparison). Protocol checks
(`score.protocol`): the question date reached every reader prompt (not comparable), top_k
is below every haystack (warns), no question got more than top_k items (blocking).
"""

import json
import math
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline import build
from eval_pipeline.assets import GROUP
from eval_pipeline.assets.batches import QUESTION_BATCHES, batch_of
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.graph_lease import GRAPH_POOL, graph_answers, graph_step
from eval_pipeline.assets.handoff import (
    StageOutput,
    artifacts_root,
    chain_of,
    publish,
    stage_label,
)
from eval_pipeline.assets.protocol import PROTOCOL_FACT, protocol_results, protocol_spec
from eval_pipeline.assets.resources import (
    GraphResource,
    PathsResource,
    RepeatResource,
    RetrievalResource,
)
from eval_pipeline.corpus.canaries import CANARIES_FILE
from eval_pipeline.corpus.convert import FIXTURES_FILE, GOLDENS_FILE
from eval_pipeline.corpus.jsonl import read_jsonl, write_jsonl
from eval_pipeline.embed import EmbedderUnavailable
from eval_pipeline.graph.checks import graph_holds, read_graph_fingerprint
from eval_pipeline.graph.errors import GraphError
from eval_pipeline.graph.state import graph_state
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMError
from eval_pipeline.progress import Progress
from eval_pipeline.providers import ProviderError
from eval_pipeline.providers.formation import ProviderRecord, fingerprints
from eval_pipeline.providers.retriever import ProviderRetriever
from eval_pipeline.reconcile.namespace import namespace_of
from eval_pipeline.reconcile.protocol import ReconcileError
from eval_pipeline.reconcile.reader import memory_census
from eval_pipeline.retrieve.arms import ARMS_FILE, write_arms
from eval_pipeline.retrieve.evidence_trace import TRACE_FILE, evidence_traces
from eval_pipeline.retrieve.journal import Journal, journal_path, measured, merged
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrieverLoadError
from eval_pipeline.retrieve.provenance import ProvenanceResolver
from eval_pipeline.retrieve.reader import reader_pins, sends_prompt
from eval_pipeline.retrieve.results import RESULTS_SCHEMA_VERSION, QuestionRetrieval
from eval_pipeline.retrieve.runner import RetrievalRunner, questions_from_goldens
from eval_pipeline.score import protocol
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.tier2.ingestion import INGESTION_FILE, tier2_ingestion

RESULTS_FILE = "retrieval_results.jsonl"
CANARY_RESULTS_FILE = "canary_results.jsonl"  # the planted canaries' results, apart


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
        self.saw_date: dict[str, bool | None] = {}  # the protocol checks' inputs
        self.returned: dict[str, int] = {}

    def add(self, r: QuestionRetrieval) -> None:
        self.questions += 1
        self.saw_date[r.question_id] = r.reader_saw_date
        self.returned[r.question_id] = max(len(r.items), len(r.retrieval_context))
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
    graph: GraphStore, goldens: StageOutput, fixtures: StageOutput, reconciled: StageOutput
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


RETRIEVAL_PROTOCOL = (protocol.READER_DATE, protocol.TOP_K_BELOW_HAYSTACK, protocol.WITHIN_TOP_K)

CHECKS = [
    dg.AssetCheckSpec(
        "retrieval_graph_is_current",
        asset="retrieval_results",
        blocking=True,
        description="Retrieval read the graph built from this chain's goldens and fixtures.",
    ),
    dg.AssetCheckSpec(
        "retrieval_left_graph_unchanged",
        asset="retrieval_results",
        blocking=True,
        description="The graph's content fingerprint is the same before and after retrieval.",
    ),
    dg.AssetCheckSpec(
        "retrieval_left_memory_unchanged",
        asset="retrieval_results",
        blocking=True,
        description="A memory provider's store (count and digest per namespace) is the same "
        "before and after retrieval; passes with nothing to check for graph memory.",
    ),
    # Not blocking: the questions that were measured are still scored and the bundle is
    # written, marked incomplete; scored_run's blocking check `scored_run_complete` then
    # stops the comparison and calibration downstream.
    dg.AssetCheckSpec(
        "retrieval_infrastructure_ok",
        asset="retrieval_results",
        description="No question was left unscored by an infrastructure failure (graph "
        "server, LLM cache, model provider).",
    ),
    *(protocol_spec(name, "retrieval_results") for name in RETRIEVAL_PROTOCOL),
]


@dg.asset(
    group_name=GROUP,
    partitions_def=QUESTION_BATCHES,
    pool=GRAPH_POOL,
    description="Per question: ranked items, the reader's context and answer, queries, errors.",
    check_specs=CHECKS,
)
@records_failures
def retrieval_results(
    context: dg.AssetExecutionContext,
    paths: PathsResource,
    graph: GraphResource,
    retrieval: RetrievalResource,
    repeat: RepeatResource,
    goldens: StageOutput,
    session_fixtures: StageOutput,
    reconciled_graph: StageOutput,
) -> Iterator[Any]:
    inputs = {
        "goldens": goldens,
        "session_fixtures": session_fixtures,
        "reconciled_graph": reconciled_graph,
    }
    batch = batch_of(context)
    store = graph.store(batch)
    # This batch's questions: their namespaces are the ones its graph instance holds.
    batch_goldens = [g for g in read_jsonl(goldens.file(GOLDENS_FILE)) if batch.holds(g["name"])]
    # The planted canaries (every batch holds them all), retrieved apart from the questions.
    planted = goldens.file(CANARIES_FILE)
    canaries = list(read_jsonl(planted)) if planted.exists() else []
    with (
        graph_step(context, store, "retrieval_results"),
        publish(context, paths.root(), inputs) as pub,
    ):
        current, why = graph_currency(store, goldens, session_fixtures, reconciled_graph)
        if not current:
            # Nothing is retrieved from a graph that is not this chain's: the blocking check
            # says why, and nothing downstream scores it.
            context.log.error(f"not retrieving: {why}")
            write_jsonl(pub.stage / RESULTS_FILE, [])
            nothing = {
                name: protocol.outcome(name, "not_applicable", "nothing was retrieved")
                for name in RETRIEVAL_PROTOCOL
            }
            pub.facts.update(
                graph_current=False,
                graph_current_reason=why,
                **{PROTOCOL_FACT: protocol.as_map(nothing)},
            )
            summary, metadata = None, {"graph_current": False}
        else:
            journal = journal_path(
                artifacts_root(paths.root()) / "chains" / chain_of(context.run),
                stage_label(context).replace(" [", "@").rstrip("]")
                + (f"#repeat{repeat.index}" if repeat.index else ""),
            )
            summary, metadata = _retrieve(
                context,
                store,
                retrieval,
                repeat,
                batch_goldens,
                pub,
                reconciled_graph,
                canaries,
                journal=journal,
            )
            if retrieval.arms:
                pub.facts["arms"] = _run_arms(
                    context, retrieval, repeat, batch_goldens, session_fixtures, pub
                )
                metadata["arms"] = dg.MetadataValue.json(pub.facts["arms"]["per_arm"])
            pub.facts.update(graph_current=True, graph_current_reason=why, batch=batch.model_dump())
    metadata["artifact_dir"] = dg.MetadataValue.path(str(pub.final))
    metadata["graph_current_reason"] = dg.MetadataValue.text(why)
    yield dg.Output(pub.output, metadata=metadata)
    facts = pub.output.facts
    yield dg.AssetCheckResult(
        check_name="retrieval_graph_is_current",
        passed=current,
        description=None if current else why,
        metadata={"reason": dg.MetadataValue.text(why)},
    )
    before = (facts.get("graph_before") or {}).get("fingerprint")
    after = (facts.get("graph_after") or {}).get("fingerprint")
    unchanged = current and before == after
    yield dg.AssetCheckResult(
        check_name="retrieval_left_graph_unchanged",
        passed=unchanged,
        description=None
        if unchanged
        else "nothing was retrieved"
        if not current
        else "the graph changed while retrieval ran",
        metadata={"before": str(before), "after": str(after)},
    )
    memory_unchanged = current and facts.get("memory_before") == facts.get("memory_after")
    yield dg.AssetCheckResult(
        check_name="retrieval_left_memory_unchanged",
        passed=memory_unchanged,
        description=None
        if memory_unchanged
        else "nothing was retrieved"
        if not current
        else "the memory provider's store changed while retrieval ran",
        metadata={
            "provider": facts.get("memory_before") is not None,
            "changed": [
                ns
                for ns, fp in (facts.get("memory_before") or {}).items()
                if (facts.get("memory_after") or {}).get(ns) != fp
            ][:20],
        },
    )
    unscored = facts.get("unscored") or []
    causes = facts.get("unscored_by_cause") or {}
    yield dg.AssetCheckResult(
        check_name="retrieval_infrastructure_ok",
        passed=not unscored,
        description=None
        if not unscored
        else f"{len(unscored)} question(s) unscored by infrastructure failures: "
        + ", ".join(f"{k} {v}" for k, v in causes.items()),
        metadata={
            "unscored": len(unscored),
            "by_cause": dg.MetadataValue.json(causes),
            "first_unscored": dg.MetadataValue.json(unscored[:20]),
        },
    )
    yield from protocol_results(protocol.read_map(facts.get(PROTOCOL_FACT)))


def retrieval_protocol(
    summary: _Summary,
    goldens: list[dict],
    retrieval: RetrievalResource,
    reader: Any,
    retriever_name: str,
    batch_sessions: int | None,
) -> dict[str, protocol.CheckStatus]:
    """The protocol checks over what this batch's retrieval handed on."""
    metas = {g["name"]: g["additional_metadata"] for g in goldens}
    if retrieval.scope == "question":
        candidates = {q: len(m["haystack_session_ids"]) for q, m in metas.items()}
    else:  # a batch-scoped search can return any session of the batch's graph
        candidates = {q: batch_sessions or 0 for q in metas}
    return {
        protocol.READER_DATE: protocol.reader_date_check(
            summary.saw_date, reader.label, sends_prompt=sends_prompt(reader)
        ),
        protocol.TOP_K_BELOW_HAYSTACK: protocol.top_k_check(
            candidates,
            retrieval.top_k,
            scope=retrieval.scope,
            abstention=[q for q, m in metas.items() if m.get("abstention")],
        ),
        protocol.WITHIN_TOP_K: protocol.within_top_k_check(
            summary.returned, retrieval.top_k, retriever_name
        ),
    }


def _retrieve_canaries(
    context: dg.AssetExecutionContext, runner: RetrievalRunner, planted: list, pub: Any
) -> dict[str, Any]:
    """The canary questions through the same retriever and reader, into their own file (never
    among the questions' results); what they cost."""
    started = time.perf_counter()
    unscored: list[str] = []

    bar = Progress(f"{stage_label(context)} canaries", len(planted), unit="q", log=context.log.info)

    def note(done: int, total: int, result: QuestionRetrieval) -> None:
        if result.infra_failures:
            unscored.append(result.question_id)
        bar.update(unscored=len(unscored))

    with bar:
        write_jsonl(
            pub.stage / CANARY_RESULTS_FILE,
            (r.model_dump(mode="json") for r in runner.run(planted, note)),
        )
    seconds = round(time.perf_counter() - started, 3)
    context.log.info(f"canaries: {len(planted)} retrieved in {seconds:.2f} s")
    return {"questions": len(planted), "unscored": unscored, "seconds": seconds}


def _retrieve(
    context: dg.AssetExecutionContext,
    store: GraphStore,
    retrieval: RetrievalResource,
    repeat: RepeatResource,
    goldens: list[dict],
    pub: Any,
    reconciled: StageOutput,
    canaries: list[dict] | None = None,
    journal: Path | None = None,
) -> tuple[_Summary, dict[str, Any]]:
    """Retrieve and read every question of this batch into the artifact; its facts and the
    materialization's metadata. A provider's memory is searched through the provider the
    reconcile stage filled, its store fingerprinted before and after."""
    questions = questions_from_goldens(goldens)
    record = reconciled.facts.get("provider")
    try:
        provider = ProviderRecord(**record).open() if record else None
    except (ReconcileError, ProviderError) as exc:
        raise dg.Failure(f"memory provider: {exc}") from None
    planted = questions_from_goldens(canaries or [])
    namespaces = sorted({namespace_of(q.question_id) for q in [*questions, *planted]})
    tokenizer = PayloadTokenizer()
    summary = _Summary()
    prepared = None
    if provider is None:
        # The retriever's own write step (dense: embeddings and the vector index), before
        # the fingerprint that proves the reads wrote nothing.
        try:
            prepared = build.prepare_graph_for_retrieval(retrieval, store, context.log.info)
        except (RetrieverLoadError, ValueError, GraphError, EmbedderUnavailable) as exc:
            raise dg.Failure(
                f"preparing the graph for retriever {retrieval.retriever!r}: {exc}"
            ) from None
    before = graph_state(store)
    context.log.info(
        f"graph before retrieval: {before.nodes} nodes, {before.relationships} "
        f"relationships, {before.fingerprint} ({before.seconds:.1f} s)"
    )
    try:
        llm = build.retrieval_layer(retrieval, repeat)
    except LLMError as exc:
        if provider is not None:
            provider.close()
        raise dg.Failure(f"retrieval LLM: {exc}") from None
    try:
        memory_before = fingerprints(provider, namespaces) if provider else None
        env = RetrievalEnv(
            store=store,
            backend=store.dialect.name,
            llm=llm,
            tokenizer=tokenizer,
            query_timeout_s=retrieval.query_timeout_s,
            max_rows=retrieval.max_rows,
        )
        try:
            if provider is not None:
                retriever, reader = ProviderRetriever(provider), build.reader(retrieval, llm)
            else:
                retriever, reader = build.retriever_and_reader(retrieval, env, llm)
                build.check_graph_for(retriever)
        except (RetrieverLoadError, ValueError) as exc:
            raise dg.Failure(str(exc)) from None
        runner = RetrievalRunner(
            retriever,
            reader,
            scope=retrieval.scope,
            top_k=retrieval.top_k,
            count_tokens=tokenizer.count_context,
            graph_alive=lambda: graph_answers(store),
            provenance=ProvenanceResolver(store),
        )
        started = time.perf_counter()
        # What an interrupted or incomplete run of this chain measured on this same graph
        # is kept (`retrieve.journal`); only the rest is retrieved.
        header = {"reconciled_graph": reconciled.run_id, "sample": repeat.sample_identity}
        kept = measured(journal, header) if journal is not None else {}
        kept = {q.question_id: kept[q.question_id] for q in questions if q.question_id in kept}
        if kept:
            context.log.info(f"resumed: {len(kept)} question(s) kept from this chain's journal")
        todo = [q for q in questions if q.question_id not in kept]
        bar = Progress(stage_label(context), len(todo), unit="q", log=context.log.info)
        book = Journal(journal, header) if journal is not None else None

        def progress(done: int, total: int, result: QuestionRetrieval) -> None:
            if book is not None:
                book.add(result)
            bar.update(failed=len(summary.failed), unscored=len(summary.unscored))

        def counted(results: Iterator[QuestionRetrieval]) -> Iterator[dict[str, Any]]:
            for r in results:
                summary.add(r)
                yield r.model_dump(mode="json")

        try:
            with bar:
                write_jsonl(
                    pub.stage / RESULTS_FILE,
                    counted(
                        merged([q.question_id for q in questions], kept, runner.run(todo, progress))
                    ),
                )
        finally:
            if book is not None:
                book.close()
        wall_s = time.perf_counter() - started
        canary_facts = _retrieve_canaries(context, runner, planted, pub) if planted else None
        after = graph_state(store)
        pins = {
            "retriever": retriever.pins(),
            "scope": retrieval.scope,
            "top_k": retrieval.top_k,
            "reader": reader.label,
            "reader_prompt": reader_pins(reader),
            "tokenizer": tokenizer.pin(),
            "results_schema_version": RESULTS_SCHEMA_VERSION,
            "llm": llm.pins() if llm is not None else None,
        }
        usage = llm.snapshot().to_metadata() if llm is not None else None
        memory_after = fingerprints(provider, namespaces) if provider else None
        # After the last search, and never through the retriever: what memory holds of each
        # question's evidence, for the diagnosis of where a question failed.
        traces = evidence_traces(store, goldens, provider, namespaces)
        write_jsonl(pub.stage / TRACE_FILE, (t.model_dump(mode="json") for t in traces))
    finally:
        if llm is not None:
            llm.close()
        if provider is not None:
            provider.close()
    # Tier 2's ingestion axis: what the memory held, read through its searchable texts.
    ingestion = tier2_ingestion(store, goldens)
    if ingestion is not None:
        (pub.stage / INGESTION_FILE).write_text(json.dumps(ingestion, indent=1), "utf-8")
    injection = read_graph_fingerprint(store) or {}
    injected = reconciled.find("injected_graph")
    checks = retrieval_protocol(
        summary,
        goldens,
        retrieval,
        reader,
        retriever.name,
        ((injected.facts.get("counts") or {}).get("sessions") if injected else None),
    )
    for name, status in checks.items():
        if not status.ok:
            context.log.warning(f"{name}: {status.status}: {status.detail}")
    pub.facts.update(
        pins=pins,
        # What the graph retrieval read actually held: the manifest pins this.
        graph={
            "backend": store.dialect.name,
            "server_version": store.server_version(),
            "schema_version": injection.get("schema_version"),
            "fingerprint": injection.get("fingerprint"),
            "injected_at": injection.get("injected_at"),
        },
        memory=reconciled.facts["memory"] if provider else memory_census(store),
        memory_before=memory_before,
        prepared=prepared,
        memory_after=memory_after,
        canaries=canary_facts,
        questions=summary.questions,
        failed=summary.failed,
        unscored=summary.unscored,
        unscored_by_cause=summary.causes,
        graph_before=before.model_dump(),
        graph_after=after.model_dump(),
        llm_usage=usage,
        seconds=round(wall_s, 3),
        options={"retrieval": retrieval.model_dump()},
        **{PROTOCOL_FACT: protocol.as_map(checks)},
    )
    if memory_before != memory_after:
        context.log.error("the memory provider's store changed during retrieval")
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
        "batch": context.partition_key if context.has_partition_key else "batch-01-of-01",
        "questions": summary.questions,
        "canaries": len(planted),
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
        "scope": retrieval.scope,
        "reader": reader.label,
        "pins": dg.MetadataValue.json(pins),
        "first_failed": dg.MetadataValue.json(summary.failed[:20]),
        "first_unscored": dg.MetadataValue.json(summary.unscored[:20]),
        "graph_current": True,
        "graph_fingerprint_before": before.fingerprint,
        "graph_fingerprint_after": after.fingerprint,
        "graph_nodes": after.nodes,
        "graph_relationships": after.relationships,
        "path": dg.MetadataValue.path(str(pub.final / RESULTS_FILE)),
    }
    if usage is not None:
        metadata["llm_usage"] = dg.MetadataValue.json(usage)
    return summary, metadata


def _run_arms(
    context: dg.AssetExecutionContext,
    retrieval: RetrievalResource,
    repeat: RepeatResource,
    goldens: list[dict],
    fixtures: StageOutput,
    pub: Any,
) -> dict[str, Any]:
    """The reference arms (`retrieve.arms`), after the system's own loop and apart from it:
    the run's reader on a layer of its own (the same cache, its own accounting), so the
    system's results, usage and timings are the same with or without arms."""
    try:
        llm = build.llm_layer({"reader": retrieval.reader}, sample_identity=repeat.sample_identity)
    except LLMError as exc:
        raise dg.Failure(f"arms reader LLM: {exc}") from None
    try:
        total = len(retrieval.arms) * len(goldens)
        with Progress(
            f"{stage_label(context)} arms", total, unit="answer", log=context.log.info
        ) as bar:
            facts = write_arms(
                pub.stage / ARMS_FILE,
                retrieval.arms,
                goldens,
                fixtures.file(FIXTURES_FILE),
                build.reader(retrieval, llm),
                count_tokens=PayloadTokenizer().count_context,
                progress=bar.update,
            )
        facts["llm_usage"] = llm.snapshot().to_metadata() if llm is not None else None
    finally:
        if llm is not None:
            llm.close()
    return facts


RETRIEVAL_ASSETS = [retrieval_results]
