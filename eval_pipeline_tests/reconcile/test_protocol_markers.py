"""Protocol check `protocol_writer_sees_no_marker`: no session handed to the memory writer
carries an evidence marker, and the memory formed holds none. Broken on purpose: a session
object carrying a marker (through the runner, as a custom session graph would hand it), and a
reconciler plug-in that writes one into a real ArcadeDB graph."""

from __future__ import annotations

from pydantic import ConfigDict

from eval_pipeline.graph.checks import evidence_markers
from eval_pipeline.reconcile import reconcile_pending
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.marker_audit import SessionAudit, marker_paths
from eval_pipeline.reconcile.models import SessionInput
from eval_pipeline.reconcile.session_graph import InMemorySessionGraph
from eval_pipeline.score import protocol

from .sessions import CAFE, RUNNING, session
from .test_reconcile_asset import PLUGINS, materialize_reconciled


class LeakySession(SessionInput):
    """A session object that kept the corpus's bookkeeping (a converter bug)."""

    model_config = ConfigDict(extra="allow", frozen=True)


def _audited(sessions) -> protocol.CheckStatus:
    audit = SessionAudit()
    report = reconcile_pending(
        InMemorySessionGraph(sessions), ExtractiveReconciler(), concurrency=2, audit=audit
    )
    assert report.done == len(sessions)
    return protocol.writer_marker_check(audit.sessions, audit.found, [])


def test_clean_sessions_pass_and_a_session_carrying_a_marker_fails():
    clean = [session("s01", CAFE), session("s02", RUNNING)]
    status = _audited(clean)
    assert status.status == "passed"
    assert status.detail.startswith("2 session(s) handed over without a marker")

    leaky = LeakySession(**clean[1].model_dump(), holds_evidence=["q1"])
    status = _audited([clean[0], leaky])
    assert status.status == "failed" and status.effect == "fails_run" and status.refuses
    assert "1 marker field(s) on sessions handed to the memory writer (s02: holds_evidence)" in (
        status.detail
    )


def test_markers_are_found_at_any_depth_in_any_spelling():
    memory = {"facts": [{"value": "x", "meta": {"hasAnswer": True}}], "answer-session-ids": []}
    assert marker_paths(memory) == ["facts[0].meta.hasAnswer", "answer-session-ids"]
    assert marker_paths({"evidence": "a plain word is no marker"}) == []


def test_a_reconciler_plugin_that_writes_a_marker_fails_the_check(injected_store):
    clean = materialize_reconciled(injected_store, {"reconciler": "extractive"})
    checks = {c.check_name: c for c in clean.get_asset_check_evaluations()}
    assert checks["protocol_writer_sees_no_marker"].passed is True

    where = {"data_dir": injected_store.data_dir, "database": injected_store.database}
    leaking = materialize_reconciled(
        injected_store,
        {"reconciler": f"{PLUGINS}:MarkerWritingReconciler", "options": where, "redo": True},
    )
    check = {c.check_name: c for c in leaking.get_asset_check_evaluations()}[
        "protocol_writer_sees_no_marker"
    ]
    assert check.passed is False
    assert "the memory formed holds node property is_answer_session" in (check.description or "")
    assert evidence_markers(injected_store) == ["node property is_answer_session"]
