"""Words of a question: what the full-text query searches for and what the offline reader matches.

One tokenizer for both, so "the passage the reader picks" and "the passages the index ranks"
are judged by the same words. Deliberately simple: lower-cased Unicode word characters, English
stopwords dropped, order of first occurrence kept (deterministic queries, stable cache keys).
"""

from __future__ import annotations

import re

# Words too common to tell passages apart. Question words and auxiliaries are in because every
# LongMemEval question has them ("what", "did", "when"); negations are in because the index has
# no notion of them anyway.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having
    he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm
    i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor not
    of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's
    when when's where where's which while who who's whom why why's with won't would wouldn't
    you you'd you'll you're you've your yours yourself yourselves
    also just will shall may might must get got tell told know remember recall mentioned
    mention said say ago previously earlier last ever many much
    d ll m re s t ve
    """.split()
)

_WORD = re.compile(r"\w+", re.UNICODE)

# Lucene's query-syntax characters; `&&` and `||` are covered by escaping each `&` and `|`.
_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')
# Upper-case words the Lucene and Tantivy parsers read as operators, not terms.
_OPERATORS = frozenset({"AND", "OR", "NOT", "TO"})


def words(text: str) -> list[str]:
    """Every lower-cased word of `text`, in order, duplicates kept."""
    return [w.lower() for w in _WORD.findall(text)]


def content_terms(text: str, *, max_terms: int = 32) -> list[str]:
    """Distinct non-stopword words of `text` in order of first occurrence, at most `max_terms`.

    Single letters are dropped (the tokenizer splits "Dr." and "U.S." into them); digits are
    kept whatever their length, since "3" in "3 days" can be the whole point.
    """
    seen: dict[str, None] = {}
    for word in words(text):
        if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
        if len(seen) >= max_terms:
            break
    return list(seen)


def lucene_escape(term: str) -> str:
    """One term, safe to place in a Lucene (or Tantivy) query string as a plain word."""
    escaped = _LUCENE_SPECIAL.sub(r"\\\1", term)
    if escaped.upper() in _OPERATORS and escaped.isupper():
        return escaped.lower()
    return escaped


def or_query(terms: list[str]) -> str:
    """A disjunction of escaped terms ("" when there are none): any term may match, BM25 ranks."""
    return " OR ".join(lucene_escape(t) for t in terms if t)
