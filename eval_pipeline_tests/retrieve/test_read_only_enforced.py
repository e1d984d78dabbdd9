"""Read-only, enforced twice, on the real embedded server.

Every adversarial statement goes through the guarded read path (guard, then a read transaction
with timeout and row cap): rejects never reach the server, allowed ones run, and the graph's
content fingerprint is unchanged after every allowed one and after all the rejects (a reject
that reached the server would be compared at once). Then the reason the guard matters: on
this server a write sent in a plain read transaction does change the graph.
"""

from __future__ import annotations

from typing import Any

import pytest

from eval_pipeline.graph.errors import GraphError
from eval_pipeline.graph.state import graph_state
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.guarded_read import REJECTED_PREFIX, GuardedReader, QueryRejected
from eval_pipeline.retrieve.protocol import RetrievalTrace
from eval_pipeline_tests.retrieve.adversarial_statements import MUST_ALLOW, MUST_REJECT

# Parameters some statements use ($q, $ids, and the $create/$x of a few rejects).
PARAMS = {"q": "bike", "ids": ["s_bike#0"], "create": "x", "x": 1}


class SpyStore:
    """The real store, with every statement that reaches it written down."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.sent: list[str] = []

    def read(self, query: str, params: Any = None, **kwargs: Any) -> list[dict]:
        self.sent.append(query)
        return self.store.read(query, params, **kwargs)


@pytest.mark.slow  # every adversarial statement against the server: seconds; the full suite runs it
def test_every_adversarial_statement_through_the_retrieval_read_path(scratch_store: GraphStore):
    before = graph_state(scratch_store).fingerprint
    spy = SpyStore(scratch_store)
    guarded = GuardedReader(spy, timeout_s=20, max_rows=10_000)
    problems: list[str] = []

    for statement, note in MUST_REJECT:
        trace = RetrievalTrace()
        try:
            guarded.read(statement, PARAMS, trace=trace)
            problems.append(f"not rejected ({note}): {statement!r}")
        except QueryRejected:
            pass
        record = trace.queries[-1] if trace.queries else None
        if record is None or not (record.error or "").startswith(REJECTED_PREFIX):
            problems.append(f"rejection not recorded ({note}): {statement!r}")
        if spy.sent:
            problems.append(f"reached the server ({note}): {statement!r}")
            spy.sent.clear()
            # Only a statement that reached the server can have changed the graph: which one
            # did is told here; the graph is compared once after all of them in any case.
            if graph_state(scratch_store).fingerprint != before:
                problems.append(f"graph changed after ({note}): {statement!r}")
                break
    if graph_state(scratch_store).fingerprint != before:
        problems.append("graph changed while the rejected statements were read")

    ran = failed = 0
    for statement in MUST_ALLOW:
        trace = RetrievalTrace()
        try:
            guarded.read(statement, PARAMS, trace=trace)
        except QueryRejected as rejected:
            problems.append(f"rejected ({rejected.reason}): {statement!r}")
            continue
        except GraphError:
            failed += 1  # a procedure or function this server lacks: failing is fine
        ran += 1
        if spy.sent[-1:] != [statement]:
            problems.append(f"did not reach the server: {statement!r}")
        if len(trace.queries) != 1:
            problems.append(f"not recorded once: {statement!r}")
        if graph_state(scratch_store).fingerprint != before:
            problems.append(f"graph changed after: {statement!r}")
            break

    assert not problems, "\n".join(problems[:20])
    print(f"{len(MUST_REJECT)} rejected unsent, {ran} allowed ran ({failed} failed on the server)")
    assert ran == len(MUST_ALLOW) and failed < ran // 2, (ran, failed)


def test_the_server_alone_would_let_a_write_through_a_read_transaction(
    scratch_store: GraphStore,
):
    """Why the guard is needed: GraphStore.read uses a read transaction, and ArcadeDB writes
    anyway. Only ever on a throwaway database."""
    assert scratch_store.database.startswith("scratch")
    before = graph_state(scratch_store)
    scratch_store.read("MATCH (t:Turn {turn_id: 's_bike#0'}) SET t.text = 'tampered' RETURN 1")
    after_set = graph_state(scratch_store)
    assert after_set.fingerprint != before.fingerprint
    scratch_store.read("CREATE (:Intruder {x: 1}) RETURN 1")
    after_create = graph_state(scratch_store)
    assert after_create.nodes == before.nodes + 1

    guarded = GuardedReader(scratch_store)
    with pytest.raises(QueryRejected, match="SET"):
        guarded.read("MATCH (t:Turn {turn_id: 's_bike#0'}) SET t.text = 'again' RETURN 1")
    assert graph_state(scratch_store).fingerprint == after_create.fingerprint


def test_graph_state_sees_every_kind_of_change(scratch_store: GraphStore):
    base = graph_state(scratch_store)
    changes = [
        "MATCH (t:Turn {turn_id: 's_dog#1'}) SET t.extra = 1",
        "MATCH (t:Turn {turn_id: 's_dog#1'}) REMOVE t.extra",  # back to the base content
        "MATCH (a:Turn {turn_id: 's_dog#0'}), (b:Turn {turn_id: 's_bike#0'}) CREATE (a)-[:X]->(b)",
        "MATCH ()-[r:X]->() DELETE r",
        "MATCH (t:Turn {turn_id: 's_dog#1'}) SET t:Extra",
    ]
    states = [graph_state(scratch_store)]
    for statement in changes:
        scratch_store.write(statement)
        states.append(graph_state(scratch_store))
    seen = [s.fingerprint for s in states]
    assert seen[0] == base.fingerprint
    assert seen[1] != base.fingerprint and seen[2] == base.fingerprint
    assert seen[3] != base.fingerprint and seen[4] != base.fingerprint
    # Deleting the relationship restored the content, but its type X stays in the schema:
    # still a write, and the fingerprint says so (issue 13).
    assert states[4].content_fingerprint == base.content_fingerprint
    assert states[4].schema_fingerprint != base.schema_fingerprint
    assert seen[5] != base.fingerprint
