"""The facts the extraction's shortcuts rely on (issue 29): each one only skips work whose
result was already known, so the entities, sentences and values stay exactly the same."""

from __future__ import annotations

import random
import re
import sys

from eval_pipeline.reconcile import entity_rules, gazetteer, value_rules

from .sessions import CAFE, RUNNING, TRIP


def _texts() -> list[str]:
    rng = random.Random(29)
    pieces = [*"aAzZ éÉßÿǅ²1_'’.&-\n.!?:;\"“(*#|[ 東京Σσﬁ\u00a0", "the", "of", "Of", "Dr.", "Mſ.",
              "de", "iPhone 14", "x-Men", "-of-", "'the", "Bank", "yesterday", "Today",
              "last week", "two hours", "ayesterday", "_today", "3 days ago"]  # fmt: skip
    texts = [text for turns in (TRIP, RUNNING, CAFE) for _, text in turns]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    return texts


def test_the_character_classes_mean_what_the_scan_assumes():
    # `[^\W_]` is `str.isalnum`, and every letter the scan skips as lower-case is lower-case.
    assert all(c.islower() and c.isalnum() for c in "abcxyzßàöøÿ")
    assert re.fullmatch(f"[{entity_rules._LOWER}]+", "abcxyzßàöøÿ")
    assert not re.search(f"[{entity_rules._LOWER}]", "÷ABZÀÖØÞ0_")
    word_char = re.compile(r"[^\W_]")
    folds_to_title = []
    for c in map(chr, range(sys.maxunicode + 1)):
        assert bool(word_char.match(c)) == c.isalnum(), hex(ord(c))
        if c.casefold() in gazetteer.PERSON_TITLES:
            folds_to_title.append(c)
    assert folds_to_title == []  # so a title is two characters or more


def _reference_candidates(text: str) -> list[tuple[int, int]]:
    """The words the per-word loop kept before `_SCAN`: every `_WORD`, judged in Python."""
    kept = []
    for match in entity_rules._WORD.finditer(text):
        word = match.group()
        first = word[0]
        if first.islower() and word.islower() and word not in entity_rules._CONNECTORS:
            continue
        if first.islower() or first.isupper() or first.isdigit():
            kept.append(match.span())
    return kept


def test_the_scan_keeps_exactly_the_words_the_per_word_loop_kept():
    for text in _texts():
        tokens = entity_rules._tokens(text, [])
        assert [(t.start, t.end) for t in tokens] == _reference_candidates(text), text
        for t in tokens:  # the gap before each word is the run of non-alphanumerics
            gap_start = t.start
            while gap_start > 0 and not text[gap_start - 1].isalnum():
                gap_start -= 1
            if "\n" in text[gap_start : t.start] or gap_start == 0:
                assert t.initial, text


def test_word_start_patterns_match_as_with_their_leading_boundary():
    for pattern in value_rules._AT_WORD_START:
        with_boundary = re.compile(r"\b" + pattern.pattern)
        for text in _texts():
            expected = [m.span() for m in with_boundary.finditer(text)]
            got = [m.span() for m in value_rules._word_start_matches(pattern, text)]
            assert got == expected, text
    assert len(value_rules._AT_WORD_START) == 2


def test_gates_find_something_wherever_their_pattern_matches():
    for text in _texts():
        for pattern, gates, _ in value_rules._RULES:
            if pattern.search(text):  # also where the pattern with its `\b` would match
                assert all(gate.search(text) for gate in gates), (pattern.pattern, text)
