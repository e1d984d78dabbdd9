"""The Dagster layer: reconciled_graph materializes with its metadata, and the completeness
check warns below the threshold."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eval_pipeline.assets.reconcile import reconciled_graph
from eval_pipeline.graph.checks import read_graph_fingerprint
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.artifacts import ONE_BATCH, graph_section, materialize, seed_output

from .graph_fixtures import SESSION_IDS

PLUGINS = "eval_pipeline_tests.reconcile.plugins"


def materialize_reconciled(
    store: GraphStore, reconcile: dict[str, Any], instance: dg.DagsterInstance | None = None
) -> dg.ExecuteInProcessResult:
    """reconciled_graph alone (with its checks), configured by the `reconcile` section, over
    the injection of `store` (its injected_graph output seeded as if a run made it)."""
    instance = instance or dg.DagsterInstance.ephemeral()
    root = Path(tempfile.mkdtemp(prefix="reconcile-state-"))
    fingerprint = read_graph_fingerprint(store)["fingerprint"]
    seed_output(root, "injected_graph", facts={"fingerprint": fingerprint}, partition=ONE_BATCH)
    return materialize(
        ["reconciled_graph"],
        instance,
        partition=ONE_BATCH,
        raise_on_error=False,
        paths={"state_dir": str(root)},
        graph=graph_section(store),
        reconcile=reconcile,
    )


def test_the_asset_key_deps_and_pool_are_as_promised():
    spec = next(iter(reconciled_graph.specs))
    assert spec.key == dg.AssetKey("reconciled_graph")
    assert {d.asset_key for d in spec.deps} == {dg.AssetKey("injected_graph")}
    assert reconciled_graph.op.pool == "graph_instance"


def test_materialization_reports_failures_completeness_nodes_and_pins(injected_store):
    instance = dg.DagsterInstance.ephemeral()
    settings = {
        "reconciler": f"{PLUGINS}:FailingReconciler",
        "options": {"fail": ["s_cafe"], "summary_sentences": 2},
        "concurrency": 3,
        "completeness_threshold": 0.99,
    }
    result = materialize_reconciled(injected_store, settings, instance)
    assert result.success
    meta = result.asset_materializations_for_node("reconciled_graph")[0].metadata
    n = len(SESSION_IDS)
    assert meta["completeness"].value == pytest.approx((n - 1) / n, abs=1e-4)  # rounded
    assert meta["sessions_failed_this_run"].value == 1
    assert meta["sessions_done_this_run"].value == n - 1
    table = meta["failures"].value
    assert "| s_cafe |" in table and "on purpose" in table
    assert "\\|" in table  # the reason's own `|` is escaped, the table stays intact
    assert "| Chunk |" in meta["nodes"].value
    pins = meta["pins"].value
    assert pins["name"] == "failing" and pins["version"] == "1"
    assert pins["config"]["summary_sentences"] == 2 and pins["reconcile_schema_version"] == 2
    checks = result.get_asset_check_evaluations()
    assert sorted((c.check_name, c.passed, c.severity) for c in checks) == [
        ("memory_no_duplicate_entities", True, dg.AssetCheckSeverity.ERROR),
        ("memory_provenance_complete", True, dg.AssetCheckSeverity.ERROR),
        ("memory_supersession_complete", True, dg.AssetCheckSeverity.ERROR),
        ("protocol_writer_sees_no_marker", True, dg.AssetCheckSeverity.ERROR),
        ("reconcile_completeness", False, dg.AssetCheckSeverity.WARN),
        ("reconciled_graph_is_current", True, dg.AssetCheckSeverity.ERROR),
    ]
    completeness = next(c for c in checks if c.check_name == "reconcile_completeness")
    assert "only 5 of 6 sessions" in (completeness.description or "")
    logs = [e.user_message for e in instance.all_logs(result.run_id)]
    # The shared progress line (eval_pipeline.progress): count, rate and ETA, failures beside.
    done = [m for m in logs if m.startswith("reconciled_graph sessions: 6/6 (100%)")]
    assert done and "session/s" in done[-1] and "1 failed" in done[-1]

    # Materializing the same configuration again resumes: the failed session only; then
    # the check passes. (Which sessions fail on purpose is not part of the plug-in's pins.)
    same = {
        "reconciler": f"{PLUGINS}:FailingReconciler",
        "options": {"summary_sentences": 2},
        "completeness_threshold": 0.99,
    }
    again = materialize_reconciled(injected_store, same)
    meta = again.asset_materializations_for_node("reconciled_graph")[0].metadata
    assert meta["sessions_to_do"].value == 1 and meta["sessions_skipped_done"].value == n - 1
    assert meta["completeness"].value == 1.0
    assert {c.check_name: c.passed for c in again.get_asset_check_evaluations()} == {
        "reconcile_completeness": True,
        "reconciled_graph_is_current": True,
        "memory_no_duplicate_entities": True,
        "memory_supersession_complete": True,
        "memory_provenance_complete": True,
        "protocol_writer_sees_no_marker": True,
    }
    # Another reconciler never inherits those sessions: every one is redone.
    other = materialize_reconciled(injected_store, {"completeness_threshold": 0.99})
    meta = other.asset_materializations_for_node("reconciled_graph")[0].metadata
    assert meta["sessions_to_do"].value == n and meta["sessions_redone_other_pins"].value == n
    assert meta["pins"].value["name"] == "extractive"


def test_a_configuration_that_cannot_run_fails_the_step_with_the_reason(injected_store):
    result = materialize_reconciled(injected_store, {"reconciler": "llm"})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "needs a model" in str(failure.event_specific_data.error.message)
    bad = materialize_reconciled(injected_store, {"reconciler": "nope.module:Thing"})
    failure = next(e for e in bad.all_events if e.is_step_failure)
    assert "cannot import module 'nope.module'" in str(failure.event_specific_data.error.message)
