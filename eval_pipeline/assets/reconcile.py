"""Reconciliation stage asset: reconciled_graph, its completeness and currency checks.

`reconciled_graph` runs the configured reconciler over the injected graph's sessions that are
not yet `done` under the same reconciler pins (all of them with `redo`): memory another
reconciler, version or config made is redone, never kept under this one's name. It writes
what it distils into the same graph, and reports how much of the graph it managed to distil.
The data lives in the graph; the asset returns a MaterializeResult and publishes a run-scoped
record of its pins (`artifacts.py`).

Memory-formation checks (`reconcile.memory_checks`): no duplicate entities within a
namespace, every superseded fact has its successor, every fact and chunk leads back to its
turns.

Wiring (in definitions.py): resources `graph` (GraphStore) and `reconcile` (ReconcilerSettings);
assets RECONCILE_ASSETS, checks RECONCILE_CHECKS.
"""

import time
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.artifacts import ARTIFACT_META, input_record, own_record, publish
from eval_pipeline.assets.batches import QUESTION_BATCHES, batch_graph
from eval_pipeline.assets.graph_lease import graph_check, graph_step
from eval_pipeline.assets.resources import ProjectPaths, json_options
from eval_pipeline.graph.checks import graph_holds
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMConfigError, LLMLayer, LLMSettings
from eval_pipeline.llm.config import parse_role_settings
from eval_pipeline.ops.sensors import records_failures
from eval_pipeline.reconcile import memory_checks, schema
from eval_pipeline.reconcile.protocol import ReconcileError, pins_of
from eval_pipeline.reconcile.reader import read_statuses, status_counts
from eval_pipeline.reconcile.registry import DEFAULT_RECONCILER, load_reconciler
from eval_pipeline.reconcile.runner import ReconcileProgress, ReconcileReport, reconcile_pending

ASSET_KEY = dg.AssetKey("reconciled_graph")
GRAPH_POOL = "graph_instance"  # every asset touching the graph instance (limit 1)
DEFAULT_CONCURRENCY = 4  # offline reconcilers: the graph writer is the bottleneck anyway
MAX_FAILURE_ROWS = 50
LOG_EVERY_S = 10.0


class ReconcilerSettings(dg.ConfigurableResource):
    """Which reconciler, how parallel, and when completeness is too low. Default: extractive."""

    reconciler: str = Field(
        default=DEFAULT_RECONCILER,
        description="none | extractive | llm | a plug-in 'package.module:ClassName'",
    )
    config: str = Field(
        default="{}", description="JSON object of keyword options for the reconciler"
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        description="sessions in flight; unset = the LLM role's limit for llm, else 4",
    )
    redo: bool = Field(default=False, description="reconcile sessions already done, too")
    completeness_threshold: float = Field(
        default=0.95, ge=0.0, le=1.0, description="the check warns below this done/total ratio"
    )
    llm: str = Field(
        default="offline",
        description="PROVIDER:MODEL[@BASE_URL] for the reconciler role (the llm reconciler)",
    )
    llm_concurrency: int | None = Field(
        default=None, ge=1, description="the reconciler role's limit (unset: the provider's)"
    )
    llm_roles: str = Field(
        default="{}",
        description="JSON {role: {timeout_s, concurrency, max_tokens, structured_output}}: "
        "per-role LLM settings (eval-pipeline run's --judge-timeout etc.)",
    )
    llm_cache_path: str | None = Field(default=None, description="default: state dir")
    sample_identity: str | None = Field(
        default=None,
        description="a repeat's sample identity (run --repeat with reconciliation): part of "
        "the LLM cache key and of the reconciler pins, so each repeat reconciles afresh",
    )

    def options(self) -> dict[str, Any]:
        return json_options(self.config, "reconciler config")

    def llm_layer(self) -> LLMLayer | None:
        """A layer whose `reconciler` role is configured, or None when it is offline."""
        if self.llm.strip() == "offline":
            return None
        extra: dict[str, Any] = {}
        if self.llm_cache_path:
            extra["cache_path"] = Path(self.llm_cache_path)
        if self.sample_identity:
            extra["sample_identity"] = self.sample_identity
        try:
            settings = LLMSettings.from_specs(
                {"reconciler": self.llm},
                role_overrides={
                    "reconciler": {
                        "concurrency": self.llm_concurrency,
                        **parse_role_settings(self.llm_roles).get("reconciler", {}),
                    }
                },
                **extra,
            )
            return LLMLayer(settings)
        except LLMConfigError as exc:
            raise dg.Failure(f"reconciler LLM: {exc}") from None

    def build(self, llm: LLMLayer | None) -> Any:
        """The reconciler, or a dg.Failure that says what is wrong with the configuration."""
        try:
            return load_reconciler(self.reconciler, self.options(), llm=llm)
        except ReconcileError as exc:
            raise dg.Failure(str(exc)) from None

    def concurrency_for(self, reconciler: Any) -> int:
        if self.concurrency is not None:
            return self.concurrency
        return int(getattr(reconciler, "concurrency", DEFAULT_CONCURRENCY))


