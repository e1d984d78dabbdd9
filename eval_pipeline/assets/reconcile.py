"""Reconciliation stage asset: reconciled_graph, and the memory-formation checks.

`reconciled_graph` runs the configured reconciler over the injected graph's sessions that are
not yet `done` under the same reconciler pins (all of them with `redo`): memory another
reconciler, version or config made is redone, never kept under this one's name. It writes
what it distils into the same graph and reports how much of the graph it managed to distil
(its own checks: completeness, and that the graph still holds what it was built on; and the
protocol check that no session handed to the memory writer carried an evidence marker and
the memory formed holds none, blocking).

Memory-formation checks (`reconcile.memory_checks`, reading the graph): no duplicate entities
within a namespace, every superseded fact has its successor, every fact and chunk leads back
to its turns.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from eval_pipeline import build
from eval_pipeline.assets import GROUP
from eval_pipeline.assets.batches import QUESTION_BATCHES, batch_of
from eval_pipeline.assets.corpus import md_table
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.graph import checked_store
from eval_pipeline.assets.graph_lease import GRAPH_POOL, graph_step
from eval_pipeline.assets.handoff import StageOutput, publish, stage_label
from eval_pipeline.assets.protocol import PROTOCOL_FACT, protocol_result, protocol_spec
from eval_pipeline.assets.resources import (
    GraphResource,
    PathsResource,
    ReconcileResource,
    RepeatResource,
)
from eval_pipeline.graph.checks import evidence_markers, graph_holds
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMError, LLMLayer
from eval_pipeline.progress import Progress
from eval_pipeline.providers import ProviderUnavailable
from eval_pipeline.providers.formation import MEMORIES_FILE, form_memory
from eval_pipeline.providers.ingest import IngestProgress
from eval_pipeline.reconcile import memory_checks, schema
from eval_pipeline.reconcile.marker_audit import SessionAudit
from eval_pipeline.reconcile.processes import resolve_processes
from eval_pipeline.reconcile.protocol import ReconcileError, pins_of
from eval_pipeline.reconcile.runner import ReconcileProgress, ReconcileReport, reconcile_pending
from eval_pipeline.score import protocol

MAX_FAILURE_ROWS = 50


def failures_table(report: ReconcileReport) -> dg.MetadataValue:
    if not report.failures:
        return dg.MetadataValue.md("No session failed.")
    rows: list[list[object]] = [
        [f.session_id, f.reason] for f in report.failures[:MAX_FAILURE_ROWS]
    ]
    more = len(report.failures) - MAX_FAILURE_ROWS
    if more > 0:
        rows.append(["…", f"and {more} more"])
    return md_table(["session_id", "reason"], rows)


def report_pins(report: ReconcileReport) -> dict[str, Any]:
    return {
        **report.reconciler,
        "reconcile_schema_version": schema.RECONCILE_SCHEMA_VERSION,
        "pins_key": report.pins_key,
    }


def report_metadata(report: ReconcileReport, threshold: float) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "reconciler": str(report.reconciler.get("name")),
        "reconciler_version": str(report.reconciler.get("version")),
        "pins": dg.MetadataValue.json(report_pins(report)),
        "completeness": dg.MetadataValue.float(round(report.completeness, 4)),
        "completeness_threshold": dg.MetadataValue.float(threshold),
        "sessions_total": report.total_sessions,
        "sessions_to_do": report.to_do,
        "sessions_done_this_run": report.done,
        "sessions_failed_this_run": report.failed,
        "sessions_skipped_done": report.skipped_done,
        "sessions_redone_other_pins": report.redone_foreign,
        "redo": report.redo,
        "concurrency": report.concurrency,
        "processes": report.processes,
        "status": dg.MetadataValue.json(report.status_after),
        "failures": failures_table(report),
        "nodes": md_table(
            ["label", "written this run", "in graph"],
            [
                [label, report.nodes_written.get(label, 0), report.graph_nodes.get(label, 0)]
                for label in schema.NODE_LABELS
            ],
        ),
        "nodes_written": dg.MetadataValue.json(report.nodes_written),
        "timings": dg.MetadataValue.json(report.timings),
    }
    if report.namespaces is not None:
        metadata["namespaces"] = dg.MetadataValue.json(report.namespaces)
    if report.llm_usage is not None:
        metadata["llm_usage"] = dg.MetadataValue.json(report.llm_usage)
    if report.index_problems:
        metadata["index_problems"] = dg.MetadataValue.json(report.index_problems)
    return metadata


@dg.asset(
    group_name=GROUP,
    partitions_def=QUESTION_BATCHES,
    pool=GRAPH_POOL,
    description="Memory formed over the injected graph by the configured reconciler.",
    check_specs=[
        dg.AssetCheckSpec(
            "reconcile_completeness",
            asset="reconciled_graph",
            description="Warns when fewer sessions than the threshold were reconciled.",
        ),
        dg.AssetCheckSpec(
            "reconciled_graph_is_current",
            asset="reconciled_graph",
            blocking=True,
            description="The graph still holds the fixtures this reconciliation was built on "
            "(nothing downstream reads a graph another injection replaced).",
        ),
        protocol_spec(protocol.WRITER_NO_MARKER, "reconciled_graph"),
    ],
)
@records_failures
def reconciled_graph(
    context: dg.AssetExecutionContext,
    graph: GraphResource,
    reconcile: ReconcileResource,
    repeat: RepeatResource,
    paths: PathsResource,
    injected_graph: StageOutput,
) -> Iterator[Any]:
    store = graph.store(batch_of(context))
    try:
        provider_memory = build.is_provider(reconcile)
    except ReconcileError as exc:
        raise dg.Failure(str(exc)) from None
    if provider_memory:
        yield from _provider_memory(context, store, reconcile, paths, injected_graph)
        return
    try:
        llm = build.reconcile_layer(reconcile, repeat)
    except LLMError as exc:
        raise dg.Failure(f"reconciler LLM: {exc}") from None
    audit = SessionAudit()
    try:
        with graph_step(context, store, "reconciled_graph"):
            report = _reconcile(context, store, reconcile, repeat, llm, audit)
            current, why = graph_holds(store, injected_graph.facts["fingerprint"])
            markers = marker_check(context, audit, evidence_markers(store))
    finally:
        if llm is not None:
            llm.close()
    with publish(context, paths.root(), {"injected_graph": injected_graph}) as pub:
        pub.facts.update(
            pins=report_pins(report),
            completeness=report.completeness,
            status=report.status_after,
            llm_usage=report.llm_usage,
            graph_current=current,
            graph_current_reason=why,
            seconds=report.timings.get("total_s"),
            options={"reconcile": reconcile.model_dump()},
            **{PROTOCOL_FACT: protocol.as_map({protocol.WRITER_NO_MARKER: markers})},
        )
    metadata = report_metadata(report, reconcile.completeness_threshold)
    metadata["artifact_dir"] = dg.MetadataValue.path(str(pub.final))
    metadata["graph_current"] = current
    yield dg.Output(pub.output, metadata=metadata)
    threshold = reconcile.completeness_threshold
    done, total = report.status_after.get(schema.DONE, 0), sum(report.status_after.values())
    yield completeness_check(
        report.completeness,
        threshold,
        f"only {done} of {total} sessions reconciled",
        status=dg.MetadataValue.json(report.status_after),
    )
    yield current_check(current, why)
    yield protocol_result(protocol.WRITER_NO_MARKER, markers)


def marker_check(
    context: dg.AssetExecutionContext, audit: SessionAudit, memory_markers: list[str]
) -> protocol.CheckStatus:
    """The writer's marker check: what the sessions handed over carried, what memory holds."""
    status = protocol.writer_marker_check(audit.sessions, audit.found, memory_markers)
    if not status.ok:
        context.log.error(f"{protocol.WRITER_NO_MARKER}: {status.detail}")
    return status


