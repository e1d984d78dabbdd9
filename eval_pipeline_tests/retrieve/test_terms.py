"""Query terms: what the full-text query and the extractive reader match on."""

from __future__ import annotations

from eval_pipeline.retrieve.terms import content_terms, lucene_escape, or_query, words


def test_content_terms_drop_stopwords_keep_order_and_digits():
    terms = content_terms("What did I buy for my 3 cats at the Pet-Mart last Tuesday?")
    assert terms == ["buy", "3", "cats", "pet", "mart", "tuesday"]


def test_content_terms_are_distinct_and_capped():
    assert content_terms("dog dog Dog DOG cat") == ["dog", "cat"]
    assert len(content_terms(" ".join(f"w{i}" for i in range(100)), max_terms=5)) == 5


def test_a_question_of_stopwords_only_has_no_terms():
    assert content_terms("What was it?") == []
    assert or_query([]) == ""


def test_non_ascii_words_survive():
    assert content_terms("Where is Zürich's café?") == ["zürich", "café"]
    assert words("naïve—word") == ["naïve", "word"]


def test_lucene_special_characters_and_operators_are_escaped():
    assert lucene_escape('a+b-c:d"e(f)*?~^/\\') == 'a\\+b\\-c\\:d\\"e\\(f\\)\\*\\?\\~\\^\\/\\\\'
    assert lucene_escape("AND") == "and"
    assert or_query(["red", "bike"]) == "red OR bike"
