"""What memory holds of a question's evidence, read from a real graph (ArcadeDB over Bolt)
and from a provider's memories."""

from __future__ import annotations

from eval_pipeline.providers.base import StoredMemory
from eval_pipeline.reconcile.reader import declared_searchable
from eval_pipeline.retrieve.evidence_trace import (
    EvidenceTrace,
    graph_traces,
    provider_traces,
)

EXTRACTIVE_LIKE = [{"done": 3, "pins": {"schema": {"searchable": ["chunk", "fact"]}}}]
EVIDENCE = {"q_bike": ["s_bike#0", "s_bike#1", "s_bike#2"]}


def plant_memory(store) -> None:
    """A chunk of turn 0, a superseded fact of this question's own namespace on turn 2, and a
    fact of another user's namespace on turn 1 (never this question's memory)."""
    store.write(
        "MATCH (t:Turn {turn_id: 's_bike#0'}) "
        "CREATE (:Chunk {chunk_id: 's_bike#chunk0', text: 'road bike'})-[:FROM_TURN]->(t)"
    )
    store.write(
        "MATCH (t:Turn {turn_id: 's_bike#2'}) "
        "CREATE (:Fact {fact_id: 'user:q_bike|s_bike#fact0', namespace: 'user:q_bike', "
        "text: 'rides to work', superseded_by: 'user:q_bike|later#fact0'})-[:FROM_TURN]->(t)"
    )
    store.write(
        "MATCH (t:Turn {turn_id: 's_bike#1'}) "
        "CREATE (:Fact {fact_id: 'user:q_dog|s_bike#fact1', namespace: 'user:q_dog', "
        "text: 'Trek'})-[:FROM_TURN]->(t)"
    )


def test_graph_memory_holds_live_superseded_or_nothing(scratch_store):
    plant_memory(scratch_store)
    (trace,) = graph_traces(scratch_store, EVIDENCE, EXTRACTIVE_LIKE)
    assert trace.held == {"s_bike#0": "live", "s_bike#1": "absent", "s_bike#2": "superseded"}
    assert trace.nodes["s_bike#0"] == ["s_bike#chunk0"]
    assert trace.nodes["s_bike#2"] == ["user:q_bike|s_bike#fact0"]
    assert trace.nodes["s_bike#1"] == []  # the other namespace's fact is not this memory
    assert trace.formed is False


def test_a_searchable_transcript_holds_every_injected_turn(scratch_store):
    # `none` declares the raw turns searchable; a graph with no registered memory is
    # searched as it is: in both, an injected evidence turn is held by itself.
    none_memory = [{"done": 3, "pins": {"schema": {"searchable": ["turn"]}}}]
    for configurations in (none_memory, []):
        (trace,) = graph_traces(
            scratch_store, {"q_bike": ["s_bike#0", "s_bike#99"]}, configurations
        )
        assert trace.held == {"s_bike#0": "live", "s_bike#99": "absent"}


def test_searchable_kinds_follow_the_registered_memory():
    assert declared_searchable([]) >= {"turn", "chunk"}
    assert declared_searchable(EXTRACTIVE_LIKE) == {"chunk", "fact"}
    assert declared_searchable([{"done": 0, "pins": {"schema": {"searchable": ["turn"]}}}]) == set()


def test_provider_memories_trace_by_turn_or_by_session():
    memories = {
        "user:q1": [
            StoredMemory(memory_id="m1", text="x", session_id="s1", turn_ids=["s1#0"]),
            StoredMemory(memory_id="m2", text="y", session_id="s2", turn_ids=["s2#3"]),
        ],
        "user:q2": [StoredMemory(memory_id="m3", text="z", session_id="s1", turn_ids=["s1#1"])],
    }
    traces = provider_traces(memories, {"q1": ["s1#0", "s1#1"]}, {"q1": ["s1"]})
    assert traces == [
        EvidenceTrace(
            question_id="q1",
            held={"s1#0": "live", "s1#1": "absent"},  # q2's memory of s1#1 is not q1's
            nodes={"s1#0": ["m1"], "s1#1": []},
        )
    ]
    # A provider that names sessions only is traced at session level.
    by_session = {"user:q1": [StoredMemory(memory_id="m1", text="x", session_id="s1")]}
    (trace,) = provider_traces(by_session, {"q1": ["s1#0"]}, {"q1": ["s1", "s2"]})
    assert (trace.level, trace.held) == ("session", {"s1": "live", "s2": "absent"})
