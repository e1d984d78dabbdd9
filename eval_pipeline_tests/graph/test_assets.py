"""The Dagster layer over a real embedded server: materialize, checks pass, a leak goes red."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from eval_pipeline.assets.graph import (
    GRAPH_ASSETS,
    GRAPH_CHECKS,
    GRAPH_POOL,
    injected_graph,
    injected_graph_fingerprint,
    injected_graph_no_evidence,
)
from eval_pipeline.assets.resources import ProjectPaths
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.artifacts import seed_artifact
from eval_pipeline_tests.graph.conftest import write_fixtures


def _run(
    store: GraphStore, state: Path, instance: dg.DagsterInstance, selection=None
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*GRAPH_ASSETS, *GRAPH_CHECKS],
        selection=selection,
        resources={"graph": store, "paths": ProjectPaths(state_dir=str(state))},
        instance=instance,
        raise_on_error=False,
    )


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_definitions_shape() -> None:
    assert injected_graph.key == dg.AssetKey("injected_graph")
    assert dg.AssetKey("session_fixtures") in injected_graph.dependency_keys
    assert injected_graph.op.pool == GRAPH_POOL
    assert all(check.op.pool == GRAPH_POOL for check in GRAPH_CHECKS)


def test_materialize_then_checks(store: GraphStore, tmp_path: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    fixtures = write_fixtures(tmp_path / "fixtures.jsonl")
    seed_artifact(instance, tmp_path, "session_fixtures", files={"fixtures.jsonl": fixtures})
    result = _run(store, tmp_path, instance)
    assert result.success
    meta = result.asset_materializations_for_node("injected_graph")[0].metadata
    assert meta["sessions"].value == 24 and meta["turns"].value == 36
    assert meta["backend"].value == "arcadedb"
    assert str(meta["fingerprint"].value).startswith("sha256:")
    assert _checks(result) == {
        "injected_graph_counts": True,
        "injected_graph_no_evidence": True,
        "injected_graph_fingerprint": True,
    }

    # A leak planted afterwards turns the evidence check red; the fingerprint stays green.
    store.write("MATCH (t:Turn) WITH t LIMIT 1 SET t.has_answer = false")
    checks_only = dg.AssetSelection.checks(injected_graph_no_evidence, injected_graph_fingerprint)
    rerun = _run(store, tmp_path, instance, selection=checks_only)
    assert _checks(rerun) == {
        "injected_graph_no_evidence": False,
        "injected_graph_fingerprint": True,
    }