def completeness_check(
    completeness: float, threshold: float, shortfall: str, **metadata: Any
) -> dg.AssetCheckResult:
    """The completeness check (warn): `shortfall` says what fell short."""
    return dg.AssetCheckResult(
        check_name="reconcile_completeness",
        passed=completeness >= threshold,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if completeness >= threshold
        else f"{shortfall} ({completeness:.1%} < {threshold:.0%})",
        metadata={
            "completeness": dg.MetadataValue.float(round(completeness, 4)),
            "threshold": dg.MetadataValue.float(threshold),
            **metadata,
        },
    )


def current_check(current: bool, why: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name="reconciled_graph_is_current",
        passed=current,
        description=None if current else why,
        metadata={"reason": dg.MetadataValue.text(why)},
    )


def _provider_memory(
    context: dg.AssetExecutionContext,
    store: GraphStore,
    reconcile: ReconcileResource,
    paths: PathsResource,
    injected_graph: StageOutput,
) -> Iterator[Any]:
    """A provider's memory: fed from the graph, read back and audited (`providers`)."""
    try:
        provider, record = build.memory_provider(reconcile, paths.root(), store.where)
    except ReconcileError as exc:
        raise dg.Failure(str(exc)) from None
    concurrency = build.ingest_concurrency(reconcile, provider)
    context.log.info(
        f"memory provider {record.pins.get('name')} v{record.pins.get('version')}, "
        f"{concurrency} namespace(s) at a time, store {record.storage_dir}"
    )
    bar: list[Progress] = []

    def progress(p: IngestProgress) -> None:
        if not bar:  # the total is known once the ledger is read
            bar.append(
                Progress(
                    f"{stage_label(context)} ingest", p.to_do, unit="session", log=context.log.info
                )
            )
        bar[0].update(failed=p.failed)

    audit = SessionAudit()
    with publish(context, paths.root(), {"injected_graph": injected_graph}) as pub:
        with graph_step(context, store, "reconciled_graph"):
            try:
                formation = form_memory(
                    store,
                    provider,
                    record,
                    concurrency=concurrency,
                    progress=progress,
                    memories_path=pub.stage / MEMORIES_FILE,
                    session_audit=audit,
                )
            except ProviderUnavailable as exc:
                raise dg.Failure(f"memory provider unavailable: {exc}") from None
            finally:
                for b in bar:
                    b.close()
                provider.close()
            current, why = graph_holds(store, injected_graph.facts["fingerprint"])
            markers = marker_check(
                context, audit, [*formation.memory_markers, *evidence_markers(store)]
            )
        report = formation.report
        pub.facts.update(
            pins={**record.pins, "pins_key": record.pins_key},
            provider=record.model_dump(mode="json"),
            ingest=report.model_dump(mode="json"),
            formation_audit=formation.audit.model_dump(mode="json"),
            memory=formation.census(),
            completeness=report.completeness,
            graph_current=current,
            graph_current_reason=why,
            seconds=report.seconds,
            options={"reconcile": reconcile.model_dump()},
            **{PROTOCOL_FACT: protocol.as_map({protocol.WRITER_NO_MARKER: markers})},
        )
    context.log.info(
        f"{report.ingested} sessions ingested, {report.skipped_done} already, "
        f"{report.failed} failed, {report.namespaces_reset} namespace(s) reset; "
        f"{formation.audit.memories} memories: {formation.audit.unsupported} unsupported, "
        f"{formation.audit.unsourced} unsourced"
    )
    for failure in report.failures[:5]:
        context.log.warning(
            f"session {failure.session_id} of {failure.namespace} failed: {failure.reason}"
        )
    threshold = reconcile.completeness_threshold
    yield dg.Output(
        pub.output,
        metadata={
            "memory_provider": str(record.pins.get("name")),
            "pins": dg.MetadataValue.json(pub.output.facts["pins"]),
            "completeness": dg.MetadataValue.float(round(report.completeness, 4)),
            "ingest": dg.MetadataValue.json(pub.output.facts["ingest"]),
            "formation_audit": dg.MetadataValue.json(
                {k: v for k, v in pub.output.facts["formation_audit"].items() if k != "examples"}
            ),
            "artifact_dir": dg.MetadataValue.path(str(pub.final)),
            "graph_current": current,
        },
    )
    yield completeness_check(
        report.completeness,
        threshold,
        f"only {report.skipped_done + report.ingested} of {report.pairs_total} "
        "(namespace, session) pairs ingested",
    )
    yield current_check(current, why)
    yield protocol_result(protocol.WRITER_NO_MARKER, markers)


