"""Query terms: what the full-text query and the extractive reader match on."""

from __future__ import annotations

from eval_pipeline.retrieve.terms import (
    MAX_FORMS_PER_WORD,
    content_terms,
    expand_terms,
    lucene_escape,
    or_query,
    stem,
    stems,
    word_forms,
    words,
)


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


# --- word forms (query-side stemming, issue 11 §6) -----------------------------------------


def test_plural_and_singular_expand_to_each_other():
    assert word_forms("marathons")[:2] == ["marathons", "marathon"]
    assert "marathons" in word_forms("marathon")
    for plural, singular in [("dogs", "dog"), ("boxes", "box"), ("buses", "bus"), ("gas", "gas")]:
        assert singular in word_forms(plural), plural
    assert "buses" in word_forms("bus") and "gases" in word_forms("gas")


def test_ies_and_y_forms():
    assert {"study", "studies", "studied", "studying"} <= set(word_forms("studies"))
    assert {"city", "cities"} <= set(word_forms("city"))
    assert {"party", "parties", "partied"} <= set(word_forms("party"))


def test_ing_and_ed_forms_including_silent_e_and_doubled_consonants():
    assert {"hike", "hiked", "hikes"} <= set(word_forms("hiking"))
    assert {"hiking", "hiked"} <= set(word_forms("hike"))
    assert {"arrive", "arrives", "arriving"} <= set(word_forms("arrived"))
    assert {"run", "running", "runs"} <= set(word_forms("run"))
    assert {"stop", "stopping", "stops"} <= set(word_forms("stopped"))
    assert {"cook", "cooked", "cooks"} <= set(word_forms("cooking"))


def test_every_generated_form_stems_back_to_the_word_s_stem_or_is_a_plural_pair():
    """No false friend: "car" must not pull in "cared"/"caring" (stem "care")."""
    assert not {"cared", "caring", "cares"} & set(word_forms("car"))
    for word in ["car", "marathons", "studies", "hiking", "arrived", "stopped", "weddings"]:
        root = stem(word)
        for form in word_forms(word)[2:]:
            assert stem(form) == root, (word, form)


def test_word_forms_are_deterministic_distinct_and_bounded():
    for word in ["marathons", "visited", "potatoes", "golden", "retriever", "studies"]:
        forms = word_forms(word)
        assert forms == word_forms(word)
        assert len(forms) == len(set(forms)) <= MAX_FORMS_PER_WORD
        assert forms[0] == word
        assert len(word_forms(word, max_forms=3)) <= 3
    assert word_forms("marathons", max_forms=1) == ["marathons"]


def test_digits_short_and_mixed_words_are_not_expanded():
    assert word_forms("3") == ["3"]
    assert word_forms("2023") == ["2023"]
    assert word_forms("tv") == ["tv"]
    assert word_forms("w12") == ["w12"]


def test_expand_terms_keeps_source_order_drops_duplicates_and_bounds_the_query():
    terms = expand_terms(["marathons", "marathon", "run"])
    assert terms[: len(word_forms("marathons"))] == word_forms("marathons")
    assert len(terms) == len(set(terms))
    assert terms.index("marathon") < terms.index("run") < terms.index("running")
    # max_terms bounds the source words, MAX_FORMS_PER_WORD each one's forms.
    question = " ".join(f"walked{chr(97 + i)}xyz hiking{i}" for i in range(40))
    source = content_terms(question, max_terms=10)
    assert len(source) == 10
    assert len(expand_terms(source)) <= 10 * MAX_FORMS_PER_WORD


def test_expanded_query_is_escaped_and_or_ed():
    query = or_query(expand_terms(content_terms("How many marathons did I run?")))
    clauses = query.split(" OR ")
    assert clauses[:2] == ["marathons", "marathon"]
    assert {"run", "runs", "running"} <= set(clauses)
    # Forms that are not plain words go through lucene_escape like any term.
    assert or_query(expand_terms(["c++", "AND", "a:b"])).split(" OR ")[:1] == ["c\\+\\+"]
    assert "a\\:b" in or_query(expand_terms(["a:b"]))
    assert "AND" not in or_query(expand_terms(["AND"])).split(" OR ")


def test_stems_match_word_forms_for_the_reader():
    assert stems(words("I ran my first marathon")) & stems(content_terms("marathons?"))
    assert stems(["3", "tv"]) == {"3", "tv"}
