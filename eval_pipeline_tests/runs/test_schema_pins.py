"""The ingest schema in the comparability pins: another injection schema is another haystack
(refused); another memory-system schema is the change being measured (shown, not refused)."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.reconcile.consolidating import ConsolidatingReconciler
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.protocol import pins_of
from eval_pipeline.runs.load import RunBundle
from eval_pipeline.runs.pins import CHANGE_PINS, differing_pins


def _run(name: str, *, graph_schema: int, reconciler: object) -> RunBundle:
    pins = {"graph": {"schema_version": graph_schema}, "reconciler": pins_of(reconciler)}
    return RunBundle(path=Path(name), manifest={"pins": pins}, rows=[], summary={})


def test_another_injection_schema_is_refused_by_name():
    base = _run("a", graph_schema=1, reconciler=ExtractiveReconciler())
    other = _run("b", graph_schema=2, reconciler=ExtractiveReconciler())
    assert [d.name for d in differing_pins(base, other)] == ["graph.schema_version"]


def test_another_memory_schema_is_a_change_not_a_refusal():
    base = _run("a", graph_schema=1, reconciler=ExtractiveReconciler())
    cand = _run("b", graph_schema=1, reconciler=ConsolidatingReconciler())
    assert differing_pins(base, cand) == []
    changed = {d.name: d for d in differing_pins(base, cand, CHANGE_PINS)}
    assert changed["memory.schema"].left["name"] == "eval_pipeline.session"
    assert changed["memory.schema"].right["name"] == "eval_pipeline.namespaced"
    assert changed["memory.schema"].right["version"] == "2"
