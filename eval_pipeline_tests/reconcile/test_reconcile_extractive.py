"""The extractive reconciler: what it distils from a session, and that it is deterministic."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.models import MemoryChunk, SessionMemory
from eval_pipeline.reconcile.none import NoneReconciler

from .sessions import CAFE, RUNNING, TRIP, session


def test_chunks_link_to_their_turns_and_mention_entities():
    s = session("trip", TRIP)
    memory = ExtractiveReconciler().reconcile(s)
    memory.check_against(s)
    assert [c.turn_ids for c in memory.chunks] == [("trip#0",), ("trip#1",), ("trip#2",)]
    assert [c.chunk_id for c in memory.chunks] == ["trip#chunk0", "trip#chunk1", "trip#chunk2"]
    # Chunk text is the turn's text, `|` and all.
    assert memory.chunks[1].text == TRIP[1][1]
    keys = {e.key: e for e in memory.entities}
    assert keys["person:ana"].name == "Ana"
    assert keys["place:lisbon"].type == "place"
    assert "date:may 5th" in keys and "quantity:$1200" in keys and "quantity:40 minutes" in keys
    # "Ana" is typed person in turn 0 ("my friend Ana"); turn 2 reuses that type.
    assert "person:ana" in memory.chunks[2].entity_keys
    assert "person:ana" in memory.chunks[0].entity_keys


def test_one_episode_with_an_extractive_summary_of_the_session():
    s = session("run", RUNNING)
    memory = ExtractiveReconciler(summary_sentences=2).reconcile(s)
    assert memory.episode is not None
    assert memory.episode.episode_id == "run#episode"
    assert memory.episode.turn_ids == ("run#0", "run#1", "run#2")
    summary = memory.episode.summary
    sentences_in_session = [text for _, text in RUNNING]
    assert summary and all(
        any(part.strip(" .!") in turn for turn in sentences_in_session)
        for part in summary.split(". ")
    )
    assert memory.facts == ()  # facts need a model


def test_long_turns_are_cut_into_windows_linked_to_the_same_turn():
    long_text = " ".join(f"On day {i} I walked {i} km with Ana in Lisbon." for i in range(1, 40))
    s = session("long", [("user", long_text)])
    memory = ExtractiveReconciler(max_chunk_chars=200).reconcile(s)
    assert len(memory.chunks) > 5
    assert all(c.turn_ids == ("long#0",) for c in memory.chunks)
    assert all(len(c.text) <= 200 for c in memory.chunks)
    assert [c.index for c in memory.chunks] == list(range(len(memory.chunks)))


def test_same_input_gives_an_identical_memory():
    for turns in (TRIP, RUNNING, CAFE):
        s = session("det", turns)
        first = ExtractiveReconciler().reconcile(s)
        again = ExtractiveReconciler().reconcile(session("det", turns))
        assert first == again
        assert first.model_dump_json() == again.model_dump_json()


def test_empty_and_blank_sessions_reconcile_to_an_empty_memory():
    memory = ExtractiveReconciler().reconcile(session("blank", [("user", "   ")]))
    assert memory.chunks == () and memory.entities == ()
    assert memory.episode is not None and memory.episode.summary == ""
    assert ExtractiveReconciler().reconcile(session("empty", [])).chunks == ()


def test_none_reconciler_writes_nothing():
    memory = asyncio.run(NoneReconciler().reconcile(session("n", TRIP)))
    assert memory == SessionMemory(session_id="n", reconciler="none")


def test_bad_config_is_refused():
    with pytest.raises(ValidationError):
        ExtractiveReconciler(max_chunk_chars=5)
    with pytest.raises(ValidationError):
        ExtractiveReconciler(unknown_option=1)


def test_a_memory_citing_foreign_turns_or_unknown_entities_is_refused():
    s = session("own", TRIP)
    foreign = SessionMemory(
        session_id="own",
        reconciler="x",
        chunks=(MemoryChunk(chunk_id="own#chunk0", index=0, text="t", turn_ids=("other#0",)),),
    )
    with pytest.raises(ValueError, match="not in the session"):
        foreign.check_against(s)
    with pytest.raises(ValueError, match="for session"):
        SessionMemory(session_id="elsewhere", reconciler="x").check_against(s)
    with pytest.raises(ValidationError, match="unknown entity keys"):
        SessionMemory(
            session_id="own",
            reconciler="x",
            chunks=(
                MemoryChunk(
                    chunk_id="c", index=0, text="t", turn_ids=("own#0",), entity_keys=("x:y",)
                ),
            ),
        )
