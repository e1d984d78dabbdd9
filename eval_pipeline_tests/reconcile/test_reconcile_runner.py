"""The runner's own rules, on an in-memory session graph (no server needed)."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.reconcile import ReconcilerUnavailable, load_reconciler, reconcile_pending
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.reconcile.session_graph import InMemorySessionGraph

from .sessions import CAFE, RUNNING, TRIP, session


def graph(n: int = 12) -> InMemorySessionGraph:
    turns = [TRIP, RUNNING, CAFE]
    return InMemorySessionGraph(session(f"s{i:02d}", turns[i % 3]) for i in range(n))


class SlowCounting:
    """Async reconciler that records how many sessions are in flight at once."""

    name = "counting"
    version = "1"

    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0

    async def reconcile(self, s: SessionInput) -> SessionMemory:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        return SessionMemory(session_id=s.session_id, reconciler=self.name)


def test_sessions_run_in_parallel_up_to_the_limit_and_no_further():
    reconciler = SlowCounting()
    report = reconcile_pending(graph(20), reconciler, concurrency=5)
    assert report.done == 20 and reconciler.max_in_flight == 5


def test_failures_are_recorded_and_the_batch_continues():
    g = graph()
    failing = load_reconciler(
        "eval_pipeline_tests.reconcile.plugins:FailingReconciler", {"fail": ["s03", "s07"]}
    )
    report = reconcile_pending(g, failing, concurrency=3)
    assert [f.session_id for f in report.failures] == ["s03", "s07"]
    assert report.status_after == {"pending": 0, "done": 10, "failed": 2}
    assert report.completeness == pytest.approx(10 / 12)
    assert g.errors["s03"].startswith("RuntimeError: cannot make sense of s03")
    assert report.nodes_written["Episode"] == 10


def test_rerun_retries_failed_sessions_only_and_redo_does_everything():
    g = graph()
    failing = load_reconciler(
        "eval_pipeline_tests.reconcile.plugins:FailingReconciler", {"fail": ["s05"]}
    )
    reconcile_pending(g, failing, concurrency=2)
    # The same configuration again (which sessions fail is not part of its pins): resume.
    healed = load_reconciler("eval_pipeline_tests.reconcile.plugins:FailingReconciler", {})
    again = reconcile_pending(g, healed, concurrency=2)
    assert (again.to_do, again.done, again.skipped_done) == (1, 1, 11)
    redo = reconcile_pending(g, healed, concurrency=2, redo=True)
    assert (redo.to_do, redo.done, redo.skipped_done) == (12, 12, 0)


def test_memory_made_under_other_pins_is_redone_never_kept():
    """Another reconciler, version or config must not inherit sessions another one did."""
    g = graph()
    first = reconcile_pending(g, ExtractiveReconciler(), concurrency=2)
    assert (first.to_do, first.done) == (12, 12)
    other = reconcile_pending(g, ExtractiveReconciler(max_chunk_chars=200), concurrency=2)
    assert (other.to_do, other.done, other.skipped_done, other.redone_foreign) == (12, 12, 0, 12)
    assert other.pins_key != first.pins_key
    assert {state.pins_key for state in g.states().values()} == {other.pins_key}
    assert g.configurations[other.pins_key]["config"]["max_chunk_chars"] == 200
    # A repeat's sample identity is part of the pins too: a repeat reconciles afresh.
    sampled = reconcile_pending(
        g, ExtractiveReconciler(max_chunk_chars=200), concurrency=2, extra_pins={"s": "x/2"}
    )
    assert sampled.redone_foreign == 12 and sampled.reconciler["s"] == "x/2"


def test_a_reconciler_that_cannot_run_stops_the_run_with_its_reason():
    class Unavailable(SlowCounting):
        async def reconcile(self, s: SessionInput) -> SessionMemory:
            raise ReconcilerUnavailable("no model configured")

    with pytest.raises(ReconcilerUnavailable, match="no model configured"):
        reconcile_pending(graph(), Unavailable(), concurrency=2)


def test_a_result_that_is_not_a_session_memory_fails_that_session():
    class Wrong(SlowCounting):
        def reconcile(self, s: SessionInput) -> dict:  # type: ignore[override]
            return {"session_id": s.session_id}

    report = reconcile_pending(graph(3), Wrong(), concurrency=2)
    assert all("expected SessionMemory" in f.reason for f in report.failures)


def test_the_blocking_form_works_inside_a_running_event_loop():
    async def inside() -> int:
        return reconcile_pending(graph(4), ExtractiveReconciler(), concurrency=2).done

    assert asyncio.run(inside()) == 4
