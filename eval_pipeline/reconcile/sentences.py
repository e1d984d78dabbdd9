"""Sentence spans of a turn's text, by rules: deterministic, offline, good enough for chunking.

Spans (start, end) index into the original text, so a chunk or summary sentence can always be
traced back to its turn. Line breaks end a sentence too: LongMemEval assistant turns are full
of lists and markdown tables whose rows carry no final period (and `|` is just text here).
"""

from __future__ import annotations

import re

# A sentence ends at . ! ? or … (plus closing quotes/brackets) followed by space and anything
# but a lower-case letter (a capital, a digit, a quote, a table's `|`); or at a line break.
_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+[^\sa-z])|\n+")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc e.g i.e approx no fig inc ltd co corp mt ft dept "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_LAST_WORD = re.compile(r"([\w.]+)\.$")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Non-empty, stripped sentence spans of `text`, in order."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _END.finditer(text):
        end = match.end()
        if text[match.start()] == "." and _after_abbreviation(text, match.start() + 1):
            continue
        _add(spans, text, start, end)
        start = end
    _add(spans, text, start, len(text))
    return spans


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def _after_abbreviation(text: str, dot_end: int) -> bool:
    """True when the period ending at `dot_end` closes an abbreviation such as "Dr."."""
    head = text[max(0, dot_end - 12) : dot_end]
    match = _LAST_WORD.search(head)
    if not match:
        return False
    word = match.group(1).casefold().rstrip(".")
    # Single letters are initials ("J. R. R. Tolkien"), not sentence ends.
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _add(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    body = piece.lstrip()  # stripped once from each side: this runs for every sentence
    if not body:
        return
    first = start + len(piece) - len(body)
    spans.append((first, first + len(body.rstrip())))