def _reconcile(
    context: dg.AssetExecutionContext,
    store: GraphStore,
    reconcile: ReconcileResource,
    repeat: RepeatResource,
    llm: LLMLayer | None,
    audit: SessionAudit,
) -> ReconcileReport:
    try:
        reconciler = build.reconciler(reconcile, llm)
    except ReconcileError as exc:
        raise dg.Failure(str(exc)) from None
    concurrency = build.reconcile_concurrency(reconcile, reconciler)
    processes = resolve_processes(reconciler, reconcile.processes)
    pins = pins_of(reconciler)
    context.log.info(
        f"reconciler {pins['name']} v{pins['version']} ({pins['class']}), "
        f"concurrency {concurrency}, {processes} process(es), redo={reconcile.redo}"
    )
    bars: dict[str, Progress] = {}
    label = stage_label(context)

    def progress(p: ReconcileProgress) -> None:
        if "sessions" not in bars:  # the total is known once the graph's states are read
            bars["sessions"] = Progress(
                f"{label} sessions", p.to_do, unit="session", log=context.log.info
            )
        bars["sessions"].update(failed=p.failed)

    def namespaces(done: int, total: int) -> None:
        # The namespace pass is a phase of its own: its line, not a restarted counter.
        if "namespaces" not in bars:
            if "sessions" in bars:
                bars.pop("sessions").close()
            bars["namespaces"] = Progress(
                f"{label} namespaces", total, unit="ns", log=context.log.info
            )
        bars["namespaces"].update(done - bars["namespaces"].n)  # skipped ones count too

    identity = repeat.sample_identity if repeat.reconcile else None
    try:
        report = reconcile_pending(
            store,
            reconciler,
            concurrency=concurrency,
            redo=reconcile.redo,
            progress=progress,
            extra_pins={"sample_identity": identity} if identity else None,
            audit=audit,
            namespace_progress=namespaces,
            processes=processes,
        )
    finally:
        for b in bars.values():
            b.close()
    context.log.info(
        f"{report.done} done, {report.failed} failed, {report.skipped_done} already done, "
        f"{report.redone_foreign} redone (made under other pins); "
        f"completeness {report.completeness:.3f} of {report.total_sessions} sessions"
    )
    for failure in report.failures[:5]:
        context.log.warning(f"session {failure.session_id} failed: {failure.reason}")
    for problem in report.index_problems:
        context.log.warning(f"index not created: {problem}")
    return report


