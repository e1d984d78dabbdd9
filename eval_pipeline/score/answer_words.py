"""Words of an answer: the content words of a reference (stop words, numbers and units
left out, light stemming) and how much of them a response holds (`coverage`)."""

from __future__ import annotations

import re

from eval_pipeline.score.answer_values import (
    MONTHS,
    ORDINALS,
    SMALL,
    TENS,
    normalise,
    unit_of,
)

_STOP = frozenset(
    """a an the and or of to in on at for from by with about as is are was were be been being
    it its this that these those there their they them he she his her him you your yours i me
    my mine we our us do did does done have has had having will would can could should may
    might must shall what which who whom whose when where why how than then so such very just
    also only some any all each both few more most other into over under again further once
    here out up down off own same too s t not no nor yes user users assistant answer per each
    every
    correct response approximately about around roughly total overall currently ago
    """.split()
)  # fmt: skip


WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def content_words(text: str) -> set[str]:
    """The reference's words that carry its content (no stop words, numbers or units)."""
    t = normalise(text)
    out = set()
    for w in WORD.findall(t):
        w = w.split("'")[0]
        if w in _STOP or w in ("am", "pm") or re.fullmatch(r"\d+(?:st|nd|rd|th)?", w):
            continue
        if unit_of(w) or w in SMALL or w in TENS or w in ("half", "quarter", "dozen"):
            continue
        if w in MONTHS or w in ORDINALS or len(w) < 2:
            continue
        out.add(stem(w))
    return out


def word_found(word: str, response_words: set[str]) -> bool:
    if word in response_words:
        return True
    # A longer form of the same word ("vegan" / "veganism"), never a short fragment.
    return len(word) >= 5 and any(r.startswith(word) or word.startswith(r) and len(r) >= 5
                                  for r in response_words)  # fmt: skip


def words_in(text: str) -> set[str]:
    return {stem(w.split("'")[0]) for w in WORD.findall(normalise(text))}


def coverage(words: set[str], matched: list[bool], response: str) -> float:
    have = words_in(response)
    found = sum(1 for w in words if word_found(w, have)) + sum(matched)
    total = len(words) + len(matched)
    return found / total if total else 0.0
