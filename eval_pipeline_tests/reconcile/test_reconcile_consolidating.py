"""The `consolidating` reconciler: statements found by rules, consolidation per namespace in
time order (supersession, alias dedupe), and its memory in a real embedded ArcadeDB, down to
retrieval ranking the current fact before the superseded one."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile.consolidating import ConsolidatingReconciler
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.fact_rules import stated_facts
from eval_pipeline.reconcile.namespace import (
    ChangeError,
    ChangeSet,
    NamespaceView,
    SupersedeFact,
    namespace_of,
)
from eval_pipeline.reconcile.reader import load_sessions
from eval_pipeline.reconcile.registry import load_reconciler
from eval_pipeline.reconcile.runner import reconcile_pending
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace

from .namespace_fixtures import write_namespace_fixtures
from .sessions import session

_databases = itertools.count()


@pytest.fixture
def ns_store(graph_dir: Path, tmp_path: Path) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=f"ns{next(_databases)}", heap="512m")
    inject_fixtures(store, write_namespace_fixtures(tmp_path / "fixtures.jsonl"))
    yield store
    store.close()


# ---- rules and consolidation, no graph -------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "slot", "value"),
    [
        (
            "My sister lives in Leeds.",
            "My sister just moved to Zürich for a new job!",
            ("user's sister", "lives in"),
            "Zürich",
        ),
        (
            "I'm aiming for a pace of 5:45 per km.",
            "My target pace is now 5:30 per km.",
            ("user", "pace"),
            "5:30 per km",
        ),
        (
            "I started training for pull-ups. Right now I can do 4 in a row.",
            "I can now do 9 pull-ups in a row with good form.",
            ("user", "can do"),
            "9",
        ),
        (
            "I just joined the payments team at work.",
            "I've officially moved to the data platform team.",
            ("user", "team"),
            "data platform",
        ),
    ],
)
def test_a_knowledge_update_states_a_new_value_for_the_same_slot(old, new, slot, value):
    (before,) = stated_facts("s1#0", "user", old)
    (after,) = stated_facts("s2#0", "user", new)
    assert before.slot == after.slot == slot
    assert before.same_slot(after) and after.value == value and before.value != value
    assert after.text.startswith("The user")  # rewritten, not the turn's words


def test_assistant_turns_state_no_facts():
    assert stated_facts("s#1", "assistant", "My sister lives in Leeds.") == []


def _consolidate(reconciler, view, *sessions):
    for s in sessions:
        view.apply(reconciler.consolidate(view, reconciler.extract(s)))
    return view


def test_consolidation_supersedes_and_keeps_the_old_fact_as_history():
    r = ConsolidatingReconciler()
    old = session("old", [("user", "My sister lives in Leeds.")], started_at="2023-02-20T19:00:00")
    new = session("new", [("user", "My sister moved to Zürich!")], started_at="2023-05-08T22:30:00")
    view = _consolidate(r, NamespaceView("user:q"), old, new)
    facts = {f.session_id: f for f in view.facts.values()}
    assert facts["old"].superseded_by == facts["new"].fact_id
    assert facts["old"].invalid_at == "2023-05-08T22:30:00" == facts["new"].valid_at
    assert facts["new"].current and not facts["old"].current
    assert [f.fact_id for f in view.history(facts["new"].fact_id)] == [
        facts["new"].fact_id,
        facts["old"].fact_id,
    ]
    # A restatement of the current value changes nothing.
    again = session(
        "again", [("user", "My sister lives in Zürich.")], started_at="2023-06-01T00:00:00"
    )
    _consolidate(r, view, again)
    assert len(view.facts) == 2 and view.sessions == ["old", "new", "again"]


def test_aliases_join_one_entity_per_namespace():
    r = ConsolidatingReconciler()
    first = session("s1", [("user", "My friend Ana Lopez called about Lisbon.")])
    second = session("s2", [("user", "Ana said the Lisbon flat is booked.")])
    view = _consolidate(r, NamespaceView("user:q"), first, second)
    people = [e for e in view.entities.values() if e.type == "person"]
    assert [e.key for e in people] == ["person:ana lopez"]
    assert "person:ana" in people[0].aliases
    assert view.resolve("person:ana") == "person:ana lopez"


def test_a_change_that_does_not_apply_is_refused():
    view = NamespaceView("user:q")
    bad = ChangeSet(
        namespace="user:q",
        session_id="s",
        changes=(SupersedeFact(fact_id="nope", by="also-nope", invalid_at=None),),
    )
    with pytest.raises(ChangeError, match="not in the namespace"):
        view.apply(bad)
    with pytest.raises(ChangeError, match="namespace"):
        view.apply(ChangeSet(namespace="user:other", session_id="s"))


def test_namespaces_are_one_per_user_and_one_for_the_organisation():
    assert namespace_of("e8b3f5d2") == "user:e8b3f5d2"
    assert namespace_of("t2-inc-q1") == namespace_of("t2-pref-q3") == "org:acme"


def test_extraction_is_shared_and_the_same_for_every_namespace():
    r = ConsolidatingReconciler()
    s = session("shared", [("user", "I just joined the payments team.")])
    assert r.extract(s) is r.extract(
        session("shared", [("user", "I just joined the payments team.")])
    )
    assert r.extractions == 1
    assert r.reconcile(s).entities == ()  # entities are the namespaces' own


# ---- in the graph -----------------------------------------------------------------------


def _facts(store: GraphStore) -> list[dict]:
    return store.read(
        "MATCH (f:Fact) RETURN f.fact_id AS id, f.namespace AS ns, f.session_id AS session, "
        "f.value AS value, f.invalid_at AS invalid_at, f.superseded_by AS superseded_by "
        "ORDER BY id"
    )


def test_time_order_supersession_and_separate_memory_per_namespace(ns_store: GraphStore):
    reconciler = load_reconciler("consolidating")
    report = reconcile_pending(ns_store, reconciler, concurrency=2)
    assert report.failures == [] and report.completeness == 1.0
    ns = report.namespaces
    assert ns is not None and ns["namespaces"] == 3  # user:qa, user:qb, org:acme
    assert ns["sessions_consolidated"] == 6  # shared_team twice, org_deploy once (one org)
    assert ns["sessions_extracted"] == 5  # ... but every session extracted once
    # and consolidation reused the extraction without reading the session again.
    assert reconciler.extracted("shared_team") is reconciler.extract(
        load_sessions(ns_store, ["shared_team"])[0]
    )

    facts = _facts(ns_store)
    by = {(f["ns"], f["session"], f["value"]): f for f in facts}
    leeds = by[("user:qa", "b_leeds", "Leeds")]
    zurich = by[("user:qa", "a_moved", "Zürich")]
    # Time order, not id order: a_moved (May) supersedes b_leeds (February).
    assert leeds["superseded_by"] == zurich["id"] and leeds["invalid_at"] == "2023-05-08T22:30:00"
    assert zurich["superseded_by"] is None
    # The shared session's fact exists once per user: current for qa, superseded for qb.
    payments_a = by[("user:qa", "shared_team", "payments")]
    payments_b = by[("user:qb", "shared_team", "payments")]
    assert payments_a["id"] != payments_b["id"]
    assert payments_a["superseded_by"] is None
    assert payments_b["superseded_by"] == by[("user:qb", "qb_search", "search")]["id"]
    edge = ns_store.read(
        "MATCH (a:Fact {fact_id: $id})-[:SUPERSEDED_BY]->(b:Fact) RETURN b.fact_id AS b",
        {"id": leeds["id"]},
    )
    assert edge == [{"b": zurich["id"]}]
    # No entity is shared between users; aliases joined within one.
    shared = ns_store.read(
        "MATCH (f:Fact)-[:ABOUT]->(e:Entity) WHERE f.namespace <> e.namespace RETURN count(*) AS n"
    )
    assert shared == [{"n": 0}]
    ana = ns_store.read(
        "MATCH (e:Entity {namespace: 'user:qa'}) WHERE e.type = 'person' "
        "RETURN e.local_key AS key, e.aliases AS aliases ORDER BY key"
    )
    assert {"key": "person:ana lopez", "aliases": ["person:ana"]} in ana

    # Resume: nothing to do, every namespace current.
    again = reconcile_pending(ns_store, load_reconciler("consolidating"), concurrency=2)
    assert again.to_do == 0 and again.namespaces["skipped_current"] == 3
    assert _facts(ns_store) == facts


def test_retrieval_ranks_the_current_fact_before_the_superseded_one(ns_store: GraphStore):
    reconcile_pending(ns_store, load_reconciler("consolidating"), concurrency=2)
    for sources in (["fact"], "auto"):
        retriever = FulltextRetriever(RetrievalEnv(store=ns_store), sources=sources)
        out = retriever.retrieve(
            RetrievalRequest(
                question_id="qa",
                question="Which city does my sister live in now?",
                question_date="2023/06/01 (Thu) 10:00",
                top_k=10,
            ),
            RetrievalTrace(),
        )
        facts = [i for i in out.items if i.kind == "fact"]
        texts = [i.text for i in facts]
        assert len(texts) == len(set(texts)), texts  # each fact once, reordered not repeated
        assert texts.index("The user's sister lives in Zürich.") < texts.index(
            "The user's sister lives in Leeds."
        ), texts
        # History stays retrievable and is labelled; the current fact leads the context.
        ranked = [i.text for i in out.items]
        assert ranked.index("The user's sister lives in Zürich.") < min(
            n for n, i in enumerate(out.items) if "b_leeds#0" in i.turn_ids
        )
        history = out.context[ranked.index("The user's sister lives in Leeds.")]
        assert "superseded 2023-05-08 22:30" in history
        # qb's copy of the shared session is not qa's memory.
        assert all(i.turn_ids for i in facts)


def test_a_session_level_reconciler_taking_over_removes_namespace_memory(ns_store: GraphStore):
    reconcile_pending(ns_store, load_reconciler("consolidating"), concurrency=2)
    reconcile_pending(ns_store, ExtractiveReconciler(), concurrency=2)
    left = ns_store.read(
        "MATCH (n) WHERE (n:Fact OR n:MemoryNamespace OR n:Entity) AND n.namespace IS NOT NULL "
        "RETURN count(n) AS n"
    )
    assert left == [{"n": 0}]
    again = reconcile_pending(ns_store, load_reconciler("consolidating"), concurrency=2)
    assert again.namespaces["rebuilt"] == 3 and len(_facts(ns_store)) > 0


def test_a_later_session_is_consolidated_against_the_memory_read_from_the_graph(
    ns_store: GraphStore,
):
    reconcile_pending(ns_store, load_reconciler("consolidating"), concurrency=2)
    before = {f["id"]: f for f in _facts(ns_store)}
    # A session arrives later in qb's history: written as injection writes it, pending.
    ns_store.write_transaction(
        [
            (
                "MATCH (q:Question {question_id: 'qb'}) "
                "CREATE (q)-[:HAYSTACK]->(s:Session {session_id: 'qb_platform', "
                "date: '2023/06/01 (Thu) 09:00', started_at: '2023-06-01T09:00:00', "
                "reconcile_status: 'pending'})-[:HAS_TURN]->(:Turn {turn_id: 'qb_platform#0', "
                "session_id: 'qb_platform', role: 'user', index: 0, "
                "timestamp: '2023-06-01T09:00:00', "
                "text: 'I have moved to the data platform team.'})",
                {},
            )
        ]
    )
    fresh = load_reconciler("consolidating")  # a new process: nothing cached
    report = reconcile_pending(ns_store, fresh, concurrency=2)
    ns = report.namespaces
    assert report.to_do == 1 and ns["consolidated"] == 1 and ns["rebuilt"] == 0
    assert ns["sessions_consolidated"] == 1 and fresh.extractions == 1  # only the new one
    after = {f["id"]: f for f in _facts(ns_store)}
    search = next(f for f in after.values() if f["ns"] == "user:qb" and f["value"] == "search")
    platform = next(f for f in after.values() if f["session"] == "qb_platform")
    # The old memory came back from the graph and was superseded in place.
    assert search["superseded_by"] == platform["id"] and search["id"] in before
    assert before[search["id"]]["superseded_by"] is None
    assert {k: v for k, v in after.items() if k != platform["id"] and k != search["id"]} == {
        k: v for k, v in before.items() if k != search["id"]
    }
