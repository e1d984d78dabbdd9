"""Reconciliation stage asset: reconciled_graph, and its completeness check.

`reconciled_graph` runs the configured reconciler over the injected graph's sessions that are
not yet `done` (all of them with `redo`), writes what it distils into the same graph, and
reports how much of the graph it managed to distil. The data lives in the graph, so the asset
returns a MaterializeResult (metadata only).

Wiring (in definitions.py): resources `graph` (GraphStore) and `reconcile` (ReconcilerSettings);
assets RECONCILE_ASSETS, checks RECONCILE_CHECKS.
"""

import time
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline.assets.resources import json_options
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMConfigError, LLMLayer, LLMSettings
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.protocol import ReconcileError, pins_of
from eval_pipeline.reconcile.reader import read_statuses, status_counts
from eval_pipeline.reconcile.registry import DEFAULT_RECONCILER, load_reconciler
from eval_pipeline.reconcile.runner import ReconcileProgress, ReconcileReport, reconcile_pending

GROUP = "reconcile"
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
    llm_concurrency: int = Field(default=8, ge=1, description="the reconciler role's limit")
    llm_cache_path: str | None = Field(default=None, description="default: state dir")

    def options(self) -> dict[str, Any]:
        return json_options(self.config, "reconciler config")

    def llm_layer(self) -> LLMLayer | None:
        """A layer whose `reconciler` role is configured, or None when it is offline."""
        if self.llm.strip() == "offline":
            return None
        extra: dict[str, Any] = {}
        if self.llm_cache_path:
            extra["cache_path"] = Path(self.llm_cache_path)
        try:
            settings = LLMSettings.from_specs(
                {"reconciler": self.llm},
                role_overrides={"reconciler": {"concurrency": self.llm_concurrency}},
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


def report_metadata(report: ReconcileReport, threshold: float) -> dict[str, Any]:
    pins = {**report.reconciler, "reconcile_schema_version": schema.RECONCILE_SCHEMA_VERSION}
    metadata: dict[str, Any] = {
        "reconciler": str(report.reconciler.get("name")),
        "reconciler_version": str(report.reconciler.get("version")),
        "pins": dg.MetadataValue.json(pins),
        "completeness": dg.MetadataValue.float(report.completeness),
        "completeness_threshold": dg.MetadataValue.float(threshold),
        "sessions_total": report.total_sessions,
        "sessions_to_do": report.to_do,
        "sessions_done_this_run": report.done,
        "sessions_failed_this_run": report.failed,
        "sessions_skipped_done": report.skipped_done,
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
    if report.llm_usage is not None:
        metadata["llm_usage"] = dg.MetadataValue.json(report.llm_usage)
    if report.index_problems:
        metadata["index_problems"] = dg.MetadataValue.json(report.index_problems)
    return metadata


@dg.asset(
    key=ASSET_KEY,
    group_name=GROUP,
    deps=[dg.AssetKey("injected_graph")],
    pool=GRAPH_POOL,
    description="Memory formed over the injected graph by the configured reconciler.",
)
def reconciled_graph(
    context: dg.AssetExecutionContext, graph: GraphStore, reconcile: ReconcilerSettings
) -> dg.MaterializeResult:
    llm = reconcile.llm_layer()
    try:
        return _reconcile(context, graph, reconcile, llm)
    finally:
        if llm is not None:
            llm.close()


def _reconcile(
    context: dg.AssetExecutionContext,
    graph: GraphStore,
    reconcile: ReconcilerSettings,
    llm: LLMLayer | None,
) -> dg.MaterializeResult:
    reconciler = reconcile.build(llm)
    concurrency = reconcile.concurrency_for(reconciler)
    pins = pins_of(reconciler)
    context.log.info(
        f"reconciler {pins['name']} v{pins['version']} ({pins['class']}), "
        f"concurrency {concurrency}, redo={reconcile.redo}"
    )
    graph.ensure_running()
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

    report = reconcile_pending(
        graph, reconciler, concurrency=concurrency, redo=reconcile.redo, progress=progress
    )
    context.log.info(
        f"{report.done} done, {report.failed} failed, {report.skipped_done} already done; "
        f"completeness {report.completeness:.3f} of {report.total_sessions} sessions"
    )
    for failure in report.failures[:5]:
        context.log.warning(f"session {failure.session_id} failed: {failure.reason}")
    for problem in report.index_problems:
        context.log.warning(f"index not created: {problem}")
    return dg.MaterializeResult(metadata=report_metadata(report, reconcile.completeness_threshold))


@dg.asset_check(
    asset=ASSET_KEY,
    pool=GRAPH_POOL,
    description="Warns when fewer sessions than the threshold were reconciled.",
)
def reconcile_completeness(graph: GraphStore, reconcile: ReconcilerSettings) -> dg.AssetCheckResult:
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
            "completeness": dg.MetadataValue.float(round(ratio, 6)),
            "threshold": dg.MetadataValue.float(threshold),
            "status": dg.MetadataValue.json(counts),
        },
    )


RECONCILE_ASSETS = [reconciled_graph]
RECONCILE_CHECKS = [reconcile_completeness]
