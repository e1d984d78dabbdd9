"""The reader: the offline extractive one (one answering sentence, no label, abstention), the
LLM reader over the wire format under each prompt, and the reader's pins."""

from __future__ import annotations

from statistics import median

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.retrieve.arms import ceiling_context, evidence_session_ids, load_sessions
from eval_pipeline.retrieve.extractive import best_sentence, narrow, read_label, sentences
from eval_pipeline.retrieve.reader import (
    ABSTENTION,
    EXTRACTIVE_LABEL,
    READER_PROMPT_VERSION,
    ExtractiveReader,
    LLMReader,
    ReaderError,
    make_reader,
    reader_pins,
)
from eval_pipeline.retrieve.reader_prompts import (
    READER_PROMPTS,
    build_prompt,
    project_prompt,
    prompt_hash,
)
from eval_pipeline.retrieve.terms import content_terms, stems
from eval_pipeline.settings import BUNDLED_CORPUS_DIR
from eval_pipeline_tests.retrieve.support import TEST_KEY, wire_layer
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

CONTEXT = [
    "[2023-05-01 10:00, user] I walked the dog in the park.",
    "[2023-05-02 09:00, user] I finally got a new bike. It is a red Trek road bike that I "
    "bought in Paris. Riding it to work is great.",
    "[2023-05-03 08:00, assistant] Road bikes are great for commuting.",
]
SAMPLE = BUNDLED_CORPUS_DIR / "sample"


def test_answers_with_the_one_sentence_that_answers_without_its_label():
    reader = ExtractiveReader()
    assert reader.label == EXTRACTIVE_LABEL == "offline:extractive"
    answer = reader.answer("What colour is my new bike I bought in Paris?", "2023/06/01", CONTEXT)
    assert answer == "It is a red Trek road bike that I bought in Paris."


def test_matches_word_forms_as_the_query_does():
    # "marathons" and "marathon" share a stem: the reader must not abstain on the passage
    # the stemmed full-text query found.
    context = ["We talked about the weather", "I ran my first marathon in Berlin in May"]
    got = ExtractiveReader().answer("How many marathons have I run in Berlin?", "", context)
    assert got == "I ran my first marathon in Berlin in May"


def test_ties_go_to_the_better_ranked_passage_and_a_superseded_one_loses():
    assert best_sentence("road bikes", ["road bikes east", "road bikes west"]) == (
        0,
        "road bikes east",
    )
    context = [
        "[2023-05-01 10:00, superseded 2023-05-09] My team is the payments team.",
        "[2023-05-09 10:00] My team is the search team.",
    ]
    assert best_sentence("Which team is my team?", context)[0] == 1


def test_a_question_about_now_takes_the_newest_of_equal_statements():
    context = [
        "[2023-01-05 10:00, user] I can do 4 pull-ups in a row.",
        "[2023-05-21 08:40, user] I can do 9 pull-ups in a row.",
    ]
    assert (
        ExtractiveReader()
        .answer("How many pull-ups in a row now?", "", context)
        .startswith("I can do 9")
    )
    # Without "now" the better-ranked passage wins the tie.
    assert "4 pull-ups" in ExtractiveReader().answer("How many pull-ups in a row?", "", context)


def test_a_question_or_a_restatement_is_never_the_answer():
    context = [
        "[2023-04-09 11:40, user] Which houseplants are hard to kill?",
        "[2023-04-09 11:41, assistant] Hard to kill houseplants.",
    ]
    assert ExtractiveReader().answer("Which houseplants are hard to kill?", "", context) == (
        ABSTENTION
    )


def test_abstains_when_nothing_is_retrieved_or_too_little_matches():
    reader = ExtractiveReader()
    assert reader.answer("What colour is my bike?", "2023/06/01", []) == ABSTENTION
    assert reader.answer("Which violin do I play?", "2023/06/01", CONTEXT) == ABSTENTION
    # One shared word of three is not an answer: the neighbour's dog is not their cat.
    beagle = ["[2023-05-14 16:02, user] My neighbour's beagle howls every morning."]
    assert reader.answer("What breed is my neighbour's cat?", "", beagle) == ABSTENTION


def test_labels_are_read_and_stripped():
    p = read_label("[2023-05-30 23:40, user, superseded 2023-06-02] My pace is 5:45.")
    assert (p.text, p.date, p.role, p.superseded) == (
        "My pace is 5:45.",
        "2023-05-30 23:40",
        "user",
        True,
    )
    assert read_label("[2023-05-30 23:40] text").role is None
    # Brackets that are not a retriever's label stay.
    assert read_label("[1] the first item").text == "[1] the first item"


def test_sentences_keep_announcements_list_items_and_abbreviations_whole():
    text = (
        "Count them in one go:\n\ncat *.csv | wc -l\n\n"
        "Steps:\n1. Soften the onion.\n2. Simmer for 25 minutes.\nI left at 7 a.m. sharp."
    )
    assert sentences(text) == [
        "Count them in one go: cat *.csv | wc -l",
        "Steps: 1. Soften the onion.",
        "2. Simmer for 25 minutes.",
        "I left at 7 a.m. sharp.",
    ]


