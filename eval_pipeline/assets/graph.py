"""Graph stage assets: session_fixtures → injected_graph, with its checks.

The graph lives in the graph server, so the asset returns a MaterializeResult (metadata only).
Every asset that touches the instance sits in pool "graph_instance" (limit 1 in dagster.yaml)
and holds the instance's lease (`graph_lease.py`): two chains never share it at once.
"""

from pathlib import Path

import dagster as dg

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.artifacts import (
    ARTIFACT_META,
    StageRecord,
    input_record,
    own_record,
    publish,
)
from eval_pipeline.assets.batches import QUESTION_BATCHES, batch_graph, batch_of
from eval_pipeline.assets.graph_lease import graph_check, graph_step
from eval_pipeline.assets.resources import ProjectPaths
from eval_pipeline.corpus.batches import write_batch_fixtures
from eval_pipeline.corpus.convert import FIXTURES_FILE
from eval_pipeline.graph import checks
from eval_pipeline.graph.inject import graph_counts, inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.ops.sensors import records_failures
from eval_pipeline.reconcile import schema as reconcile_schema

GRAPH_POOL = "graph_instance"
BATCH_FIXTURES_FILE = "batch_fixtures.jsonl"


@dg.asset(
    key="injected_graph",
    deps=[dg.AssetKey("session_fixtures")],
    partitions_def=QUESTION_BATCHES,
    pool=GRAPH_POOL,
    group_name=GROUP,
    kinds={"python"},
    description="The session fixtures loaded into a wiped, claimed graph instance.",
)
@records_failures
def injected_graph(
    context: dg.AssetExecutionContext, graph: GraphStore, paths: ProjectPaths
) -> dg.MaterializeResult:
    fixtures = input_record(context, "session_fixtures")
    batch = batch_of(context)
    graph = graph.for_batch(batch)
    with publish(
        paths.root(), "injected_graph", context.run.run_id, {"session_fixtures": fixtures}
    ) as pub:
        injected = to_read = fixtures.file(FIXTURES_FILE)
        if batch.batches > 1:
            # This batch's sessions only, kept with the artifact: the checks compare the
            # graph with exactly what was injected into it.
            to_read = pub.stage / BATCH_FIXTURES_FILE
            write_batch_fixtures(injected, to_read, batch)
            injected = pub.final / BATCH_FIXTURES_FILE
        with graph_step(context, graph, "injected_graph"):
            report = inject_fixtures(graph, to_read)
        context.log.info(
            f"injected {report.counts.sessions} sessions, {report.counts.turns} turns "
            f"({batch.key}) into {report.backend} at {report.uri} in "
            f"{report.timings_s['total']:.1f} s"
        )
        pub.facts.update(
            batch=batch.model_dump(),
            fixtures_file=str(injected),
            fingerprint=report.fingerprint,
            schema_version=report.schema_version,
            backend=report.backend,
            server_version=report.server_version,
            counts=report.counts.model_dump(),
            seconds=report.timings_s.get("total"),
        )
    return dg.MaterializeResult(
        metadata={
            **{k: dg.MetadataValue.int(v) for k, v in report.counts.model_dump().items()},
            "nodes": dg.MetadataValue.int(report.nodes),
            "relationships": dg.MetadataValue.int(report.relationships),
            "fingerprint": dg.MetadataValue.text(report.fingerprint),
            "schema_version": dg.MetadataValue.int(report.schema_version),
            "backend": dg.MetadataValue.text(report.backend),
            "server_version": dg.MetadataValue.text(report.server_version),
            "graph_uri": dg.MetadataValue.text(report.uri),
            "batch": dg.MetadataValue.text(batch.key),
            "fixtures": dg.MetadataValue.path(str(injected)),
            "batches": dg.MetadataValue.int(report.batches),
            "turns_per_s": dg.MetadataValue.float(round(report.turns_per_s, 1)),
            "timings_s": dg.MetadataValue.json(report.timings_s),
            ARTIFACT_META: dg.MetadataValue.path(str(pub.final)),
        }
    )


def _checked_fixtures(context: dg.AssetCheckExecutionContext):
    """The fixtures file the checked injected_graph materialization injected (its batch's)."""
    return injected_fixtures(own_record(context, "injected_graph"))


def injected_fixtures(record: StageRecord) -> Path:
    """The fixtures file an injected_graph record injected: its batch's, or all of them."""
    if record.facts.get("fixtures_file"):
        return Path(record.facts["fixtures_file"])
    return record.inputs["session_fixtures"].file(FIXTURES_FILE)


@dg.asset_check(
    asset=injected_graph,
    blocking=True,
    pool=GRAPH_POOL,
    description="Node and relationship counts equal what the fixtures imply.",
)
def injected_graph_counts(
    context: dg.AssetCheckExecutionContext, graph: GraphStore
) -> dg.AssetCheckResult:
    # The check may run again after reconciliation: the reconciler's documented labels and
    # relationship types are expected then, anything else is still stray.
    fixtures = _checked_fixtures(context)
    graph = batch_graph(context, graph)
    graph_check(context, graph)
    problems, expected = checks.counts_report(
        graph,
        fixtures,
        extra_labels=reconcile_schema.NODE_LABELS,
        extra_types=reconcile_schema.RELATIONSHIP_TYPES,
    )
    actual, _ = graph_counts(graph)
    return dg.AssetCheckResult(
        passed=not problems,
        description=None if not problems else "; ".join(problems),
        metadata={
            "expected": dg.MetadataValue.json(expected),
            "actual": dg.MetadataValue.json(actual.model_dump()),
            "problems": dg.MetadataValue.json(problems),
        },
    )


@dg.asset_check(
    asset=injected_graph,
    blocking=True,
    pool=GRAPH_POOL,
    description="No evidence label or property (has_answer, holds_evidence, answer session "
    "ids) anywhere in the graph.",
)
def injected_graph_no_evidence(
    context: dg.AssetCheckExecutionContext, graph: GraphStore
) -> dg.AssetCheckResult:
    graph = batch_graph(context, graph)
    graph_check(context, graph)
    found = checks.evidence_markers(graph)
    return dg.AssetCheckResult(
        passed=not found,
        metadata={"evidence_markers": dg.MetadataValue.json(found)},
    )


@dg.asset_check(
    asset=injected_graph,
    blocking=True,
    pool=GRAPH_POOL,
    description="The graph was built from the current fixtures (fingerprint).",
)
def injected_graph_fingerprint(
    context: dg.AssetCheckExecutionContext, graph: GraphStore
) -> dg.AssetCheckResult:
    fixtures = _checked_fixtures(context)
    graph = batch_graph(context, graph)
    graph_check(context, graph)
    matches, details = checks.fingerprint_report(graph, fixtures)
    return dg.AssetCheckResult(
        passed=matches,
        metadata={k: dg.MetadataValue.text(str(v)) for k, v in details.items()},
    )


GRAPH_ASSETS = [injected_graph]
GRAPH_CHECKS = [injected_graph_counts, injected_graph_no_evidence, injected_graph_fingerprint]
