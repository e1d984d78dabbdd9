"""The offline reader: one sentence of the retrieved context that answers, or an abstention.

No model, deterministic. What it does, in order:

1. **Labels off.** A context string may start with the retriever's label, `[2023-05-30 23:40,
   user]` or `[2023-05-30 23:40, superseded 2023-06-02]` (`retrieve.fulltext`,
   `retrieve.arms`): the label is read (its date, whether the passage was superseded) and
   stripped, so a timestamp never reaches the answer.
2. **Sentences.** Each passage is cut into sentences (line breaks, then `.`, `!`, `?` before
   a word that does not start in lower case; a sentence ending in `:` joins the one it
   announces, a bare list marker joins its item).
3. **The answering sentence.** A sentence is a candidate when it shares at least two of the
   question's content words (one, for a one-word question), compared by stem as the
   full-text query matches them (`retrieve.terms`), and it can state an answer: it is not a
   question and it says something the question does not (a content word outside it). The
   most shared words win; a tie goes to a current passage over a superseded one, then — when
   the question asks about the present ("now", "current", ...) — to the newest dated passage,
   then to the rarer shared words (IDF over the context's sentences: a word in every sentence
   tells none apart), then to the better-ranked passage, then to the earlier sentence.
4. **A span, not a paragraph.** A sentence longer than `MAX_WORDS` is narrowed to its run of
   clauses (within `MAX_WORDS`) sharing the most question words, with the clause after it when
   the run says nothing the question does not (the answer often follows the words it answers).

No candidate: the fixed abstention sentence. One sentence is all it can give, so what takes
several (a count across sessions, a total, an order of events) or arithmetic on dates is
beyond it: such questions fail at the reader, which the reference arms' ceiling shows
(`score.attribution`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from eval_pipeline.retrieve.terms import content_terms, stems, words

ABSTENTION = "I don't know: nothing in the retrieved memory answers this question."
EXTRACTIVE_LABEL = "offline:extractive"
# The longest answer, in words: a sentence beyond it is narrowed to its answering clauses.
MAX_WORDS = 30

# The retrievers' label: a date (and time), a role and/or a superseded mark, in brackets.
_LABEL = re.compile(
    r"^\s*\[(?P<label>(?:\d{4}-\d{2}-\d{2}|user|assistant|system|superseded)[^\[\]\n]{0,80})\]\s*"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2})?")
_ROLES = frozenset({"user", "assistant", "system"})
# A sentence ends at . ! ? (or their CJK forms), closing quotes or brackets after it, before
# a space and a word that does not start in lower case ("7 a.m. sharp" is one sentence).
_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])[\"'\u2019\u201d)\]]*\s+(?=[^\sa-z])")
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,2}|[a-zA-Z])[.)]$|^\s*[-*\u2022]$")
_CLAUSE_END = re.compile(r"(?<=[,;:\u2014\u2013])\s+|\s+(?=[\u2014\u2013]\s)")
# The question asks for the present state: the newest statement wins a tie.
_PRESENT = frozenset({"now", "current", "currently", "still", "latest", "nowadays", "today"})


@dataclass(frozen=True)
class Passage:
    """A context string without its label, with what the label said."""

    text: str
    date: str | None  # "2023-05-30 23:40" (or just the day), None: no dated label
    role: str | None  # "user" | "assistant" | "system", None: not labelled
    superseded: bool


def read_label(text: str) -> Passage:
    """The passage's text with its retriever label stripped, and the label's parts: date,
    speaker, superseded mark (`[when, who, superseded <date>]`, each part optional)."""
    m = _LABEL.match(text)
    if m is None:
        return Passage(text.strip(), None, None, False)
    parts = [p.strip() for p in m["label"].split(",")]
    date = next((p for p in parts if _DATE.fullmatch(p)), None)
    role = next((p for p in parts if p in _ROLES), None)
    superseded = any(p.startswith("superseded") for p in parts)
    return Passage(text[m.end() :].strip(), date, role, superseded)


def sentences(text: str) -> list[str]:
    """The sentences of a passage, in order (see the module doc for where it cuts)."""
    parts: list[str] = []
    for line in text.splitlines():
        for part in _SENTENCE_END.split(line.strip()):
            part = part.strip()
            if not part:
                continue
            if parts and _LIST_MARKER.match(parts[-1]):
                parts[-1] = f"{parts[-1]} {part}"  # a list marker and its item
            else:
                parts.append(part)
    out: list[str] = []
    for part in parts:
        if out and out[-1].endswith(":"):
            out[-1] = f"{out[-1]} {part}"  # an announcement and what it announces
        else:
            out.append(part)
    return out


def _shared(sentence: str, wanted: set[str]) -> set[str]:
    return wanted & stems(words(sentence))


def _says_more(sentence: str, wanted: set[str]) -> bool:
    """A content word the question does not have: the sentence can carry an answer."""
    return bool(stems(content_terms(sentence, max_terms=1_000)) - wanted)


def _is_question(sentence: str) -> bool:
    return sentence.rstrip("\"'\u2019\u201d) ").endswith(("?", "\uff1f"))


def _weights(passages: list[list[str]], wanted: set[str]) -> dict[str, float]:
    """Each question stem's weight across the context's sentences, ln(1 + n / df): a word
    in every sentence tells none apart."""
    bags = [_shared(s, wanted) for sentences_ in passages for s in sentences_]
    n = len(bags)
    return {w: math.log(1 + n / df) for w in wanted if (df := sum(w in b for b in bags))}


def _score(text: str, wanted: set[str], weights: dict[str, float]) -> tuple[int, float]:
    shared = _shared(text, wanted)
    return len(shared), sum(weights.get(w, 0.0) for w in shared)


def narrow(
    sentence: str,
    wanted: set[str],
    weights: dict[str, float] | None = None,
    max_words: int = MAX_WORDS,
) -> str:
    """A sentence of at most `max_words` words as it is; a longer one narrowed to the run of
    clauses, within `max_words`, sharing the most question words (then the most weight, then
    the fewest words, the first on a tie), with the clause after it when the run itself says
    nothing the question does not; a single clause too long is cut."""
    if len(sentence.split()) <= max_words:
        return sentence
    clauses = [c.strip() for c in _CLAUSE_END.split(sentence) if c.strip()]
    best: tuple | None = None
    span = (0, 1)
    for a in range(len(clauses)):
        for b in range(a + 1, len(clauses) + 1):
            text = " ".join(clauses[a:b])
            size = len(text.split())
            if size > max_words and b > a + 1:
                break
            key = (*_score(text, wanted, weights or {}), -size, -a)
            if best is None or key > best:
                best, span = key, (a, b)
    a, b = span
    if b < len(clauses) and not _says_more(" ".join(clauses[a:b]), wanted):
        b += 1
    words_ = " ".join(clauses[a:b]).split()
    return " ".join(words_[:max_words]).rstrip(",;:\u2014\u2013 ")


def best_sentence(
    question: str, context: list[str], *, min_shared: int = 2
) -> tuple[int, str] | None:
    """(index of the passage, its answering sentence) by the rules of the module doc; None
    when no sentence qualifies. `min_shared` is lowered to the question's own number of
    content words when it has fewer."""
    wanted = stems(content_terms(question, max_terms=1_000))
    if not wanted:
        return None
    need = min(min_shared, len(wanted))
    present = bool(_PRESENT & set(words(question)))
    passages = [read_label(raw) for raw in context]
    split = [sentences(p.text) for p in passages]
    weights = _weights(split, wanted)
    best: tuple | None = None
    found: tuple[int, str] | None = None
    for i, (passage, sentences_) in enumerate(zip(passages, split, strict=True)):
        for j, sentence in enumerate(sentences_):
            shared, weight = _score(sentence, wanted, weights)
            if shared < need or _is_question(sentence) or not _says_more(sentence, wanted):
                continue
            # Larger is better, field by field (the newest date only when asked for "now").
            when = (passage.date or "") if present else ""
            key = (shared, not passage.superseded, when, weight, -i, -j)
            if best is None or key > best:
                best, found = key, (i, sentence)
    if found is None:
        return None
    i, sentence = found
    return i, narrow(sentence, wanted, weights)


class ExtractiveReader:
    """The sentence of the retrieved context that answers (`best_sentence`), else ABSTENTION."""

    label = EXTRACTIVE_LABEL
    sends_prompt = False  # no model, no prompt: the date check does not apply

    def answer(self, question: str, question_date: str, context: list[str]) -> str:
        found = best_sentence(question, context)
        return ABSTENTION if found is None else found[1]


__all__ = [
    "ABSTENTION",
    "EXTRACTIVE_LABEL",
    "ExtractiveReader",
    "best_sentence",
    "narrow",
    "read_label",
    "sentences",
]
