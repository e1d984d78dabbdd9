"""Extractive episode summary: the session's most representative sentences, in session order.

Score = how often the sentence's content words recur across the session (what the session is
about), divided by the square root of its length (so long sentences do not win by size),
plus a bonus per entity it names. User sentences get a small boost: LongMemEval questions ask
about what the user said. Ties break by position, so the result is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import filterfalse

_WORDS = re.compile(r"[^\W\d_]{3,}")
_STOPWORDS = frozenset(
    """
    the and for that this with you your are was were have has had not but can could would
    should will just about from they them their there here what when where which who how
    also been being into than then some any all its it's i'm i've i'll don't doesn't didn't
    very really more most much many such like well get got make made know think want need one
    two out our ours his her hers him she he we us my me mine yours let's sure yes okay thanks
    thank great good help please hope able may might use used using way things thing lot
    """.split()
)
USER_BOOST = 1.25
ENTITY_BONUS = 0.5
MAX_SENTENCE_CHARS = 300
MIN_CONTENT_WORDS = 3


@dataclass(frozen=True)
class Sentence:
    position: int
    turn_id: str
    role: str
    text: str
    entity_count: int


def content_words(text: str) -> list[str]:
    return list(filterfalse(_STOPWORDS.__contains__, _WORDS.findall(text.casefold())))


def summarise(sentences: list[Sentence], max_sentences: int) -> list[Sentence]:
    """The top `max_sentences` sentences by score, returned in their session order."""
    if max_sentences <= 0 or not sentences:
        return []
    words_of = [content_words(s.text) for s in sentences]
    distinct_of = [set(words) for words in words_of]
    frequency = Counter(w for distinct in distinct_of for w in distinct)

    def score(i: int) -> float:
        words = words_of[i]
        if len(words) < MIN_CONTENT_WORDS or sentences[i].text.lstrip().startswith("|"):
            return 0.0  # fragments and table rows say little on their own
        base = sum(map(frequency.__getitem__, distinct_of[i])) / math.sqrt(len(words))
        base += ENTITY_BONUS * sentences[i].entity_count
        return base * (USER_BOOST if sentences[i].role == "user" else 1.0)

    scores = [score(i) for i in range(len(sentences))]  # once each: the sort and the cut share them
    ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
    chosen = sorted(i for i in ranked[:max_sentences] if scores[i] > 0)
    return [sentences[i] for i in chosen]


def clip(text: str, limit: int = MAX_SENTENCE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
