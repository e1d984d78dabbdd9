"""The graph stage's guarantees as plain functions; the Dagster checks only report them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eval_pipeline.graph import schema
from eval_pipeline.graph.fingerprint import fixtures_fingerprint
from eval_pipeline.graph.inject import count_problems, expected_counts, iter_session_rows
from eval_pipeline.graph.inject import read_graph_fingerprint as read_graph_fingerprint
from eval_pipeline.graph.store import GraphStore


def evidence_markers(store: GraphStore) -> list[str]:
    """Every label, relationship type or property key that names answer evidence.

    Scans the whole graph, not just the labels injection writes: a leak can come from any
    writer. Empty means clean.
    """
    found = [
        f"label {name}"
        for name in store.dialect.labels(store)
        if schema.is_evidence_name(name, label=True)
    ]
    found += [
        f"relationship type {name}"
        for name in store.dialect.relationship_types(store)
        if schema.is_evidence_name(name)
    ]
    keys = store.dialect.property_keys(store)
    found += [f"node property {k}" for k in keys["nodes"] if schema.is_evidence_name(k)]
    found += [
        f"relationship property {k}" for k in keys["relationships"] if schema.is_evidence_name(k)
    ]
    return found


def counts_report(
    store: GraphStore,
    fixtures_path: str | Path,
    *,
    extra_labels: Iterable[str] = (),
    extra_types: Iterable[str] = (),
) -> tuple[list[str], dict[str, Any]]:
    """(problems, expected counts) of the graph against the fixtures file."""
    expected = expected_counts(iter_session_rows(fixtures_path))
    problems = count_problems(expected, store, extra_labels=extra_labels, extra_types=extra_types)
    return problems, expected.model_dump()


def fingerprint_report(store: GraphStore, fixtures_path: str | Path) -> tuple[bool, dict[str, Any]]:
    """(matches, details): is the graph the one built from the current fixtures?"""
    current = fixtures_fingerprint(iter_session_rows(fixtures_path))
    record = read_graph_fingerprint(store)
    graph_fp = record["fingerprint"] if record else None
    return graph_fp == current, {
        "fixtures_fingerprint": current,
        "graph_fingerprint": graph_fp or "(none: injection never completed)",
        "injected_at": (record or {}).get("injected_at") or "",
    }


def graph_holds(store: GraphStore, fingerprint: str) -> tuple[bool, str]:
    """(current, why): does the graph hold the injection whose fixtures fingerprint is
    `fingerprint`? A stage that consumed one injection must not read a graph another one
    replaced since (or one whose injection never completed)."""
    record = read_graph_fingerprint(store)
    if record is None:
        return False, (
            f"{store.where} holds no completed injection: materialize injected_graph first"
        )
    if record["fingerprint"] != fingerprint:
        return False, (
            f"{store.where} holds other fixtures ({record['fingerprint']}, injected "
            f"{record.get('injected_at')}) than the ones this run uses ({fingerprint}): "
            "materialize session_fixtures and injected_graph again"
        )
    return True, f"the graph holds fixtures {fingerprint}"
