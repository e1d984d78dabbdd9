"""The Dagster layer over a real embedded server: materialize, checks pass, a leak goes red."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.assets.graph import (
    GRAPH_ASSETS,
    GRAPH_CHECKS,
    GRAPH_POOL,
    injected_graph,
    injected_graph_fingerprint,
    injected_graph_no_evidence,
)
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.artifacts import ONE_BATCH, materialize, seed_output
from eval_pipeline_tests.conftest import HEAP, fresh_database
from eval_pipeline_tests.graph.conftest import write_fixtures


@pytest.fixture
def graph(graph_dir: Path) -> dict[str, str]:
    """The `graph` section of a run on a fresh database of the session's server."""
    return {"data_dir": str(graph_dir), "database": fresh_database("assets"), "heap": HEAP}


@pytest.fixture
def asset_store(graph: dict[str, str]) -> Iterator[GraphStore]:
    """A client of the database the run's graph resource uses."""
    store = GraphStore(**graph)
    yield store
    store.close()


def _run(
    graph: dict[str, str],
    state: Path,
    instance: dg.DagsterInstance,
    selection,
    partition: str | None = ONE_BATCH,
) -> dg.ExecuteInProcessResult:
    return materialize(
        selection,
        instance,
        partition=partition,
        raise_on_error=False,
        paths={"state_dir": str(state)},
        graph=graph,
    )


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_definitions_shape() -> None:
    assert injected_graph.key == dg.AssetKey("injected_graph")
    assert dg.AssetKey("session_fixtures") in injected_graph.dependency_keys
    assert injected_graph.op.pool == GRAPH_POOL
    assert all(check.op.pool == GRAPH_POOL for check in GRAPH_CHECKS)
    assert GRAPH_ASSETS == [injected_graph]


def test_materialize_then_checks(
    graph: dict[str, str], asset_store: GraphStore, tmp_path: Path
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    state = tmp_path / "state"
    fixtures = write_fixtures(tmp_path / "fixtures.jsonl")
    seed_output(state, "session_fixtures", files={"fixtures.jsonl": fixtures})
    result = _run(graph, state, instance, ["injected_graph"])
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
    asset_store.write("MATCH (t:Turn) WITH t LIMIT 1 SET t.has_answer = false")
    checks_only = dg.AssetSelection.checks(injected_graph_no_evidence, injected_graph_fingerprint)
    # Checks alone select no asset, so no partition: they read the run of one batch.
    rerun = _run(graph, state, instance, checks_only, partition=None)
    assert _checks(rerun) == {
        "injected_graph_no_evidence": False,
        "injected_graph_fingerprint": True,
    }
