"""Graph stage asset: session_fixtures → injected_graph, with the checks that read the graph.

The graph lives in the graph server; the asset's output records what was injected where.
Every asset that touches the instance sits in pool "graph_instance" and holds the instance's
lease (`graph_lease.py`): two chains never share it at once.
"""

from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.batches import QUESTION_BATCHES, batch_of
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.graph_lease import GRAPH_POOL, graph_check, graph_step
from eval_pipeline.assets.handoff import StageOutput, publish
from eval_pipeline.assets.resources import GraphResource, PathsResource
from eval_pipeline.corpus.batches import write_batch_fixtures
from eval_pipeline.corpus.convert import FIXTURES_FILE
from eval_pipeline.graph import checks
from eval_pipeline.graph.inject import graph_counts, inject_fixtures
from eval_pipeline.reconcile import schema as reconcile_schema

BATCH_FIXTURES_FILE = "batch_fixtures.jsonl"


@dg.asset(
    group_name=GROUP,
    partitions_def=QUESTION_BATCHES,
    pool=GRAPH_POOL,
    kinds={"python"},
    description="The session fixtures loaded into a wiped, claimed graph instance.",
)
@records_failures
def injected_graph(
    context: dg.AssetExecutionContext,
    graph: GraphResource,
    paths: PathsResource,
    session_fixtures: StageOutput,
) -> dg.Output:
    batch = batch_of(context)
    store = graph.store(batch)
    with publish(context, paths.root(), {"session_fixtures": session_fixtures}) as pub:
        injected = to_read = session_fixtures.file(FIXTURES_FILE)
        if batch.batches > 1:
            # This batch's sessions only, kept with the artifact: the checks compare the
            # graph with exactly what was injected into it.
            to_read = pub.stage / BATCH_FIXTURES_FILE
            write_batch_fixtures(injected, to_read, batch)
            injected = pub.final / BATCH_FIXTURES_FILE
        with graph_step(context, store, "injected_graph"):
            report = inject_fixtures(store, to_read)
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
            options={"graph": graph.model_dump()},
        )
    return dg.Output(
        pub.output,
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
            "artifact_dir": dg.MetadataValue.path(str(pub.final)),
        },
    )


def injected_fixtures(output: StageOutput) -> Path:
    """The fixtures file an injected_graph output injected: its batch's, or all of them."""
    if output.facts.get("fixtures_file"):
        return Path(output.facts["fixtures_file"])
    return output.inputs["session_fixtures"].file(FIXTURES_FILE)


def checked_store(context: Any, graph: GraphResource):
    """The instance a check reads: its batch's, refused while another chain holds it."""
    store = graph.store(batch_of(context))
    graph_check(context, store)
    return store


@dg.asset_check(
    asset=injected_graph,
    blocking=True,
    pool=GRAPH_POOL,
    description="Node and relationship counts equal what the fixtures imply.",
)
def injected_graph_counts(
    context: dg.AssetCheckExecutionContext, graph: GraphResource, injected_graph: StageOutput
) -> dg.AssetCheckResult:
    # The check may run again after reconciliation: the reconciler's documented labels and
    # relationship types are expected then, anything else is still stray.
    store = checked_store(context, graph)
    problems, expected = checks.counts_report(
        store,
        injected_fixtures(injected_graph),
        extra_labels=reconcile_schema.NODE_LABELS,
        extra_types=reconcile_schema.RELATIONSHIP_TYPES,
    )
    actual, _ = graph_counts(store)
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
    context: dg.AssetCheckExecutionContext, graph: GraphResource
) -> dg.AssetCheckResult:
    found = checks.evidence_markers(checked_store(context, graph))
    return dg.AssetCheckResult(
        passed=not found, metadata={"evidence_markers": dg.MetadataValue.json(found)}
    )


@dg.asset_check(
    asset=injected_graph,
    blocking=True,
    pool=GRAPH_POOL,
    description="The graph was built from the current fixtures (fingerprint).",
)
def injected_graph_fingerprint(
    context: dg.AssetCheckExecutionContext, graph: GraphResource, injected_graph: StageOutput
) -> dg.AssetCheckResult:
    store = checked_store(context, graph)
    matches, details = checks.fingerprint_report(store, injected_fixtures(injected_graph))
    return dg.AssetCheckResult(
        passed=matches,
        metadata={k: dg.MetadataValue.text(str(v)) for k, v in details.items()},
    )


GRAPH_ASSETS = [injected_graph]
GRAPH_CHECKS = [injected_graph_counts, injected_graph_no_evidence, injected_graph_fingerprint]
