"""Words of a question: what the full-text query searches for and what the offline reader matches.

One tokenizer for both, so "the passage the reader picks" and "the passages the index ranks"
are judged by the same words. Deliberately simple: lower-cased Unicode word characters, English
stopwords dropped, order of first occurrence kept (deterministic queries, stable cache keys).

Word forms are matched on the QUERY side, the same way on every backend: the full-text
indexes' analyzers differ (ArcadeDB's Lucene, Memgraph's Tantivy) and neither stems, so a
question about "marathons" would not find "I ran my first marathon". `word_forms` stems a
content word with Snowball's English (Porter2) stemmer and expands it into the word itself, its
stem and the common English inflections of the stem (-s, -es, -ed, -ing, -y/-ies/-ied/-ying,
silent -e, a doubled final consonant), keeping only candidates that stem back to the same
stem, i.e. exactly the forms an English stemming analyzer would conflate with the word. The
list is ordered and bounded (`MAX_FORMS_PER_WORD`); `expand_terms` concatenates the forms of
each source word in order, without duplicates. A candidate that is not an English word costs one
query clause and matches nothing.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from importlib.metadata import version as _package_version

import snowballstemmer

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


# --- word forms (query-side stemming) -----------------------------------------------------

STEMMER = "snowball-english"
STEMMER_PACKAGE = f"snowballstemmer=={_package_version('snowballstemmer')}"
# Forms per source word, the word and its stem included: bounds the query at
# max_terms * MAX_FORMS_PER_WORD clauses (32 * 8 = 256, under Lucene's default of 1024).
MAX_FORMS_PER_WORD = 8
# Shorter words are left alone: stemming "tv" or "us" only invents noise.
MIN_STEM_LENGTH = 3

_VOWELS = frozenset("aeiouy")
_SIBILANTS = ("s", "x", "z", "ch", "sh")
# The Snowball stemmer keeps state while it works: one call at a time.
_stemmer = snowballstemmer.stemmer("english")
_stemmer_lock = threading.Lock()


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """Snowball English (Porter2) stem of a lower-case word."""
    with _stemmer_lock:
        return _stemmer.stemWord(word)


def _expandable(word: str) -> bool:
    return word.isalpha() and len(word) >= MIN_STEM_LENGTH


def _candidates(root: str) -> list[str]:
    """Common English inflections of a stem, most useful first (may include non-words)."""
    if root.endswith("i") and len(root) > 2:  # Porter2 turns a final consonant+y into i
        base = root[:-1]
        return [base + "y", root + "es", root + "ed", base + "ying"]
    if root.endswith("e"):
        return [root + "s", root + "d", root[:-1] + "ing"]
    if root.endswith(_SIBILANTS):
        out = [root + "es", root + "ed", root + "ing"]
    else:
        out = [root + "s", root + "ed", root + "ing"]
        if root.endswith("o"):
            out.append(root + "es")
    # Porter2 drops a silent final e ("arrive" -> "arriv"): put it back.
    out += [root + "e", root + "es"]
    last = root[-1]
    if (
        len(root) <= 6
        and last not in _VOWELS
        and last not in "wx"
        and root[-2] in _VOWELS
        and root[-3:-2] not in _VOWELS
    ):  # consonant-vowel-consonant: "run" -> "running", "stop" -> "stopped"
        out += [root + last + "ing", root + last + "ed"]
    return out


def _plural_pair(word: str, root: str) -> list[str]:
    """The other half of a sibilant plural the stemmer does not conflate: "buses" <-> "bus"
    (Porter2 stems "buses" to "buse"). Pure spelling, so not checked against the stem."""
    if word.endswith("es") and word[:-2].endswith(_SIBILANTS) and len(word) - 2 >= 3:
        return [word[:-2]]
    if root.endswith(_SIBILANTS):
        return [root + "es"]
    return []


def word_forms(word: str, *, max_forms: int = MAX_FORMS_PER_WORD) -> list[str]:
    """`word`, its stem, then inflections of the stem that stem back to it; at most
    `max_forms`, in a fixed order, no duplicates. Digits, mixed and short words: `[word]`."""
    word = word.lower()
    if not _expandable(word) or max_forms <= 1:
        return [word]
    root = stem(word)
    forms: dict[str, None] = {word: None, root: None}
    for pair in _plural_pair(word, root):
        forms.setdefault(pair, None)
    if len(root) >= 2:
        for candidate in _candidates(root):
            if len(forms) >= max_forms:
                break
            if candidate not in forms and stem(candidate) == root:
                forms[candidate] = None
    return list(forms)[:max_forms]


def expand_terms(terms: list[str], *, max_forms: int = MAX_FORMS_PER_WORD) -> list[str]:
    """The forms of each term in turn, each form once (its first place): a stable query."""
    out: dict[str, None] = {}
    for term in terms:
        for form in word_forms(term, max_forms=max_forms):
            out.setdefault(form, None)
    return list(out)


def stems(tokens: list[str]) -> set[str]:
    """Stems of `tokens` (non-stemmable tokens as they are): for matching word forms."""
    return {stem(t) if _expandable(t) else t for t in tokens}
