"""Deterministic answer matching: LongMemEval's yes/no protocol decided without a model, the
way its reference judge (GPT-4o with `evaluate_qa.py`'s prompts) reads real answers.

Real answers are long (a median of about 100 words in published runs): chain of thought,
lists of evidence, "Final Answer: ...". `decide` reads a response as that judge does:

1. **what it concludes** (`final_answer`): after an answer marker, from its last conclusion
   ("Therefore, ...") or from its last sentence when that restates the question; the whole
   response otherwise, or when the conclusion says nothing of the reference;
2. **every answer the reference accepts** (`reference_answer.accepted`): "4 days (including
   the last day) is also acceptable", a range, an alias, the current value of an update, a
   total, a count;
3. **values as values** (`answer_values`): numbers, durations, units, money in its currency,
   temperatures, dates and clock times; **words** (`answer_words`) as a coverage share;
4. **whether it commits** (`answer_commitment`): a yes/no, the option an either/or question
   offers, an order; and never yes to a reference that is only a candidate, part of another
   name, denied, superseded, guessed after a refusal, or pasted evidence;
5. **refusals** (`answer_cues`): an answerable question refused is no; an abstention question
   is yes when the response says the record lacks the answer, unless it guesses after all or
   concludes with a value of its own.

It returns a verdict where a rule settles it and `None` (undecided, with the coverage it
measured) where only reading can; `score.verdicts` decides those by a coverage threshold
(`match`) or a model. A rubric (single-session preference) is never decided here: its coverage
is the share of what the rubric names of the user's own (not how rubrics talk).

The rules restate the written protocol and were developed against published runs with
GPT-4o's verdicts (docs/judge.md#measured says which, and which were held out); no rule names
an item of any labelled set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from eval_pipeline.score.answer_commitment import (
    asserted_coverage,
    option_verdict,
    order_verdict,
    pasted,
    polarity_verdict,
    ref_span,
    uncommitted,
)
from eval_pipeline.score.answer_cues import (
    CORRECTION,
    GUESS,
    NEGATION,
    REFUSAL,
    REVISION,
)
from eval_pipeline.score.answer_values import (
    Quantity,
    comparable,
    given,
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
    words_in,
)
from eval_pipeline.score.final_answer import SHORT_WORDS, final_answer, restates
from eval_pipeline.score.reference_answer import accepted

MATCH_RULES_VERSION = 2


Verdict = Literal["yes", "no"]


@dataclass(frozen=True)
class Match:
    """What the rules saw: a verdict (None: undecided) and why."""

    verdict: Verdict | None
    rule: str
    coverage: float  # share of the reference's content words and values found (0..1)
    refusal: bool = False

    @property
    def rubric_applied(self) -> str:
        """The rubric the rules applied: the abstention rules or the answer rules."""
        return "abstention" if self.rule.startswith(ABSTENTION_RULE_PREFIX) else "answer"


ABSTENTION_RULE_PREFIX = "abstention:"  # every rule of the abstention branch says so


def decide(
    reference: str, response: str, *, question_type: str, abstention: bool, question: str = ""
) -> Match:
    """The protocol's verdict where a rule settles it, else an undecided Match.

    The rules read what the response concludes (`final_answer`), and a reference as every
    answer it accepts (`reference_answer.accepted`)."""
    if not (response or "").strip():
        return Match("no", "empty response", 0.0)
    if pasted(response):
        return Match("no", "a pasted passage or transcript, not an answer", 0.0)
    final = final_answer(response, question)
    if abstention:
        return _abstention(final.text if final.how in ("marker", "conclusion") else response,
                           response)  # fmt: skip
    if question_type == "single-session-preference":
        # What the rubric names of the user's own (their camera brand, the cake they baked),
        # not how rubrics talk ("the user would prefer suggestions that ..."): the share of it
        # the response uses.
        words = content_words(reference) - content_words(question) - _RUBRIC_WORDS
        cov = coverage(words or content_words(reference), [], response)
        refused = bool(REFUSAL.search(normalise(final.text)))
        return Match(None, "rubric: needs reading", cov, refused)
    alternatives = accepted(reference, question) or [reference]
    polar = polarity_verdict(reference, final.text, response)
    if polar is not None:
        return Match(*polar)
    chosen = option_verdict(reference, final.text, question)
    if (chosen is None or chosen.verdict is None) and final.how != "whole":
        chosen = option_verdict(reference, response, question) or chosen
    if chosen is not None:
        return Match(*chosen)
    ordered = order_verdict(reference, final.text, question)
    if ordered is not None:
        return Match(*ordered)
    if final.how != "whole":
        # The response concludes: its conclusion decides, unless it says nothing of the
        # reference (a closing remark on something else), when the whole response is read.
        concluded = _best(alternatives, final.text, question_type, question)
        # After "the answer is" the answer follows; a conclusion that names nothing of the
        # reference may be a remark on something else.
        committal = final.how == "marker" or concluded.rule not in _NON_COMMITTAL
        if concluded.verdict is not None and committal:
            return concluded
    return _best(alternatives, response, question_type, question)


_RUBRIC_WORDS = frozenset(
    stem(w)
    for w in """user users prefer preference preferences response responses suggestion
    suggestions recommendation recommendations tip tips might may would could their they previous
    previously mention mentioned mentioning such like interest interests interested specific
    specifically particular consider considering take account build upon utilize utilizing
    acknowledge acknowledging include including also example examples option options advice
    idea ideas help related relevant way ways well new existing current especially generic
    general other based focus focusing prior past experience experiences enjoy enjoyed align
    aligned aligning similar suggest suggesting provide providing appreciate offer offering
    things thing something more less information detail details explanation explanations
    recall use using approach approaches content incorporate incorporating reference
    referencing build building effort efforts concern concerns own resource resources want
    need needs preferred likely""".split()
)


# Rules that find the reference absent, not contradicted: a conclusion that matches one of
# them has not committed to another answer.
_NON_COMMITTAL = frozenset(
    {"nothing of the reference in the response", "no reference value or word in the response"}
)


def _best(alternatives: list[str], text: str, question_type: str, question: str) -> Match:
    """The verdict on `text` against every accepted alternative: yes if any is given, else
    undecided if any may be, else no. A revision ("..., actually Y") is read in a short text
    only: in a long one it is as likely to revise something else."""
    short = len(text.split()) <= SHORT_WORDS
    matches = [
        _decide_one(alt, text, question_type=question_type, question=question, revisions=short)
        for alt in alternatives
    ]
    for verdict in ("yes", None):
        found = [m for m in matches if m.verdict == verdict]
        if found:
            return max(found, key=lambda m: m.coverage)
    return max(matches, key=lambda m: m.coverage)


def _abstention(final: str, response: str, question: str = "") -> Match:
    """An unanswerable question: yes when the response says the record does not hold the
    answer (anywhere: "X is there, but not Y" is how a careful reader abstains), unless it
    guesses after all, or concludes with an answer of its own (a value, or a conclusion that
    answers the question, its refusal only a reason: "You started the Ferrari first, as there
    is no mention of the Porsche")."""
    whole, last = normalise(response), normalise(final)
    refusals = list(REFUSAL.finditer(whole))
    if not refusals:
        return Match("no", "abstention: answered instead of recognising the gap", 0.0)
    after = whole[refusals[-1].end() :]
    if any(GUESS.match(s) for s in re.split(r"(?<=[.!?])\s+", after) if s.strip()):
        return Match("no", "abstention: a refusal followed by a guess", 0.0, True)
    if last != whole:
        said = quantities(final)
        main = _SUBORDINATE.split(last, maxsplit=1)[0]
        # "0 times": a count of nothing says the record holds none.
        counted = any(float(q.value) != 0 for q in said if q.kind != "date")  # type: ignore[arg-type]
        answered = restates(main, question) and not REFUSAL.search(main)
        if (counted and not REFUSAL.search(last)) or answered:
            return Match("no", "abstention: concludes with an answer of its own", 0.0, True)
    return Match("yes", "abstention: recognised as unanswerable", 1.0, True)


# Where a conclusion's reason starts: "X came first, as there is no mention of Y".
_SUBORDINATE = re.compile(r",?\s+\b(?:as|since|because|given\s+that|so)\b\s+|;\s+")


def _decide_one(
    reference: str, response: str, *, question_type: str, question: str, revisions: bool = True
) -> Match:
    resp = normalise(response)
    refused = bool(REFUSAL.search(resp))
    question_words = content_words(question)
    ref_values = quantities(reference)
    got_values = _not_the_questions(quantities(response), quantities(question), ref_values)
    # The reference's own words; those the question already says ("10,000 steps" for "my
    # step goal") only when nothing else, not even a value, carries the answer.
    words = content_words(reference) - question_words
    if not words and not ref_values:
        words = content_words(reference)
    off_by_one = question_type == "temporal-reasoning"
    matched = [given(r, got_values, off_by_one) for r in ref_values]
    if not words and not ref_values:
        # Nothing but letters or symbols ("C D E F G"): the reference as written, in order.
        tokens = " ".join(WORD.findall(normalise(reference)))
        there = bool(tokens) and f" {tokens} " in f" {' '.join(WORD.findall(resp))} "
        return Match("yes" if there else "no", "the reference's sequence as written", float(there))
    cov = coverage(words, matched, response)
    word_cov = coverage(words, [], response) if words else 1.0

    if refused and asserted_coverage(words, ref_values, response, off_by_one) < 0.5:
        # What the response says outside its "there is no record of X" sentences: a
        # reference named only where the response says it cannot find it is not given.
        return Match("no", "answerable question refused", cov, True)
    if ref_values and not all(matched):
        wrong = [
            r
            for r, ok in zip(ref_values, matched, strict=True)
            if not ok and any(comparable(r, g) for g in got_values)
        ]
        if wrong and not words - words_in(response):
            return Match("no", "a reference value given wrongly", cov, refused)
        if wrong and word_cov == 1.0:
            return Match("no", "a reference value given wrongly", cov, refused)
        if not any(matched) and word_cov == 0.0:
            return Match("no", "no reference value or word in the response", cov, refused)
        return Match(None, "values partly there: needs reading", cov, refused)
    if cov == 0.0:
        return Match("no", "nothing of the reference in the response", cov, refused)
    if cov < 1.0:
        if _list_part_missing(reference, response, question_words):
            return Match("no", "an item of the reference's list is missing", cov, refused)
        return Match(None, "reference partly there: needs reading", cov, refused)
    revised = list(REVISION.finditer(resp)) if revisions else []
    last_ref = ref_span(resp, words, ref_values, off_by_one)
    revised = [r for r in revised if last_ref is not None and r.start() >= last_ref[1]]
    if revised:
        tail = resp[revised[-1].end() :]
        if len(content_words(tail)) + len(quantities(tail)) >= 1:
            # Named, then revised away: the answer settled on is another one.
            return Match("no", "reference set aside by a revision", cov, refused)
    why_not = uncommitted(reference, response, words, ref_values, off_by_one, refused)
    if why_not is not None:
        return Match("no", why_not, cov, refused)
    if CORRECTION.search(resp) or _negated(resp, words, ref_values):
        return Match(None, "reference there beside a correction or negation", cov, refused)
    extra = [g for g in got_values if not any(same_value(r, g, off_by_one=off_by_one)
                                              for r in ref_values)]  # fmt: skip
    if ref_values and any(comparable(r, g) for r in ref_values for g in extra):
        return Match(None, "reference value beside other values of its kind", cov, refused)
    return Match("yes", "every reference value and word in the response", cov, refused)


def _not_the_questions(
    got: list[Quantity], asked: list[Quantity], ref_values: list[Quantity]
) -> list[Quantity]:
    """The response's values without those it restates from the question ("in the past three
    months" does not answer "3"), unless the reference is one of them."""
    if not asked or any(same_value(r, q, off_by_one=False) for r in ref_values for q in asked):
        return got
    return [g for g in got if not any(q.kind == g.kind and same_value(q, g, off_by_one=False)
                                      for q in asked)]  # fmt: skip


def _list_part_missing(reference: str, response: str, question_words: set[str]) -> bool:
    """A short reference that lists items ("A, B and C") with one item wholly absent from
    the response while another is there: a partial answer, which the protocol calls a no."""
    if len(WORD.findall(normalise(reference))) > 12:
        return False
    parts = [
        p for p in re.split(r",|;|\band\b(?!\s+a\s+half)|&", normalise(reference)) if p.strip()
    ]
    if len(parts) < 2:
        return False
    have = words_in(response)
    found = []
    for part in parts:
        words = content_words(part) - question_words
        values = quantities(part)
        if not words and not values:
            return False  # a part with nothing to look for: not a list of answers
        said = quantities(response)
        got = [any(same_value(v, g, off_by_one=False) for g in said) for v in values]
        found.append(any(word_found(w, have) for w in words) or any(got))
    return any(found) and not all(found)


def _negated(resp: str, words: set[str], values: list[Quantity]) -> bool:
    """A negation in the same sentence as a reference word (the answer may be denied)."""
    for sentence in re.split(r"(?<=[.!?;])\s+", resp):
        if not NEGATION.search(sentence):
            continue
        have = words_in(sentence)
        if any(word_found(w, have) for w in words) or (values and quantities(sentence)):
            return True
    return False
