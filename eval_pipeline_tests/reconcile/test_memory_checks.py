"""Memory-formation checks against a real graph: they pass on what `consolidating` wrote, and
each fails, naming the node, when its guarantee is broken on purpose."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile import memory_checks
from eval_pipeline.reconcile.registry import load_reconciler
from eval_pipeline.reconcile.runner import reconcile_pending

from .namespace_fixtures import write_namespace_fixtures
from .test_reconcile_asset import materialize_reconciled

_databases = itertools.count()
CHECKS = (
    memory_checks.duplicate_entities,
    memory_checks.supersession_complete,
    memory_checks.provenance_complete,
)


@pytest.fixture
def consolidated(graph_dir: Path, tmp_path: Path) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=f"mc{next(_databases)}", heap="512m")
    inject_fixtures(store, write_namespace_fixtures(tmp_path / "fixtures.jsonl"))
    reconcile_pending(store, load_reconciler("consolidating"), concurrency=2)
    yield store
    store.close()


def _write(store: GraphStore, statement: str, params: dict | None = None) -> None:
    store.write_transaction([(statement, params or {})])


def _superseded(store: GraphStore) -> dict:
    return store.read(
        "MATCH (f:Fact)-[:SUPERSEDED_BY]->(g:Fact) RETURN f.fact_id AS old, g.fact_id AS new "
        "ORDER BY old LIMIT 1"
    )[0]


def test_every_check_passes_on_consolidated_memory(consolidated: GraphStore):
    for check in CHECKS:
        outcome = check(consolidated)
        assert outcome.problems == [], check.__name__
    assert memory_checks.supersession_complete(consolidated).counts["superseded"] >= 2
    counts = memory_checks.provenance_complete(consolidated).counts
    assert counts["Fact"] > 0 and counts["Fact_without_provenance"] == 0


def test_a_duplicate_entity_in_a_namespace_fails(consolidated: GraphStore):
    _write(
        consolidated,
        "CREATE (:Entity {key: 'user:qa|person:ana lopez (2)', local_key: 'person:ana lopez (2)', "
        "namespace: 'user:qa', type: 'person', norm: 'ana lopez', aliases: ['x:y']})",
    )
    (problem,) = memory_checks.duplicate_entities(consolidated).problems
    assert "2 entities of type person named 'ana lopez' in namespace 'user:qa'" in problem
    # The same name in another namespace is another user's entity: no problem.
    _write(consolidated, "MATCH (e:Entity {key: 'user:qa|person:ana lopez (2)'}) DETACH DELETE e")
    _write(
        consolidated,
        "CREATE (:Entity {key: 'user:qb|person:ana lopez', local_key: 'person:ana lopez', "
        "namespace: 'user:qb', type: 'person', norm: 'ana lopez', aliases: ['x:y']})",
    )
    assert memory_checks.duplicate_entities(consolidated).problems == []


def test_an_alias_that_is_also_an_entity_fails(consolidated: GraphStore):
    _write(
        consolidated,
        "CREATE (:Entity {key: 'user:qa|person:ana', local_key: 'person:ana', "
        "namespace: 'user:qa', type: 'person', norm: 'ana', aliases: ['x:y']})",
    )
    (problem,) = memory_checks.duplicate_entities(consolidated).problems
    assert "'user:qa|person:ana lopez' has alias 'user:qa|person:ana'" in problem


def test_a_superseded_fact_without_its_successor_edge_fails(consolidated: GraphStore):
    pair = _superseded(consolidated)
    _write(
        consolidated,
        "MATCH (f:Fact {fact_id: $id})-[r:SUPERSEDED_BY]->() DELETE r",
        {"id": pair["old"]},
    )
    (problem,) = memory_checks.supersession_complete(consolidated).problems
    assert f"fact {pair['old']!r} is superseded by {pair['new']!r}" in problem


def test_a_superseded_fact_without_invalid_at_fails(consolidated: GraphStore):
    pair = _superseded(consolidated)
    _write(
        consolidated, "MATCH (f:Fact {fact_id: $id}) SET f.invalid_at = null", {"id": pair["old"]}
    )
    (problem,) = memory_checks.supersession_complete(consolidated).problems
    assert "has no invalid_at" in problem


def test_a_successor_edge_without_the_property_fails(consolidated: GraphStore):
    pair = _superseded(consolidated)
    _write(
        consolidated,
        "MATCH (f:Fact {fact_id: $id}) SET f.superseded_by = null",
        {"id": pair["old"]},
    )
    (problem,) = memory_checks.supersession_complete(consolidated).problems
    assert "has a SUPERSEDED_BY edge" in problem and pair["old"] in problem


def test_a_fact_without_provenance_fails(consolidated: GraphStore):
    fact = consolidated.read("MATCH (f:Fact) RETURN f.fact_id AS id ORDER BY id LIMIT 1")[0]["id"]
    _write(consolidated, "MATCH (f:Fact {fact_id: $id})-[r:FROM_TURN]->() DELETE r", {"id": fact})
    (problem,) = memory_checks.provenance_complete(consolidated).problems
    assert problem.startswith("1 Fact node(s) lead to no turn") and fact in problem


def test_a_fact_citing_another_sessions_turn_fails(consolidated: GraphStore):
    fact = consolidated.read(
        "MATCH (f:Fact {session_id: 'b_leeds'}) RETURN f.fact_id AS id LIMIT 1"
    )[0]["id"]
    _write(
        consolidated,
        "MATCH (f:Fact {fact_id: $id}), (t:Turn {turn_id: 'a_moved#0'}) "
        "CREATE (f)-[:FROM_TURN]->(t)",
        {"id": fact},
    )
    (problem,) = memory_checks.provenance_complete(consolidated).problems
    assert f"Fact {fact!r} cites turn 'a_moved#0' of another session" in problem


def test_the_asset_checks_report_a_broken_graph(consolidated: GraphStore):
    settings = {"reconciler": "consolidating"}
    ok = materialize_reconciled(consolidated, settings)
    assert ok.success
    passed = {c.check_name: c.passed for c in ok.get_asset_check_evaluations()}
    assert passed["memory_no_duplicate_entities"] is True
    assert passed["memory_supersession_complete"] is True
    assert passed["memory_provenance_complete"] is True
    meta = ok.asset_materializations_for_node("reconciled_graph")[0].metadata
    assert meta["namespaces"].value["skipped_current"] == 3

    pair = _superseded(consolidated)
    _write(
        consolidated,
        "MATCH (f:Fact {fact_id: $id})-[r:SUPERSEDED_BY]->() DELETE r",
        {"id": pair["old"]},
    )
    broken = materialize_reconciled(consolidated, settings)
    checks = {c.check_name: c for c in broken.get_asset_check_evaluations()}
    assert checks["memory_supersession_complete"].passed is False
    assert checks["memory_supersession_complete"].severity == dg.AssetCheckSeverity.ERROR
    assert pair["old"] in (checks["memory_supersession_complete"].description or "")
    assert checks["memory_provenance_complete"].passed is True
