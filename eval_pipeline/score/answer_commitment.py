"""What a response commits to: the rules that read whether a response that names the
reference also gives it as its answer (`score.answer_match` calls them).

- a yes/no reference is answered by the response's own yes or no (`polarity_verdict`);
- an either/or question ("Which came first, A or B?", "Did I go with A or B?") by the option
  the response chooses; naming both and choosing neither is no answer (`option_verdict`);
- a question about order by the reference's items in the response's order (`order_verdict`);
- the reference is not given when it is only one of several candidates ("Max, Bella or
  Rocky"; "8 to 9 am"; "it's one of those"), part of another name ("New York" for York),
  denied ("it wasn't Target"), what was true before an update ("you moved from A to B"), a
  guess after a refusal, or inside evidence pasted without a conclusion (`uncommitted`);
- what a response asserts outside its refusals and its questions back (`asserted_coverage`),
  and a transcript handed back as the answer (`pasted`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from eval_pipeline.score.answer_cues import (
    GUESS,
    NEGATION,
    REFUSAL,
)
from eval_pipeline.score.answer_values import (
    Quantity,
    comparable,
    near,
    normalise,
    quantities,
    same_value,
)
from eval_pipeline.score.answer_words import (
    WORD,
    content_words,
    coverage,
    stem,
    word_found,
)


class Settled(NamedTuple):
    """A verdict one of these rules reached (None: it needs reading), why, and the coverage
    it stands for."""

    verdict: str | None
    rule: str
    coverage: float


_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


_LEAD_IN = re.compile(
    r"^\W*(?:(?:based\s+on|according\s+to|from|looking\s+at|after\s+(?:reviewing|checking))"
    r"\b[^,.:]{0,80}[,:]\s*)?",
    re.IGNORECASE,
)


def polarity_verdict(reference: str, final: str, response: str) -> Settled | None:
    """A yes/no reference ("Yes.", "No, you ..."): the response's own yes or no decides, the
    first one its conclusion opens a sentence with, else the first in the whole response."""
    ref = _YES_NO.match(reference)
    if ref is None:
        return None
    for text in (final, response):
        for sentence in re.split(r"(?<=[.!?:\n])\s+", plain_text(text)):
            said = _YES_NO.match(_LEAD_IN.sub("", sentence, count=1))
            if said is not None:
                same = said[1].lower() == ref[1].lower()
                return Settled("yes" if same else "no", f"yes/no answer: {said[1].lower()}",
                             float(same))  # fmt: skip
    return None


# "Which did I do first, A or B?": the options the question offers (a response restates both).
_OPTIONS = re.compile(
    r"[,:]\s*(?:the\s+|my\s+|a\s+)?(?P<a>[^,?]{2,80}?)\s*,?\s+or\s+"
    r"(?:the\s+|my\s+|a\s+)?(?P<b>[^,?]{2,80}?)\s*\??\s*$",
    re.IGNORECASE,
)


# "Did I go with the blue sofa or the green one in the end?": two noun phrases around "or".
_NOUN_OPTIONS = re.compile(
    r"\b(?:the|a|an|my|your)\s+(?P<a>[\w'&+ -]{1,40}?)\s+or\s+(?:the|a|an|my|your)\s+"
    r"(?P<b>[\w'&+ -]{1,40}?)\s*\?\s*$",
    re.IGNORECASE,
)


_EARLIER = re.compile(r"\b(?:first|earlier|before|sooner|initially|older|earliest)\b", re.I)


_LATER = re.compile(r"\b(?:last|later|after|most\s+recent(?:ly)?|latest|newer|recently|"
                    r"more\s+recent(?:ly)?|second)\b", re.I)  # fmt: skip


# Between two named options: words that put the first one earlier, or later.
_BEFORE_WORDS = re.compile(
    r"\b(?:before|earlier\s+than|prior\s+to|preceded|then|followed\s+by|first|earlier|"
    r"sooner)\b",
    re.I,
)


_AFTER_WORDS = re.compile(
    r"\b(?:after|later\s+than|following|later|more\s+recent(?:ly)?\s+than|newer\s+than)\b",
    re.I,
)


def _question_options(question: str) -> list[set[str]] | None:
    """The two options an either/or question offers, as content words ("..., the Ferrari
    model or the Japanese Zero?", "Did I go with the blue sofa or the green one?")."""
    q = question.strip()
    found = _OPTIONS.search(q)
    if found is not None:
        opts = [content_words(found["a"]), content_words(found["b"])]
    else:
        found = _NOUN_OPTIONS.search(_QUALIFIER.sub("", q.rstrip(" ?")) + "?")
        if found is None:
            return None
        opts = [content_words(found["a"]), content_words(found["b"])]
    # Each option by its own words: "the charity gala or the charity bake sale".
    opts = [opts[0] - opts[1], opts[1] - opts[0]]
    if not all(opts):
        return None
    return opts


# What trails the second option of an either/or question ("... or B in the end?").
_QUALIFIER = re.compile(
    r"\s+(?:in\s+the\s+end|now|first|these\s+days|currently|anymore|at\s+the\s+moment|"
    r"for\s+.*|on\s+.*|last\s+.*|this\s+.*)$",
    re.IGNORECASE,
)


def option_verdict(reference: str, text: str, question: str) -> Settled | None:
    """An either/or question ("Which came first, A or B?", "Did I go with A or B?"): the
    option the response chooses, compared with the one the reference names; a response that
    names both and chooses neither has not answered. None when the question offers no two
    options or the reference is neither."""
    opt_words = _question_options(question)
    if opt_words is None:
        return None
    temporal = bool(_EARLIER.search(question) or _LATER.search(question))
    asks_later = bool(_LATER.search(question)) and not _EARLIER.search(question)
    # The option the reference chooses; a reference that names both ("The neutering came
    # first; the switch was in March") is read as a response is.
    wanted = _chosen_option(normalise(reference), opt_words, asks_later, temporal)
    if wanted is None:
        ref_words = content_words(reference)
        own = [len(ref_words & w) / max(1, len(w)) for w in opt_words]
        if max(own) < 0.5 or own[0] == own[1]:
            return None
        wanted = 0 if own[0] > own[1] else 1
    resp = normalise(text)
    chosen = _chosen_option(resp, opt_words, asks_later, temporal)
    if chosen is None:
        named = [any(_first_place(c, w) is not None for c in _CLAUSE.split(resp)
                     if not REFUSAL.search(c)) for w in opt_words]  # fmt: skip
        if all(named):
            return Settled(None, "either/or: both options named, none chosen", 0.5)
        return None
    ok = chosen == wanted
    return Settled("yes" if ok else "no", "either/or: the option the response chose", float(ok))


def _chosen_option(
    text: str, opt_words: list[set[str]], asks_later: bool, temporal: bool = True
) -> int | None:
    """Which option the response chooses: for a question of time, the one its last sentence
    naming them puts first (or last); otherwise the one its last sentence naming exactly one
    asserts (not denied)."""
    for sentence in reversed(re.split(r"(?<=[.!?\n])\s+", text)):
        if REFUSAL.search(sentence):
            continue  # "I cannot tell whether A came before B" chooses nothing
        places = [_first_place(sentence, w) for w in opt_words]
        named = [i for i, p in enumerate(places) if p is not None]
        if not named:
            continue
        if not temporal:
            if len(named) == 1 and not _denied(sentence, opt_words[named[0]], []):
                return named[0]
            if len(named) == 2:
                return None
            continue
        if len(named) == 1:
            i = named[0]
            if _EARLIER.search(sentence) and not _LATER.search(sentence):
                return i if not asks_later else 1 - i
            if _LATER.search(sentence) and not _EARLIER.search(sentence):
                return i if asks_later else 1 - i
            continue
        first = 0 if places[0] < places[1] else 1  # type: ignore[operator]
        between = sentence[min(places) : max(places)]  # type: ignore[type-var]
        if _BEFORE_WORDS.search(between):
            earlier = first
        elif _AFTER_WORDS.search(between):
            earlier = 1 - first
        else:
            continue
        return (1 - earlier) if asks_later else earlier
    return None


def _predicate(sentence: str, opt_words: list[set[str]]) -> int | None:
    """The option a sentence naming both states as what it concludes: the one alone after its
    last "was"/"is" ("... between a bus and a train was a train")."""
    copulas = list(re.finditer(r"\b(?:was|is|were|are)\b", sentence))
    if not copulas:
        return None
    tail = sentence[copulas[-1].end() :]
    named = [i for i, w in enumerate(opt_words) if _first_place(tail, w) is not None]
    if len(named) != 1 or all(_first_place(sentence, w) is None for w in opt_words):
        return None
    head = sentence[: copulas[-1].start()]
    return named[0] if _first_place(head, opt_words[1 - named[0]]) is not None else None


def _word_places(text: str, word: str) -> list[tuple[int, int]]:
    """Where `word` (a content word, stemmed) occurs in `text` as a word of its own."""
    spans = []
    for m in WORD.finditer(text):
        if word_found(word, {stem(m.group().split("'")[0])}):
            spans.append(m.span())
    return spans


def _first_place(sentence: str, words: set[str]) -> int | None:
    """Where in `sentence` most of an option's content words first appear together."""
    if not words:
        return None
    spots = [p[0][0] for w in words if (p := _word_places(sentence, w))]
    return min(spots) if len(spots) * 2 >= len(words) else None


_ORDER_QUESTION = re.compile(
    r"\border\b|\bsequence\b|\bfirst\b[^?]*\bsecond\b|\bearliest\b[^?]*\blatest\b|"
    r"\bfirst\s+to\s+last\b",
    re.IGNORECASE,
)


_ORDER_SPLIT = re.compile(
    r",|;|\bthen\b|\bfollowed\s+by\b|\bfinally\b|\blastly\b|\band\b|\bafter\s+that\b|"
    r"\b(?:first|second|third|next)\b|\d+[.)]",
    re.IGNORECASE,
)


_ORDER_WORDS = frozenset({"first", "then", "finally", "last", "lastly", "next", "order", "later"})


def order_verdict(reference: str, text: str, question: str) -> Settled | None:
    """A question about the order of events: the reference's items must appear in the
    response's conclusion in the same order. None when the reference is not a list of three or
    more items, or an item cannot be found (the other rules read it)."""
    if not _ORDER_QUESTION.search(question) or REFUSAL.search(normalise(text)):
        return None
    head = re.split(r":\s+", reference, maxsplit=1)
    body = head[1] if len(head) == 2 else reference
    parts = [content_words(p) - _ORDER_WORDS for p in _ORDER_SPLIT.split(body)]
    parts = [w for w in parts if w]
    # Each item by its own words: what the items share ("attended", "concert") places none.
    items = [w - set().union(*(o for j, o in enumerate(parts) if j != i)) for i, w in
             enumerate(parts)]  # fmt: skip
    items = [w for w in items if w]
    if len(items) < 3 or len(items) != len(parts):
        return None
    resp = normalise(text)
    places = []
    for words in items:
        spots = [m.start() for w in words for m in [re.search(rf"\b{re.escape(w)}", resp)] if m]
        if len(spots) * 2 < len(words):
            return None
        places.append(min(spots))
    ok = all(a < b for a, b in zip(places, places[1:], strict=False))
    return Settled("yes" if ok else "no", "order: the reference's items in the response's order",
                 float(ok))  # fmt: skip


def plain_text(text: str) -> str:
    return re.sub(r"[*_`#]+", "", text).strip()


# Clause boundaries for reading what a response commits to.
_CLAUSE = re.compile(r"(?<=[.!?;:\n])\s+|\s+[-–—]\s+")


# A line of pasted evidence: a dated or quoted record ("- [2023-01-09] \"Standup is ...\"").
_EVIDENCE_LINE = re.compile(
    r"^[ \t]*(?:[-*•>][ \t]*)?(?:\[[^\]\n]*\d[^\]\n]*\]|\(?\d{4}[-/]\d{1,2}[-/]\d{1,2}\)?[:,]?|"
    r"[\"“]).*$",
    re.MULTILINE,
)


# A response that leaves the choice open ("it's one of those three").
_UNDECIDED = re.compile(
    r"\b(?:(?:one|any|either)\s+of\s+(?:those|these|them|the\s+(?:two|three|four|above))|"
    r"whichever\s+(?:one\s+)?(?:was|is)|(?:can't|cannot|couldn't)\s+(?:\w+\s+){0,2}(?:which|"
    r"for\s+(?:sure|certain))|not\s+sure\s+which|hard\s+to\s+say\s+which)\b"
)


_CANDIDATES = re.compile(r"\b(?:or|either|between|whether|one\s+of|somewhere|options?)\b")


_NEXT_TO_OR = re.compile(r"(?:\bor|\beither|\bbetween|,)\s*(?:the\s+|a\s+|an\s+|my\s+|your\s+)?$")


_OR_NEXT = re.compile(r"^\s*(?:,|\bor\b|\band\b)")


_NAME_CONTEXT = frozenset(
    {"the", "a", "an", "my", "your", "his", "her", "their", "our", "at", "in", "on", "to",
     "from", "with", "by", "for", "of", "and", "or", "it", "is", "was", "i", "you", "named",
     "called", "yes", "no", "so", "but", "mr", "mrs", "ms", "dr"}
)  # fmt: skip


def uncommitted(
    reference: str,
    response: str,
    words: set[str],
    ref_values: list[Quantity],
    off_by_one: bool,
    refused: bool,
) -> str | None:
    """Why a response that contains the reference does not commit to it (None: it does):
    the reference is one of several candidates ("Max, Bella or Rocky"; "8 to 9 am"), only
    part of another name ("New York" for York), only ever negated ("it wasn't Target"), or a
    guess after a refusal ("You never told me. It might be Luna")."""
    resp = normalise(response)
    clauses = [c for c in _CLAUSE.split(resp) if c.strip()]
    holding = [c for c in clauses if _holds(c, words, ref_values, off_by_one)]
    if not holding:
        return None
    if _UNDECIDED.search(resp) or all(
        _among_candidates(c, words, ref_values, off_by_one) for c in holding
    ):
        return "the reference among other candidates, none chosen"
    if _inside_other_name(reference, response):
        return "the reference only as part of another name"
    evidence = _EVIDENCE_LINE.findall(response)
    if len(evidence) >= 2:
        outside = normalise(_EVIDENCE_LINE.sub(" ", response))
        if not any(_holds(c, words, ref_values, off_by_one) for c in _CLAUSE.split(outside)):
            return "the reference only inside pasted evidence, never concluded"
    if all(_denied(c, words, ref_values) for c in holding):
        return "the reference only in a negation"
    if all(_superseded(c, words, ref_values) for c in holding):
        return "the reference only as what was true before"
    if refused and all(GUESS.match(c) for c in holding):
        return "a refusal, then a guess"
    return None


def _holds(clause: str, words: set[str], values: list[Quantity], off_by_one: bool) -> bool:
    got = quantities(clause)
    matched = [any(same_value(r, g, off_by_one=off_by_one) for g in got) for r in values]
    return coverage(words, matched, clause) >= 0.5 or (bool(values) and all(matched))


def ref_span(
    clause: str, words: set[str], values: list[Quantity] = (), off_by_one: bool = False
) -> tuple[int, int] | None:
    """From the first to the last place the reference is named in `clause` (its words, as
    prefixes of the clause's words, and its values)."""
    spots = [span for w in words for span in _word_places(clause, w)]
    spots += [q.span for q in quantities(clause) if any(same_value(r, q, off_by_one=off_by_one)
                                                       for r in values)]  # fmt: skip
    if not spots:
        return None
    return min(a for a, _ in spots), max(b for _, b in spots)


def _among_candidates(
    clause: str, words: set[str], values: list[Quantity], off_by_one: bool
) -> bool:
    """The clause offers the reference as one of several possibilities."""
    if not _CANDIDATES.search(clause) and not re.search(
        r"\d(?:\s*[ap]m)?\s*(?:-|–|to)\s*\d", clause
    ):
        return False
    if values:
        got = sorted(quantities(clause), key=lambda q: q.span)
        for a, b in zip(got, got[1:], strict=False):
            ours = [any(same_value(r, q, off_by_one=off_by_one) for r in values) for q in (a, b)]
            if ours[0] == ours[1] or not any(comparable(r, q) for r in values for q in (a, b)):
                continue
            gap, before = clause[a.span[1] : b.span[0]], clause[max(0, a.span[0] - 12) : a.span[0]]
            joined = re.fullmatch(r"\s*(?:[ap]m\s*)?(?:,|or|to|-|–)\s*(?:maybe\s+)?", gap) or (
                re.fullmatch(r"\s*(?:[ap]m\s*)?and\s*", gap) and re.search(r"between\s*$", before)
            )
            # "from 3 to 4 a week" is a change, "3.1 weeks (or about 3)" the same value twice.
            if joined and not re.search(r"\bfrom\s*$", before) and not near(a, b):
                return True
        return False
    span = ref_span(clause, words)
    if span is None or len(words) > 4:
        return False
    before, after = clause[max(0, span[0] - 30) : span[0]], clause[span[1] : span[1] + 15]
    return bool(_NEXT_TO_OR.search(before) or (_OR_NEXT.match(after) and _CANDIDATES.search(
        clause[span[1] :])))  # fmt: skip


def _inside_other_name(reference: str, response: str) -> bool:
    """A short capitalised reference ("York", "Max") that the response only ever writes as
    part of a longer capitalised name ("New York", "Max Power")."""
    ref = reference.strip().strip(".")
    if not re.fullmatch(r"[A-Z][\w'’-]*", ref):
        return False  # one capitalised word: a longer reference names itself
    found = list(re.finditer(rf"(?<![\w'’-]){re.escape(ref)}(?![\w'’-])", response))
    if not found:
        return False
    for m in found:
        before = re.search(r"([A-Za-z][\w'’-]*)\s+$", response[: m.start()])
        after = re.match(r"\s+([A-Za-z][\w'’-]*)", response[m.end() :])
        sentence_start = re.search(r"(?:^|[.!?:\n\"(])\s*$", response[: m.start()]) is not None
        joined = (
            before is not None
            and before[1][0].isupper()
            and not sentence_start
            and before[1].lower() not in _NAME_CONTEXT
        ) or (after is not None and after[1][0].isupper() and after[1].lower() not in _NAME_CONTEXT)
        if not joined:
            return False
    return True


def _denied(clause: str, words: set[str], values: list[Quantity]) -> bool:
    """A negation before the reference in the clause, with no "but"/"instead" turning it."""
    span = ref_span(clause, words, values)
    if span is None:
        return False
    start = span[0]
    head = clause[:start].rsplit(",", 1)[-1]  # "it wasn't Target, it was Walmart"
    neg = list(NEGATION.finditer(head))
    if not neg:
        return False
    return not re.search(r"\b(?:but|instead|rather|now|only)\b", head[neg[-1].end() :])


# Before the reference in a clause: it is what was true before, not what is true now.
_BEFORE_NOW = re.compile(
    r"\b(?:used\s+to|previously|formerly|originally|no\s+longer|moved\s+from|switched\s+from|"
    r"changed\s+from|went\s+from|upgraded\s+from|replaced|traded\s+in|from)\s+(?:\w+\s+){0,3}$"
)


def _superseded(clause: str, words: set[str], values: list[Quantity]) -> bool:
    """The clause names the reference as what changed into something else ("you moved from
    Brightline to Corvid", "you used to bike to work")."""
    span = ref_span(clause, words, values)
    if span is None:
        return False
    head = clause[: span[0]]
    if not _BEFORE_NOW.search(head):
        return False
    tail = clause[span[1] :]
    # "from A to B": A is the source; a clause that names nothing after it is a plain past.
    return bool(re.search(r"\bto\b|\bbut\b|\bnow\b|\binstead\b", tail)) or "used to" in head


def asserted_coverage(
    words: set[str], ref_values: list[Quantity], response: str, off_by_one: bool
) -> float:
    """The reference's coverage by the sentences of `response` that refuse nothing."""
    parts = re.split(r"(?<=[.!?;\n])\s+|,?\s+\b(?:but|however|although|though)\b", response)
    # Neither a refusal nor a question ("Pickle? Actually, I don't think you told me") asserts.
    kept = " ".join(
        s for s in parts if s and not s.rstrip().endswith("?") and not REFUSAL.search(normalise(s))
    )
    got = quantities(kept)
    matched = [any(same_value(r, g, off_by_one=off_by_one) for g in got) for r in ref_values]
    return coverage(words, matched, kept)


# A transcript or retrieved passage handed back as the answer: a speaker or date label.
_TRANSCRIPT_LABEL = re.compile(
    r"^\s*\[[^\]\n]{0,40}\b(?:user|assistant)\]|^\s*(?:user|assistant|human|ai)\s*:",
    re.IGNORECASE | re.MULTILINE,
)


def pasted(response: str) -> bool:
    """The response is (or starts with) a transcript: labelled turns, not an answer."""
    labels = _TRANSCRIPT_LABEL.findall(response)
    return bool(labels) and (len(labels) >= 2 or _TRANSCRIPT_LABEL.match(response) is not None)
