"""The `llm` reconciler through the real LLM layer and OpenAI SDK, against a local server."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.llm import LLMCallFailed
from eval_pipeline.reconcile import load_reconciler, pins_of
from eval_pipeline.reconcile.llm_reconciler import (
    ExtractedFact,
    ExtractedMemory,
    memory_from_extraction,
)

from .sessions import RUNNING, TRIP, session


async def _reconcile(reconciler, s):
    try:
        return await reconciler.reconcile(s)
    finally:
        await reconciler.aclose()


def run(reconciler, s):
    return asyncio.run(_reconcile(reconciler, s))


def test_two_calls_give_typed_facts_linked_to_turns_and_an_episode(make_llm, fake_model):
    reconciler = load_reconciler("llm", llm=make_llm())
    s = session("trip", TRIP)
    memory = run(reconciler, s)
    memory.check_against(s)
    assert fake_model.request_count == 2
    assert [f.turn_ids for f in memory.facts] == [("trip#0",), ("trip#2",)]
    assert all(f.valid_at == "2023-05-30T23:40:00" and f.fact_type == "event" for f in memory.facts)
    assert [f.fact_id for f in memory.facts] == ["trip#fact0", "trip#fact1"]
    keys = {e.key for e in memory.entities}
    assert {"person:ana", "place:lisbon", "date:may 5th"} <= keys
    assert "person:ana" in memory.facts[0].entity_keys
    assert memory.episode is not None
    assert memory.episode.summary.startswith("The user talked about: My friend Ana")
    assert memory.chunks == ()
    # Every request went through the structured-output path for the first call.
    first = fake_model.requests[0].body or {}
    assert first["model"] == "fake-memory-model"
    usage = reconciler.usage()
    assert usage["calls"] == 2 and usage["provider_requests"] == 2
    pins = pins_of(reconciler)
    assert pins["name"] == "llm" and pins["llm"]["model"] == "fake-memory-model"
    assert pins["prompt_version"] == "1"


def test_a_rerun_is_answered_from_the_cache_with_an_identical_memory(
    make_llm, fake_model, tmp_path
):
    cache = tmp_path / "shared_cache.sqlite3"
    s = session("run", RUNNING)
    first = run(load_reconciler("llm", llm=make_llm(cache_path=cache)), s)
    assert fake_model.request_count == 2
    again_reconciler = load_reconciler("llm", llm=make_llm(cache_path=cache))
    again = run(again_reconciler, s)
    assert fake_model.request_count == 2  # nothing new reached the server
    assert again == first
    assert again_reconciler.usage()["cache_hits"] == 2


def test_output_that_never_validates_fails_the_session(make_llm):
    reconciler = load_reconciler("llm", llm=make_llm())
    with pytest.raises(LLMCallFailed, match="did not fit ExtractedMemory"):
        run(reconciler, session("bad", [("user", "MALFORMED please")]))


def test_one_repair_is_enough_when_the_model_corrects_itself(make_llm, fake_model):
    reconciler = load_reconciler("llm", llm=make_llm())
    memory = run(reconciler, session("fix", [("user", "REPAIRME I met Ana in Lisbon.")]))
    assert len(memory.facts) == 1
    assert fake_model.request_count == 3  # extraction, its repair, the summary
    assert reconciler.usage()["repairs"] == 1


def test_citations_of_unknown_turns_are_dropped_and_unlisted_entities_added():
    s = session("map", [("user", "hello"), ("assistant", "hi")])
    extracted = ExtractedMemory(
        facts=[
            ExtractedFact(
                statement="The user greeted.",
                fact_type="event",
                source_turns=["t0", "t7"],
                entities=["Greeting Protocol"],
            ),
            ExtractedFact(statement="Unsourced.", fact_type="other", source_turns=["t9"]),
        ]
    )
    memory = memory_from_extraction(s, extracted, "A greeting.", "llm")
    assert [f.turn_ids for f in memory.facts] == [("map#0",)]
    assert [e.key for e in memory.entities] == ["other:greeting protocol"]
    assert memory.facts[0].entity_keys == ("other:greeting protocol",)


def test_common_type_spellings_are_accepted_and_unknown_types_refused():
    parsed = ExtractedMemory.model_validate(
        {"entities": [{"name": "Acme", "type": "Organization"}, {"name": "Rome", "type": "city"}]}
    )
    assert [e.type for e in parsed.entities] == ["organisation", "place"]
    with pytest.raises(ValueError):
        ExtractedMemory.model_validate({"entities": [{"name": "x", "type": "vibe"}]})
