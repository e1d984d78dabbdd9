"""Offline answer proxies: normalised containment and SQuAD-style token F1.

These are *proxies* for answer correctness, useful when no judge model is configured. They
are not the LongMemEval judge protocol: a correct paraphrase can score 0 and a verbose answer
that mentions the right string next to wrong ones can score 1. Report them under their own
names, never as accuracy.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def _is_punctuation(ch: str) -> bool:
    # ASCII punctuation as SQuAD strips it (including symbols like $ and |), plus every
    # Unicode punctuation category so curly quotes and dashes do not block a match.
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


def normalize_answer(text: object) -> str:
    """Casefold, drop punctuation and English articles, collapse whitespace.

    Accepts any object because upstream answers are sometimes numbers.
    """
    s = unicodedata.normalize("NFKC", str(text)).casefold()
    s = "".join(ch for ch in s if not _is_punctuation(ch))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def containment_proxy(expected: object, hypothesis: str | None) -> float | None:
    """1.0 if the normalised expected answer appears in the normalised hypothesis.

    Matches whole words only, so "10" is not found inside "100". None when the expected
    answer normalises to nothing (nothing to look for).
    """
    needle = normalize_answer(expected)
    if not needle:
        return None
    haystack = normalize_answer(hypothesis or "")
    return 1.0 if f" {needle} " in f" {haystack} " else 0.0


def token_f1_proxy(expected: object, hypothesis: str | None) -> float | None:
    """SQuAD token F1 between normalised answers; None when the expected answer is empty."""
    gold = normalize_answer(expected).split()
    if not gold:
        return None
    pred = normalize_answer(hypothesis or "").split()
    common = Counter(gold) & Counter(pred)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def answer_proxies(expected: object, hypothesis: str | None) -> dict[str, float | None]:
    return {
        "proxy_containment": containment_proxy(expected, hypothesis),
        "proxy_token_f1": token_f1_proxy(expected, hypothesis),
    }
