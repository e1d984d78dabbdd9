"""The reader: offline extractive, abstention, and the LLM reader over the wire format."""

from __future__ import annotations

import pytest

from eval_pipeline.retrieve.reader import (
    ABSTENTION,
    EXTRACTIVE_LABEL,
    ExtractiveReader,
    LLMReader,
    ReaderError,
    best_passage,
    make_reader,
    reader_prompt,
)
from eval_pipeline_tests.retrieve.support import TEST_KEY, wire_layer
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

CONTEXT = [
    "[2023-05-01 10:00, user] I walked the dog in the park.",
    "[2023-05-02 09:00, user] My new bike is a red Trek road bike that I bought in Paris.",
    "[2023-05-03 08:00, assistant] Road bikes are great for commuting.",
]


def test_extractive_reader_returns_the_best_matching_passage():
    reader = ExtractiveReader()
    assert reader.label == EXTRACTIVE_LABEL == "offline:extractive"
    answer = reader.answer("What colour is my new bike I bought in Paris?", "2023/06/01", CONTEXT)
    assert answer == CONTEXT[1]


def test_extractive_reader_matches_word_forms_as_the_query_does():
    # "marathons" and "marathon" share a stem: the reader must not abstain on the passage
    # the stemmed full-text query found.
    context = ["We talked about the weather", "I ran my first marathon in May"]
    assert ExtractiveReader().answer("How many marathons did I run?", "", context) == context[1]


def test_ties_go_to_the_better_ranked_passage():
    assert best_passage("road bikes", ["road trip", "road work"]) == 0


def test_abstains_when_nothing_is_retrieved_or_nothing_matches():
    reader = ExtractiveReader()
    assert reader.answer("What colour is my bike?", "2023/06/01", []) == ABSTENTION
    assert reader.answer("Which violin do I play?", "2023/06/01", CONTEXT) == ABSTENTION


def test_make_reader_offline_and_llm_without_a_model():
    assert isinstance(make_reader("offline", None), ExtractiveReader)
    assert isinstance(make_reader(EXTRACTIVE_LABEL, None), ExtractiveReader)
    with pytest.raises(ValueError, match="needs a model for the 'reader' role"):
        make_reader("llm", None)
    with pytest.raises(ValueError, match="unknown reader"):
        make_reader("abstractive", None)


def test_prompt_says_what_day_today_is():
    prompt = reader_prompt("When did I buy the bike?", "2023/05/30 (Tue) 23:40", CONTEXT[:1])
    assert "Today is 2023/05/30 (Tue) 23:40." in prompt
    assert "[1] [2023-05-01 10:00, user] I walked the dog" in prompt
    assert "(no excerpts were retrieved)" in reader_prompt("q?", "d", [])


def test_llm_reader_over_the_openai_wire_format(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with WireServer() as wire:
        layer = wire_layer(wire, tmp_path, "reader")
        try:
            reader = make_reader("llm", layer)
            assert isinstance(reader, LLMReader)
            assert reader.label.startswith("openai:gpt-4o-mini@http://127.0.0.1")
            wire.enqueue(ScriptedReply(text="  A red Trek.  "), ScriptedReply(text="   "))
            reply = reader.answer("What bike?", "2023/05/30 (Tue) 23:40", CONTEXT)
            assert reply.text == "A red Trek."
            sent = wire.requests[0].messages
            assert sent[0]["role"] == "system"
            assert "Today is 2023/05/30 (Tue) 23:40." in sent[-1]["content"]
            # The prompt it reports is exactly what went over the wire (the date check
            # reads it).
            assert reply.prompt == f"{sent[0]['content']}\n\n{sent[-1]['content']}"
            with pytest.raises(ReaderError, match="empty answer"):
                reader.answer("What bike?", "2023/05/30", CONTEXT)
        finally:
            layer.close()