def _memory_check(
    context: dg.AssetCheckExecutionContext, graph: GraphResource, check: Any
) -> dg.AssetCheckResult:
    outcome = check(checked_store(context, graph))
    return dg.AssetCheckResult(
        passed=not outcome.problems,
        description=None if not outcome.problems else "; ".join(outcome.problems),
        metadata={
            "problems": dg.MetadataValue.json(outcome.problems),
            "counts": dg.MetadataValue.json(outcome.counts),
        },
    )


@dg.asset_check(
    asset=reconciled_graph,
    pool=GRAPH_POOL,
    description="No two entities of one namespace name the same thing (same type and "
    "normalised name, or one an alias of the other).",
)
def memory_no_duplicate_entities(
    context: dg.AssetCheckExecutionContext, graph: GraphResource
) -> dg.AssetCheckResult:
    return _memory_check(context, graph, memory_checks.duplicate_entities)


@dg.asset_check(
    asset=reconciled_graph,
    pool=GRAPH_POOL,
    description="Every superseded fact has invalid_at and a SUPERSEDED_BY edge to its "
    "successor in its namespace.",
)
def memory_supersession_complete(
    context: dg.AssetCheckExecutionContext, graph: GraphResource
) -> dg.AssetCheckResult:
    return _memory_check(context, graph, memory_checks.supersession_complete)


@dg.asset_check(
    asset=reconciled_graph,
    pool=GRAPH_POOL,
    description="Every fact and chunk has provenance edges to the turns of its own session "
    "it came from (evidence recall follows them).",
)
def memory_provenance_complete(
    context: dg.AssetCheckExecutionContext, graph: GraphResource
) -> dg.AssetCheckResult:
    return _memory_check(context, graph, memory_checks.provenance_complete)


RECONCILE_ASSETS = [reconciled_graph]
RECONCILE_CHECKS = [
    memory_no_duplicate_entities,
    memory_supersession_complete,
    memory_provenance_complete,
]
