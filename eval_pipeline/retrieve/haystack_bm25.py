"""BM25 over one question's haystack, computed here from its rows (ranking `haystack`).

Why: a question's memory is its own haystack (a few hundred turns; LongMemEval's retrieval
study scores within it), but the full-text engine ranks across every user's turns and the
haystack filter runs after it, so at LongMemEval_S scale (~200k turns) one 20-term OR query
costs about a second whatever the haystack. Reading the haystack's few hundred texts and
scoring them here is a fixed, small cost, the same on every backend.

The statistics are the haystack's own, per source (turns, chunks, facts, episodes apart), and
are stated in the pins (`PINS`) and per question (`HaystackStats`): N = the source's nodes in
the haystack, df(t) = how many of them contain term t, avgdl = their mean length in tokens.
Score of a node for the query's distinct terms:

    sum_t idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

(Lucene's BM25 with k1 = 1.2, b = 0.75, but exact lengths, not Lucene's one-byte norms.)
Tokens: `terms.words` (lower-cased Unicode word characters), the tokenizer the query terms come
from, so a query form and a text token are compared as equal strings. Ties: score descending,
then id, as the engine path orders its rows.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

K1 = 1.2
B = 0.75
PINS: dict[str, Any] = {
    "ranking": "haystack",
    "model": "bm25",
    "k1": K1,
    "b": B,
    "idf": "ln(1 + (N - df + 0.5) / (df + 0.5))",
    "statistics": "per question haystack and source: N, df, avgdl in tokens",
    "tokenizer": r"lower-cased \w+ (retrieve.terms.words)",
}

_WORD = re.compile(r"\w+", re.UNICODE)  # `terms.words`' pattern, each match then lower-cased


def token_counts(text: str) -> tuple[int, Counter[str]]:
    """(length in tokens, count per token) of `text`, tokens exactly as `terms.words` makes
    them; one regex pass and C-level counting (this runs on every haystack text)."""
    tokens = _WORD.findall(text)
    return len(tokens), Counter(map(str.lower, tokens))


@dataclass(frozen=True)
class HaystackStats:
    """The corpus statistics one source's ranking used, for the trace."""

    documents: int
    avgdl: float
    matched: int  # documents with at least one query term

    def describe(self, kind: str) -> str:
        return (
            f"bm25 over the haystack's {kind}s: N={self.documents}, "
            f"avgdl={self.avgdl:.1f} tokens, {self.matched} matched"
        )


def rank(
    docs: list[tuple[str, str]], query_terms: list[str], k: int
) -> tuple[list[dict[str, Any]], HaystackStats]:
    """The top k `{id, score}` of `docs` (id, text) for the query terms (score > 0 only),
    score descending then id; and the statistics used."""
    terms = list(dict.fromkeys(t.lower() for t in query_terms if t))
    lengths: list[int] = []
    counts: list[dict[str, int]] = []
    df: Counter[str] = Counter()
    for _, text in docs:
        length, tokens = token_counts(text or "")
        lengths.append(length)
        hits = {t: tokens[t] for t in terms if t in tokens}
        counts.append(hits)
        df.update(hits.keys())
    n = len(docs)
    avgdl = (sum(lengths) / n) if n else 0.0
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms if df[t]}
    scored: list[dict[str, Any]] = []
    for (doc_id, _), dl, hits in zip(docs, lengths, counts, strict=True):
        if not hits:
            continue
        norm = K1 * (1 - B + B * dl / avgdl) if avgdl else K1
        score = sum(idf[t] * tf * (K1 + 1) / (tf + norm) for t, tf in hits.items())
        scored.append({"id": doc_id, "score": score})
    scored.sort(key=lambda p: (-p["score"], str(p["id"])))
    return scored[:k], HaystackStats(documents=n, avgdl=avgdl, matched=len(scored))