def _cell(value: object) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[object]]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def failures_table(report: ReconcileReport) -> dg.MetadataValue:
    if not report.failures:
        return dg.MetadataValue.md("No session failed.")
    rows: list[list[object]] = [
        [f.session_id, f.reason] for f in report.failures[:MAX_FAILURE_ROWS]
    ]
    more = len(report.failures) - MAX_FAILURE_ROWS
    if more > 0:
        rows.append(["…", f"and {more} more"])
    return _md_table(["session_id", "reason"], rows)


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
        "status": dg.MetadataValue.json(report.status_after),
        "failures": failures_table(report),
        "nodes": _md_table(
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
    key=ASSET_KEY,
    group_name=GROUP,
    deps=[dg.AssetKey("injected_graph")],
    partitions_def=QUESTION_BATCHES,
    pool=GRAPH_POOL,
    description="Memory formed over the injected graph by the configured reconciler.",
)
@records_failures
def reconciled_graph(
    context: dg.AssetExecutionContext,
    graph: GraphStore,
    reconcile: ReconcilerSettings,
    paths: ProjectPaths,
) -> dg.MaterializeResult:
    injected = input_record(context, "injected_graph")
    graph = batch_graph(context, graph)
    llm = reconcile.llm_layer()
    try:
        with graph_step(context, graph, "reconciled_graph"):
            report = _reconcile(context, graph, reconcile, llm)
            current, why = graph_holds(graph, injected.facts["fingerprint"])
    finally:
        if llm is not None:
            llm.close()
    with publish(
        paths.root(), "reconciled_graph", context.run.run_id, {"injected_graph": injected}
    ) as pub:
        pub.facts.update(
            pins=report_pins(report),
            completeness=report.completeness,
            status=report.status_after,
            llm_usage=report.llm_usage,
            graph_current=current,
            graph_current_reason=why,
            seconds=report.timings.get("total_s"),
        )
    metadata = report_metadata(report, reconcile.completeness_threshold)
    metadata[ARTIFACT_META] = dg.MetadataValue.path(str(pub.final))
    metadata["graph_current"] = current
    return dg.MaterializeResult(metadata=metadata)


