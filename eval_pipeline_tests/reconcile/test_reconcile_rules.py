"""The extractive rules on hand-written text: sentences, values, names, and their types."""

from __future__ import annotations

import pytest

from eval_pipeline.reconcile.chunking import chunk_spans
from eval_pipeline.reconcile.entity_rules import find_entities
from eval_pipeline.reconcile.models import entity_key, normalise_name
from eval_pipeline.reconcile.sentences import sentences
from eval_pipeline.reconcile.value_rules import quantity_key


def typed(text: str) -> list[tuple[str, str]]:
    return [(e.type, e.name) for e in find_entities(text)]


def test_sentences_keep_abbreviations_initials_and_table_rows():
    text = (
        "I met Dr. Smith in the U.S. yesterday! Really? Yes.\n"
        "| a | b |\n| 1 | 2 |\nJ. R. R. Tolkien wrote it."
    )
    assert sentences(text) == [
        "I met Dr. Smith in the U.S. yesterday!",
        "Really?",
        "Yes.",
        "| a | b |",
        "| 1 | 2 |",
        "J. R. R. Tolkien wrote it.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It took 25 minutes.", ("quantity", "25 minutes")),
        ("I paid $40 for it.", ("quantity", "$40")),
        ("We walked 3 km home.", ("quantity", "3 km")),
        ("Prices rose 12.5% this year.", ("quantity", "12.5%")),
        ("A 30-minute walk.", ("quantity", "30-minute")),
        ("It weighs 1.5 lbs.", ("quantity", "1.5 lbs")),
        ("I took 2,500 steps.", ("quantity", "2,500 steps")),
        ("It lasted two hours.", ("quantity", "two hours")),
        ("The flight is on May 5th.", ("date", "May 5th")),
        ("Deadline: 2023-05-30.", ("date", "2023-05-30")),
        ("I saw her last Tuesday.", ("date", "last Tuesday")),
        ("Born on 5 May 1990.", ("date", "5 May 1990")),
        ("We met 3 days ago.", ("date", "3 days ago")),
        ("Let's meet at 10:30 am.", ("date", "10:30 am")),
        ("I have lived here since 2019.", ("date", "2019")),
    ],
)
def test_values_are_found_with_their_type(text, expected):
    assert expected in typed(text)


def test_a_date_wins_over_the_quantity_inside_it():
    assert typed("It happened 25 minutes ago.") == [("date", "25 minutes ago")]
    assert typed("May I ask? We go in May.") == [("date", "May")]


def test_quantity_keys_fold_unit_spellings_and_word_numbers():
    assert quantity_key("2 hrs") == quantity_key("two hours") == "quantity:2 hours"
    assert quantity_key("25 min") == quantity_key("25 minutes")
    assert quantity_key("$1,200") == "quantity:$1200"
    assert quantity_key("12.5%") == "quantity:12.5%"
    assert quantity_key("30-minute") == "quantity:30 minutes"


def test_people_places_organisations_products():
    found = typed(
        "Yesterday I met my friend Sarah Johnson at Starbucks in New York City. "
        "Dr. Patel from Bank of America showed me the iPhone 14 Pro. "
        "My cousin Tomasz moved to Gdynia, near Lake Tahoe Park; he works at Acme Corp."
    )
    assert ("person", "Sarah Johnson") in found
    assert ("organisation", "Starbucks") in found
    assert ("place", "New York City") in found
    assert ("person", "Patel") in found
    assert ("organisation", "Bank of America") in found
    assert ("product", "iPhone 14 Pro") in found
    assert ("person", "Tomasz") in found  # a cue word: "my cousin"
    assert ("place", "Gdynia") in found  # a cue word: "moved to"
    assert ("organisation", "Acme Corp") in found
    assert ("date", "Yesterday") in found


def test_sentence_openers_headings_and_labels_are_not_names():
    found = typed(
        "## Key Benefits Of Regular Exercise\n"
        "1. **Better Sleep:** You sleep longer.\n"
        "However, The results vary. Consider walking."
    )
    assert found == []


def test_pipes_in_text_are_plain_text():
    text = "| City | Cost |\n|---|---|\n| Lisbon | $40 |\n| Ana's pick | 3 km walk |"
    assert typed(text) == [
        ("place", "Lisbon"),
        ("quantity", "$40"),
        ("person", "Ana"),
        ("quantity", "3 km"),
    ]


def test_non_ascii_names_and_values():
    found = typed(
        "We visited São Paulo and Zürich with Zoë Kravitz. My cousin Björn lives in Malmö. "
        "東京で3 km走った。 Le café coûtait 3,50 €."
    )
    assert ("place", "São Paulo") in found
    assert ("place", "Zürich") in found
    assert ("person", "Zoë Kravitz") in found
    assert ("person", "Björn") in found
    assert ("place", "Malmö") in found
    assert ("quantity", "3 km") in found  # no spaces around it in Japanese
    assert ("quantity", "3,50 €") in found  # the currency after the amount


def test_normalised_keys_ignore_case_width_and_spacing_but_not_accents():
    assert normalise_name("New  York") == normalise_name("new york") == "new york"
    assert normalise_name("ＮＹＣ") == "nyc"  # full-width letters
    assert entity_key("person", "Zoë") != entity_key("person", "Zoe")


def test_chunks_are_whole_short_turns_or_sentence_windows():
    short = "  Just one short turn.  "
    assert [short[s.start : s.end] for s in chunk_spans(short, 100)] == ["Just one short turn."]
    long = " ".join(f"Sentence number {i} is here." for i in range(20))
    spans = chunk_spans(long, 100)
    assert len(spans) > 1
    assert all(s.end - s.start <= 100 for s in spans)
    assert " ".join(long[s.start : s.end] for s in spans) == long
    assert chunk_spans("   ", 100) == []
