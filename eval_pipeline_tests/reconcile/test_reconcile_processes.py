"""A CPU-bound reconciler in worker processes (issue 29), on the real ArcadeDB: the same graph
as in the run's own process, a failing session fails alone, a worker killed stops the run
with a clear error and a re-run resumes."""

from __future__ import annotations

import pytest

from eval_pipeline.reconcile import (
    ReconcileError,
    ReconcilerUnavailable,
    reconcile_pending,
    schema,
)
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.marker_audit import SessionAudit
from eval_pipeline.reconcile.processes import ReconcileWorkerDied, resolve_processes
from eval_pipeline.reconcile.reader import read_statuses

from .graph_fixtures import SESSION_IDS
from .plugins import (
    EchoReconciler,
    FailingReconciler,
    KilledOnSessionReconciler,
    UnavailableReconciler,
)
from .test_batched_writes import dump, fresh


def test_processes_resolve_per_reconciler():
    assert resolve_processes(ExtractiveReconciler(), 1) == 1
    assert resolve_processes(ExtractiveReconciler(), 3) == 3
    assert resolve_processes(ExtractiveReconciler(), None) >= 1  # one per core
    assert resolve_processes(EchoReconciler(), 4) == 1  # async: stays in the run's process
    with pytest.raises(ValueError, match="processes must be at least 1"):
        resolve_processes(ExtractiveReconciler(), 0)


def test_two_processes_make_the_same_memory_as_one(graph_dir, reconcile_fixtures_file):
    one = fresh(graph_dir, reconcile_fixtures_file, "processes_one")
    two = fresh(graph_dir, reconcile_fixtures_file, "processes_two")
    audit = SessionAudit()
    try:
        r1 = reconcile_pending(one, ExtractiveReconciler(), concurrency=2, processes=1)
        r2 = reconcile_pending(two, ExtractiveReconciler(), concurrency=2, processes=2, audit=audit)
        assert (r1.processes, r2.processes) == (1, 2)
        assert "worker_start_s" in r2.timings and "worker_start_s" not in r1.timings
        assert r1.done == r2.done == len(SESSION_IDS) and not r1.failures and not r2.failures
        assert audit.sessions == len(SESSION_IDS), "the driver audits what it hands the pool"
        assert r1.nodes_written == r2.nodes_written and r1.pins_key == r2.pins_key
        a, b = dump(one), dump(two)
        assert a["chunks"] and a["entities"] and a["episodes"]
        assert a == b
        again = reconcile_pending(two, ExtractiveReconciler(), concurrency=2, processes=2)
        assert again.to_do == 0 and again.skipped_done == len(SESSION_IDS)
    finally:
        one.close()
        two.close()


def test_a_session_failing_in_a_worker_fails_alone(injected_store, monkeypatch):
    # Batches of three: the failing session has batch-mates in its worker.
    monkeypatch.setattr("eval_pipeline.reconcile.runner.BATCHES_PER_WORKER", 1)
    bad = SESSION_IDS[1]
    report = reconcile_pending(
        injected_store, FailingReconciler(fail=[bad]), concurrency=1, processes=2
    )
    assert [f.session_id for f in report.failures] == [bad]
    assert report.failures[0].reason == f"RuntimeError: cannot make sense of {bad} | on purpose"
    assert report.done == len(SESSION_IDS) - 1
    statuses = read_statuses(injected_store)
    assert statuses[bad] == schema.FAILED
    assert all(statuses[s] == schema.DONE for s in SESSION_IDS if s != bad)


def test_a_reconciler_unavailable_in_a_worker_stops_the_run(injected_store):
    with pytest.raises(ReconcilerUnavailable, match="not configured"):
        reconcile_pending(injected_store, UnavailableReconciler(), concurrency=1, processes=2)
    statuses = read_statuses(injected_store)
    assert set(statuses.values()) == {schema.PENDING}, "no session is marked failed for it"


def test_a_killed_worker_stops_the_run_clearly_and_a_rerun_resumes(injected_store, monkeypatch):
    monkeypatch.setattr("eval_pipeline.reconcile.runner.BATCHES_PER_WORKER", 1)
    victim = SESSION_IDS[-1]  # in the last batch: the batches before it are written
    with pytest.raises(ReconcileWorkerDied, match="reconciler worker process died") as caught:
        reconcile_pending(
            injected_store, KilledOnSessionReconciler(kill=victim), concurrency=1, processes=2
        )
    assert "re-run to resume" in str(caught.value)
    assert any(repr(s) in str(caught.value) for s in SESSION_IDS), "names a batch in flight"
    statuses = read_statuses(injected_store)
    assert statuses[victim] == schema.PENDING, "nothing is passed off as done"
    assert schema.FAILED not in statuses.values(), "infrastructure, not a session's failure"
    done_before = sum(1 for s in statuses.values() if s == schema.DONE)
    # Same pins (`kill` is not configuration): a re-run picks up where the run stopped.
    rerun = reconcile_pending(
        injected_store, KilledOnSessionReconciler(), concurrency=1, processes=2
    )
    assert rerun.skipped_done == done_before and rerun.done == len(SESSION_IDS) - done_before
    assert rerun.status_after[schema.DONE] == len(SESSION_IDS) and rerun.completeness == 1.0


def test_a_cpu_bound_reconciler_that_does_not_pickle_is_refused_first(injected_store):
    class Local(ExtractiveReconciler):  # a class defined in a function does not pickle
        name = "local"

    with pytest.raises(ReconcileError, match="does not pickle.*reconcile.processes to 1"):
        reconcile_pending(injected_store, Local(), concurrency=1, processes=2)
    assert set(read_statuses(injected_store).values()) == {schema.PENDING}
    assert reconcile_pending(injected_store, Local(), concurrency=1, processes=1).done == len(
        SESSION_IDS
    )