def _reconcile(
    context: dg.AssetExecutionContext,
    graph: GraphStore,
    reconcile: ReconcilerSettings,
    llm: LLMLayer | None,
) -> ReconcileReport:
    reconciler = reconcile.build(llm)
    concurrency = reconcile.concurrency_for(reconciler)
    pins = pins_of(reconciler)
    context.log.info(
        f"reconciler {pins['name']} v{pins['version']} ({pins['class']}), "
        f"concurrency {concurrency}, redo={reconcile.redo}"
    )
    last_log = [time.perf_counter()]
    every = [1]

    def progress(p: ReconcileProgress) -> None:
        if p.finished == 1:
            every[0] = max(1, p.to_do // 20)
        now = time.perf_counter()
        if p.finished % every[0] == 0 or p.finished == p.to_do or now - last_log[0] > LOG_EVERY_S:
            last_log[0] = now
            rate = p.finished / max(p.elapsed_s, 1e-9)
            context.log.info(
                f"reconciled {p.finished}/{p.to_do} sessions ({rate:.1f}/s): "
                f"{p.done} done, {p.failed} failed"
            )

    extra = {"sample_identity": reconcile.sample_identity} if reconcile.sample_identity else None
    report = reconcile_pending(
        graph,
        reconciler,
        concurrency=concurrency,
        redo=reconcile.redo,
        progress=progress,
        extra_pins=extra,
    )
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


@dg.asset_check(
    asset=ASSET_KEY,
    pool=GRAPH_POOL,
    description="Warns when fewer sessions than the threshold were reconciled.",
)
def reconcile_completeness(
    context: dg.AssetCheckExecutionContext, graph: GraphStore, reconcile: ReconcilerSettings
) -> dg.AssetCheckResult:
    graph = batch_graph(context, graph)
    graph_check(context, graph)
    counts = status_counts(read_statuses(graph))
    total = sum(counts.values())
    done = counts.get(schema.DONE, 0)
    ratio = done / total if total else 1.0
    threshold = reconcile.completeness_threshold
    return dg.AssetCheckResult(
        passed=ratio >= threshold,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            None
            if ratio >= threshold
            else f"only {done} of {total} sessions reconciled ({ratio:.1%} < {threshold:.0%})"
        ),
        metadata={
            "completeness": dg.MetadataValue.float(round(ratio, 4)),
            "threshold": dg.MetadataValue.float(threshold),
            "status": dg.MetadataValue.json(counts),
        },
    )


@dg.asset_check(
    asset=ASSET_KEY,
    blocking=True,
    description="The graph still holds the fixtures this reconciliation was built on "
    "(nothing downstream reads a graph another injection replaced).",
)
def reconciled_graph_is_current(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    record = own_record(context, "reconciled_graph")
    current = bool(record.facts.get("graph_current"))
    reason = str(record.facts.get("graph_current_reason"))
    return dg.AssetCheckResult(
        passed=current,
        description=None if current else reason,
        metadata={"reason": dg.MetadataValue.text(reason)},
    )


def _memory_check(
    context: dg.AssetCheckExecutionContext,
    graph: GraphStore,
    check: Any,
) -> dg.AssetCheckResult:
    graph = batch_graph(context, graph)
    graph_check(context, graph)
    outcome = check(graph)
    return dg.AssetCheckResult(
        passed=not outcome.problems,
        description=None if not outcome.problems else "; ".join(outcome.problems),
        metadata={
            "problems": dg.MetadataValue.json(outcome.problems),
            "counts": dg.MetadataValue.json(outcome.counts),
        },
    )


@dg.asset_check(
    asset=ASSET_KEY,
    pool=GRAPH_POOL,
    description="No two entities of one namespace name the same thing (same type and "
    "normalised name, or one an alias of the other).",
)
def memory_no_duplicate_entities(
    context: dg.AssetCheckExecutionContext, graph: GraphStore
) -> dg.AssetCheckResult:
    return _memory_check(context, graph, memory_checks.duplicate_entities)


@dg.asset_check(
    asset=ASSET_KEY,
    pool=GRAPH_POOL,
    description="Every superseded fact has invalid_at and a SUPERSEDED_BY edge to its "
    "successor in its namespace.",
)
def memory_supersession_complete(
    context: dg.AssetCheckExecutionContext, graph: GraphStore
) -> dg.AssetCheckResult:
    return _memory_check(context, graph, memory_checks.supersession_complete)


@dg.asset_check(
    asset=ASSET_KEY,
    pool=GRAPH_POOL,
    description="Every fact and chunk has provenance edges to the turns of its own session "
    "it came from (evidence recall follows them).",
)
def memory_provenance_complete(
    context: dg.AssetCheckExecutionContext, graph: GraphStore
) -> dg.AssetCheckResult:
    return _memory_check(context, graph, memory_checks.provenance_complete)


RECONCILE_ASSETS = [reconciled_graph]
RECONCILE_CHECKS = [
    reconcile_completeness,
    reconciled_graph_is_current,
    memory_no_duplicate_entities,
    memory_supersession_complete,
    memory_provenance_complete,
]
