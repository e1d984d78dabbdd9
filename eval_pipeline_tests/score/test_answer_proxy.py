"""Offline answer proxies against hand-computed cases."""

from __future__ import annotations

import pytest

from eval_pipeline.score.answer_proxy import (
    answer_proxies,
    containment_proxy,
    normalize_answer,
    token_f1_proxy,
)


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The  Quick, brown fox!", "quick brown fox"),
        ("An apple a day", "apple day"),
        ("Theatre", "theatre"),  # articles only as whole words
        ("“Don’t” — stop…", "dont stop"),
        ("$1,200 | total", "1200 total"),
        (42, "42"),
        ("STRASSE / Straße", "strasse strasse"),
        ("   ", ""),
    ],
)
def test_normalize(raw: object, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


def test_containment() -> None:
    assert containment_proxy("Blue", "I think it was blue.") == 1.0
    assert containment_proxy("the Eiffel Tower", "They met at eiffel tower!") == 1.0
    assert containment_proxy(10, "It cost 100 dollars") == 0.0  # whole words only
    assert containment_proxy(10, "about 10 dollars") == 1.0
    assert containment_proxy("New York", "York, New") == 0.0
    assert containment_proxy("red", "") == 0.0
    assert containment_proxy("red", None) == 0.0
    assert containment_proxy("", "anything") is None
    assert containment_proxy("the", "anything") is None  # normalises to nothing


def test_token_f1() -> None:
    # gold [new, york, city], pred [in, new, york]: overlap 2, P = R = 2/3.
    assert token_f1_proxy("New York City", "in New York") == pytest.approx(2 / 3)
    assert token_f1_proxy("blue", "Blue.") == 1.0
    assert token_f1_proxy("blue", "green") == 0.0
    assert token_f1_proxy("blue", None) == 0.0
    # Repeated tokens count by multiplicity: gold [a1, a1], pred [a1]: P = 1, R = 1/2.
    assert token_f1_proxy("a1 a1", "a1") == pytest.approx(2 / 3)
    assert token_f1_proxy("", "x") is None


def test_answer_proxies_names_say_proxy() -> None:
    # pred [it, is, blue, sky]: P = 1/4, R = 1, F1 = 0.4.
    assert answer_proxies("blue", "it is blue sky") == {
        "proxy_containment": 1.0,
        "proxy_token_f1": pytest.approx(0.4),
    }