def test_a_long_sentence_is_narrowed_to_its_answering_clauses():
    sentence = (
        "3. Add 200 g rinsed red lentils and 1 litre of vegetable stock, bring to the boil, "
        "then lower the heat and simmer uncovered for 25 minutes, stirring now and then, "
        "until the lentils have broken down completely and the soup looks thick and smooth."
    )
    wanted = stems(content_terms("How many minutes did you say to simmer it?"))
    got = narrow(sentence, wanted)
    assert "simmer uncovered for 25 minutes" in got
    assert len(got.split()) <= 30 and len(got.split()) < len(sentence.split())


def test_on_the_bundled_sample_answers_are_short_and_never_a_whole_turn():
    # Every question of the sample read on its evidence sessions (the ceiling's context).
    goldens = list(read_jsonl(SAMPLE / "goldens.jsonl"))
    wanted = {s for g in goldens for s in evidence_session_ids(g)}
    sessions = load_sessions(SAMPLE / "fixtures.jsonl", wanted)
    turns = {t.content.strip() for s in sessions.values() for t in s.turns}
    reader = ExtractiveReader()
    answers = [
        reader.answer(g["input"], g["additional_metadata"]["question_date"], context)
        for g in goldens
        for context in [ceiling_context(g, sessions)[0]]
    ]
    lengths = [len(a.split()) for a in answers]
    assert median(lengths) <= 20 and max(lengths) <= 30
    assert not [a for a in answers if a in turns and len(sentences(a)) > 1]
    assert not [a for a in answers if a.startswith("[")]  # no label


def test_make_reader_offline_and_llm_without_a_model():
    assert isinstance(make_reader("offline", None), ExtractiveReader)
    assert isinstance(make_reader(EXTRACTIVE_LABEL, None), ExtractiveReader)
    with pytest.raises(ValueError, match="needs a model for the 'reader' role"):
        make_reader("llm", None)
    with pytest.raises(ValueError, match="unknown reader"):
        make_reader("abstractive", None)


def test_project_prompt_says_what_day_today_is():
    prompt = project_prompt("When did I buy the bike?", "2023/05/30 (Tue) 23:40", CONTEXT[:1])
    assert "Today is 2023/05/30 (Tue) 23:40." in prompt
    assert "[1] [2023-05-01 10:00, user] I walked the dog" in prompt
    assert "(no excerpts were retrieved)" in project_prompt("q?", "d", [])


def test_longmemeval_prompts_give_dated_chats_then_the_date_then_the_question():
    system, user = build_prompt("longmemeval", "What bike?", "2023/05/30 (Tue) 23:40", CONTEXT)
    assert system is None  # one user message, as LongMemEval's reader is asked
    chats, date, question, answer = (
        user.index("### Conversation 1\nDate: 2023-05-01 10:00\nuser: I walked the dog"),
        user.index("Today's date: 2023/05/30 (Tue) 23:40"),
        user.index("Question: What bike?"),
        user.rindex("Answer:"),
    )
    assert chats < date < question < answer == len(user) - len("Answer:")
    assert "[2023-05-01" not in user  # the label became the chat's date and speaker
    _, cot = build_prompt("longmemeval-cot", "What bike?", "2023/05/30 (Tue) 23:40", CONTEXT)
    assert "step" in cot and "step" not in user
    assert cot.replace(cot.split("\n\n")[0], "") == user.replace(user.split("\n\n")[0], "")


def test_each_prompt_has_its_own_hash_and_reader_pins_name_it():
    hashes = {p: prompt_hash(p) for p in READER_PROMPTS}
    assert len(set(hashes.values())) == len(READER_PROMPTS)
    assert reader_pins(ExtractiveReader()) == {
        "version": READER_PROMPT_VERSION,
        "prompt": None,
        "prompt_hash": None,
    }
    with pytest.raises(ValueError, match="unknown reader prompt"):
        build_prompt("chatty", "q", "d", [])


@pytest.mark.parametrize("prompt", READER_PROMPTS)
def test_llm_reader_over_the_openai_wire_format(tmp_path, monkeypatch, prompt):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with WireServer() as wire:
        layer = wire_layer(wire, tmp_path, "reader")
        try:
            reader = make_reader("llm", layer, prompt)
            assert isinstance(reader, LLMReader)
            assert reader.label.startswith("openai:gpt-4o-mini@http://127.0.0.1")
            pins = reader_pins(reader)
            assert pins["prompt"] == prompt and pins["prompt_hash"] == prompt_hash(prompt)
            wire.enqueue(ScriptedReply(text="  A red Trek.  "), ScriptedReply(text="   "))
            reply = reader.answer("What bike?", "2023/05/30 (Tue) 23:40", CONTEXT)
            assert reply.text == "A red Trek."
            sent = wire.requests[0].messages
            assert (sent[0]["role"] == "system") == (prompt == "project")
            assert "2023/05/30 (Tue) 23:40" in sent[-1]["content"]
            # The prompt it reports is exactly what went over the wire (the date check
            # reads it).
            assert reply.prompt == "\n\n".join(m["content"] for m in sent)
            with pytest.raises(ReaderError, match="empty answer"):
                reader.answer("What bike?", "2023/05/30", CONTEXT)
        finally:
            layer.close()
