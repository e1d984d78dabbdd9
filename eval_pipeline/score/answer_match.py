"""Deterministic answer matching: the judge protocol's clear cases, decided without a model.

The yes/no protocol (`score.judges`: a response is correct when it contains the reference
answer or an equivalent; partial is a no; off-by-one counts of days, weeks or months pass a
temporal question; an abstention question wants a refusal) has cases a rule decides as well
as any judge, and cases only reading can settle. `decide` returns a verdict for the first
kind and `None` (undecided) for the second, with the rule that decided and the reference
coverage it measured:

- **values**: numbers (digits, number words, ordinals, thousands separators, currency),
  durations with their unit (weeks compare to days, years to months), dates (month names in
  either order, ISO, US numeric) and clock times are read from both texts and compared as
  values, so "14 days" equals "two weeks" and "March 3rd" equals "3 March";
- **words**: the reference's content words (stop words and question words removed, light
  stemming), looked for in the response; `coverage` is the share found;
- **refusals**: "I don't have that", "you never mentioned", ... found in the response;
- **cues that need reading**: a correction ("actually", "instead", "no longer", "not X"),
  or a hedged guess after a refusal ("but it was probably ..."): the rule does not decide.

Yes only when every reference value is there (off by one allowed where the protocol allows
it) and the words are covered, with no correction cue; no when a reference value is given
wrongly, when nothing of the reference is there, or when an answerable question is refused.
A rubric (single-session preference) is never decided here.

These rules restate the written protocol; no rule names an item of any labelled set. The one
number tuned on data is `match`'s fallback threshold on `coverage` for undecided items
(`score.verdicts`), cross-validated by `judge-check`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Literal

from eval_pipeline.score.final_answer import SHORT_WORDS, final_answer
from eval_pipeline.score.reference_answer import accepted

MATCH_RULES_VERSION = 2

Verdict = Literal["yes", "no"]

_UNITS = {
    "second": ("time", 1 / 86400),
    "minute": ("time", 1 / 1440),
    "hour": ("time", 1 / 24),
    "day": ("time", 1.0),
    "night": ("time", 1.0),
    "week": ("time", 7.0),
    "fortnight": ("time", 14.0),
    "month": ("month", 1.0),
    "year": ("month", 12.0),
    # Measures: a value in another unit is another value ("12 km" is not "12 miles").
    "km": ("length", 1000.0),
    "kilometre": ("length", 1000.0),
    "kilometer": ("length", 1000.0),
    "mile": ("length", 1609.344),
    "metre": ("length", 1.0),
    "meter": ("length", 1.0),
    "kg": ("mass", 1000.0),
    "kilogram": ("mass", 1000.0),
    "kilo": ("mass", 1000.0),
    "gram": ("mass", 1.0),
    "lb": ("mass", 453.592),
    "pound": ("mass", 453.592),
    "litre": ("volume", 1.0),
    "liter": ("volume", 1.0),
    "gallon": ("volume", 3.785),
    "ml": ("volume", 0.001),
    "millilitre": ("volume", 0.001),
    "milliliter": ("volume", 0.001),
    "cl": ("volume", 0.01),
    "cm": ("length", 0.01),
    "centimetre": ("length", 0.01),
    "centimeter": ("length", 0.01),
    "mm": ("length", 0.001),
    "millimetre": ("length", 0.001),
    "millimeter": ("length", 0.001),
    "inch": ("length", 0.0254),
    "foot": ("length", 0.3048),
    "feet": ("length", 0.3048),
    "ft": ("length", 0.3048),
    "yard": ("length", 0.9144),
    "mg": ("mass", 0.001),
    "oz": ("mass", 28.3495),
    "ounce": ("mass", 28.3495),
    # Temperatures in degrees Celsius (`normalise` turns °F into °C): 24 °F is not 24 °C.
    "celsius": ("temperature", 1.0),
    # Money by currency: no rate converts one into another, so "€1,200" is not "$1,200".
    **{code: (f"money:{code}", 1.0) for code in ("usd", "eur", "gbp", "jpy")},
}
_CURRENCY_SIGNS = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}
# The counts the temporal rule forgives off by one (judges.TYPE_RULES["temporal-reasoning"]).
_OFF_BY_ONE_UNITS = {"day", "week", "month"}

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12,
}  # fmt: skip
_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for m in names
}  # fmt: skip

_STOP = frozenset(
    """a an the and or of to in on at for from by with about as is are was were be been being
    it its this that these those there their they them he she his her him you your yours i me
    my mine we our us do did does done have has had having will would can could should may
    might must shall what which who whom whose when where why how than then so such very just
    also only some any all each both few more most other into over under again further once
    here out up down off own same too s t not no nor yes user users assistant answer per each
    every
    correct response approximately about around roughly total overall currently ago
    """.split()
)  # fmt: skip
# What a gap in the record is called, and how it is qualified ("no specific mention").
_GAP = (
    r"(?:(?:direct|clear|specific|explicit|exact|precise|concrete|such|further|relevant|"
    r"recorded|documented|mention\s+or|definitive|confirmed)\s+)*"
    r"(?:record|mention|information|info|details?|data|evidence|indication|reference|entry|"
    r"entries|note|trace|memory|memories|conversation|discussion)"
)
_REFUSAL = re.compile(
    r"\b(?:"
    r"(?:i\s+)?(?:do\s+not|don't|dont|cannot|can't|can\s+not|couldn't|could\s+not)\s+"
    r"(?:have|find|see|recall|remember|know|locate|tell|determine|say|give|confirm|answer|"
    r"calculate|compute|identify|provide|access|pinpoint|verify)"
    rf"|(?:no|not\s+(?:a|any)|without\s+(?:a|any)|lack\s+of)\s+{_GAP}"
    rf"|(?:isn't|is\s+not|aren't|are\s+not|wasn't|was\s+not|weren't|were\s+not)\s+(?:a|any)\s+{_GAP}"
    r"|(?:not|n't)\s+(?:\w+ly\s+)?(?:available|specified|mentioned|stated|recorded|given|"
    r"provided|documented|included|clear\s+from)\b"
    r"|no\s+way\s+(?:for\s+me\s+)?to\s+(?:know|tell|work\s+out|calculate|determine|say|figure)"
    r"|but\s+not\s+(?:what|which|who|whom|when|where|how|whether|the\s+\w+\s+(?:itself|of))\b"
    r"|(?:not|never)\s+(?:sure|certain|confident)\s+(?:which|what|who|when|where|whether|how)\b"
    r"|(?:can't|cannot|can\s+not|couldn't)\s+(?:\w+\s+)?(?:say|tell)\s+(?:for\s+(?:sure|"
    r"certain)|which|exactly)"
    r"|can\s+only\s+(?:confirm|find|see|tell|say|speak|account)"
    r"|(?:never|not|wasn't|isn't|haven't|hasn't|didn't)\s+(?:been\s+)?"
    r"(?:mentioned|mention|told|said|shared|discussed|specified|stated|provided|recorded|"
    r"come\s+up|talked|captured|documented|included|given|found|logged|noted)"
    r"|(?:does|do|did|doesn't|don't|didn't)\s+(?:not\s+)?(?:contain|specify|include|mention|"
    r"provide|state|indicate|record|show|cover|reveal|say\s+(?:how|when|what|which|where|who))"
    r"|(?:not|isn't|aren't|wasn't)\s+(?:in|part\s+of|among|covered\s+(?:in|by)|anywhere\s+in)\s+"
    r"(?:the|our|your|my)?\s*(?:history|conversations?|records?|notes|chats?|sessions?|"
    r"events?|logs?|memory|what)"
    r"|\bi\s+(?:can't|cannot|couldn't|could\s+not|can\s+not)\b"
    r"|(?:wasn't|was\s+not|weren't|were\s+not|am\s+not|i'm\s+not|not)\s+able\s+to\s+"
    r"(?:find|locate|determine|confirm|identify|answer|tell|say|calculate|pinpoint)"
    r"|\bnever\b[^.?!]{0,60}?\b(?:mentioned|said|told|found|known|recorded|discussed|"
    r"brought\s+up|came\s+up|shared)"
    r"|\bdon't\s+think\s+(?:you|we|it)\b[^.?!]{0,30}?\b(?:mentioned|said|told|came\s+up)"
    r"|\b(?:not|never)\s+(?:known|found|determined|identified|established)"
    r"|(?:isn't|is\s+not|aren't|are\s+not|wasn't|was\s+not)\s+(?:available|recorded|"
    r"specified|clear|known|possible\s+to)"
    r"|nothing\s+(?:in|about|was\s+said|on\s+record|recorded)"
    r"|none\s+of\s+(?:the|your|our|my)\s+(?:\w+\s+){0,2}?(?:conversations?|records?|"
    r"sessions?|memories|notes|messages|chats|results|entries)\s+(?:contain|mention|include|"
    r"say|record|show|specif)"
    r"|unable\s+to\s+(?:find|determine|answer|tell|say|confirm|locate|identify|calculate)"
    r"|(?:not|insufficient|lack(?:ing)?)\s+(?:enough\s+|sufficient\s+)?(?:information|"
    r"data|details|context)\s+(?:to|is|was|available|provided)"
    r"|(?:missing|absent)\s+from\s+(?:the|your|our|my)"
    r"|there\s+(?:is|are|was|were)\s+no\s+"
    r"|(?:unanswerable|cannot\s+be\s+(?:answered|determined|calculated)|can't\s+be\s+"
    r"(?:answered|determined|calculated)|not\s+answerable)"
    r"|(?:i\s+)?(?:have|has)\s+no\s+(?:record|information|memory|knowledge|details?)"
    r")",
    re.IGNORECASE,
)
# After a refusal: a guess at the answer after all ("It might be Luna", "probably 3").
_GUESS = re.compile(
    r"(?!\s*if\b)(?![^.?!]*\b(?:thinking\s+of|referring\s+to|related|confus))[^.?!]*\b(?:(?:it|that|this|the\s+\w+|they|you)\s+(?:might|may|could|would)"
    r"\s+(?:have\s+been|be)|(?:it|that|this|you)(?:'s|\s+(?:is|was))\s+(?:probably|likely|"
    r"perhaps|maybe|presumably)|my\s+(?:best\s+)?guess|i\s+(?:would|'d)\s+(?:guess|say|"
    r"estimate)|i\s+guess|if\s+i\s+had\s+to\s+guess|(?:most\s+)?(?:probably|likely)\b|"
    r"possibly|maybe|presumably|perhaps)\b",
    re.IGNORECASE,
)
# A correction or an update: which value the response asserts needs reading.
_CORRECTION = re.compile(
    r"\b(?:actually|instead|rather\s+than|no\s+longer|not\s+anymore|any\s*more|used\s+to|"
    r"previously|originally|formerly|initially|earlier|changed|switched|replaced|"
    r"moved\s+from|turned\s+out|correction|correct(?:ed|ing)\s+(?:that|myself)|"
    r"scratch\s+that|in\s+the\s+end|ended\s+up|eventually|finally|decided|went\s+with|"
    r"settled\s+on|thought\s+about|considered|in\s+fact|wait|whereas|"
    r"before\s+(?:that|it)|but\s+(?:then|later|now|it|that|the|you|i|we|actually))",
    re.IGNORECASE,
)
# A revision: what follows it is the answer the response settles on.
_REVISION = re.compile(
    r"\b(?:actually|in\s+the\s+end|ended\s+up|in\s+fact|correction\s*[:,]|"
    r"correct(?:ed|ing)\s+(?:that|myself)|scratch\s+that|wait\b|i\s+mean\b|i\s+misspoke|"
    r"but\s+no\b|but\s+the\s+(?:real|right|correct)|the\s+real|went\s+with|settled\s+on|"
    r"decided\s+on)",
    re.IGNORECASE,
)
# A negation, except the hedges that leave the answer standing ("not sure", "not 100%").
_NEGATION = re.compile(
    r"\b(?:not|never|isn't|wasn't|aren't|weren't|didn't|doesn't|don't|no)\b"
    r"(?!\s+(?:sure|certain|completely|entirely|exactly|positive|100|quite|totally|fully|"
    r"a\s+hundred|mistaken|wrong))",
    re.IGNORECASE,
)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class Quantity:
    kind: str  # "number" | "time" | "month" | "date" | "clock"
    value: float | tuple[int | None, int, int]
    unit: str | None = None  # the unit as written (singular), for the off-by-one rule
    # Where it was read in the normalised text (`normalise`); not part of the value.
    span: tuple[int, int] = field(default=(0, 0), compare=False)


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


_FREQUENCIES = [
    (re.compile(r"\b(?:every\s+other|every\s+(?:two|2)|once\s+every\s+(?:two|2)|bi-?)\s*"
                r"weeks?\b|\bbi-?weekly\b|\bfortnightly\b"), "biweekly"),
    *(
        (re.compile(rf"\b(?:every|each|once\s+an?|once\s+per|per)\s+{unit}\b"), adverb)
        for unit, adverb in (("week", "weekly"), ("day", "daily"), ("month", "monthly"),
                             ("year", "yearly"))
    ),
    (re.compile(r"\bannually\b"), "yearly"),
]  # fmt: skip


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u2013", "-")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,200 -> 1200
    text = re.sub(r"\bbaker'?s\s+dozen\b", "13", text)
    text = re.sub(r"\bhalf\s+a\s+dozen\b", "6", text)
    for pattern, word in _FREQUENCIES:  # "every week" and "weekly" say the same
        text = pattern.sub(word, text)
    text = re.sub(r"\b(\d+)-([a-z])\b", r"\1\2", text)  # 14-B -> 14b
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*k\b", lambda m: _scaled(m[1], 1000), text)
    text = re.sub(
        r"\b(\d+(?:\.\d+)?)\s+(thousand|million)\b",
        lambda m: _scaled(m[1], 1000 if m[2] == "thousand" else 1_000_000),
        text,
    )
    text = re.sub(r"\b(\d+)\s+(dollars?|euros?)\s+and\s+(\d{1,2})\s+cents?\b",
                  lambda m: f"{m[1]}.{int(m[3]):02d} {m[2]}", text)  # fmt: skip
    # A currency as a unit after the amount: "$1200" and "1200 dollars" are "1200 usd".
    text = re.sub(r"([$€£¥])\s*(\d+(?:\.\d+)?)", lambda m: f"{m[2]} {_CURRENCY_SIGNS[m[1]]}",
                  text)  # fmt: skip
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*(?:us\s+)?(?:dollars?|bucks)\b", r"\1 usd", text)
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*euros?\b", r"\1 eur", text)
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*(?:usd|eur|gbp|jpy)\b", lambda m: m[0], text)
    # Temperatures in Celsius: "24 °F" is -4.4 °C, not 24 °C.
    text = re.sub(r"(-?\d+(?:\.\d+)?)\s*(?:°|º|degrees?)\s*(?:f\b|fahrenheit)",
                  lambda m: f"{_celsius(float(m[1])):.1f} celsius", text)  # fmt: skip
    text = re.sub(r"(-?\d+(?:\.\d+)?)\s*(?:°|º|degrees?)\s*(?:c\b|celsius|centigrade)",
                  r"\1 celsius", text)  # fmt: skip
    text = re.sub(r"\b(quarter|half)\s+(past|to)\s+([a-z]+|\d{1,2})\b", _clock_words, text)
    text = re.sub(r"\bnoon\b|\bmidday\b", "12:00", text)
    text = re.sub(r"\bmidnight\b", "0:00", text)
    text = re.sub(r"\b(\d{1,2})\s+o'?clock\b", r"\1:00", text)
    text = re.sub(r"\b(\d{1,2}(?::\d{2})?)\s*a\.m\.", r"\1 am", text)
    text = re.sub(r"\b(\d{1,2}(?::\d{2})?)\s*p\.m\.", r"\1 pm", text)
    text = re.sub(r"\b(\d{1,2}(?::\d{2})?)\s+in\s+the\s+morning\b", r"\1 am", text)
    text = re.sub(r"\b(\d{1,2}(?::\d{2})?)\s+in\s+the\s+(?:afternoon|evening)\b", r"\1 pm", text)
    return text


def _celsius(fahrenheit: float) -> float:
    return (fahrenheit - 32) * 5 / 9


def _clock_words(m: re.Match) -> str:
    """ "quarter past eight" -> "8:15" (an hour word or digits; else left as written)."""
    hour = int(m[3]) if m[3].isdigit() else _SMALL.get(m[3])
    if hour is None or not 1 <= hour <= 12:
        return m[0]
    minutes = 15 if m[1] == "quarter" else 30
    if m[2] == "to":
        hour, minutes = (hour - 1) or 12, 60 - minutes
    return f"{hour}:{minutes:02d}"


def _scaled(number: str, factor: int) -> str:
    value = float(number) * factor
    return str(int(value)) if value == int(value) else str(value)


def _word_number(words: list[str], i: int) -> tuple[float, int] | None:
    """A number spelled in words starting at words[i]: (value, words used)."""
    total, current, used = 0, None, 0
    j = i
    while j < len(words):
        w = words[j]
        parts = w.split("-")
        if len(parts) == 2 and parts[0] in _TENS and parts[1] in _SMALL:
            val = _TENS[parts[0]] + _SMALL[parts[1]]
            current = (current or 0) + val
        elif w in _SMALL:
            current = (current or 0) + _SMALL[w]
        elif w in _TENS:
            current = (current or 0) + _TENS[w]
        elif w in _MULTIPLIERS and current is not None:
            if _MULTIPLIERS[w] >= 1000:
                total += current * _MULTIPLIERS[w]
                current = 0
            else:
                current *= _MULTIPLIERS[w]
        elif (
            w == "and"
            and current is not None
            and j + 1 < len(words)
            and (words[j + 1] in _SMALL or words[j + 1] in _TENS)
        ):
            pass
        else:
            break
        j += 1
        used = j - i
    if used == 0 or current is None and total == 0:
        return None
    return float(total + (current or 0)), used


def _unit_of(word: str) -> str | None:
    for w in (word, word[:-1] if word.endswith("s") else "", word[:-2] if word.endswith("es")
              else ""):  # fmt: skip
        if w in _UNITS:
            return w
    return None


def quantities(text: str) -> list[Quantity]:
    """Every value in `text`: dates, clock times, durations with units, bare numbers."""
    t = normalise(text)
    out: list[Quantity] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    def add(q: Quantity, span: tuple[int, int]) -> None:
        out.append(replace(q, span=span))
        taken.append(span)

    month = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"  # noqa: E501
    day = r"(\d{1,2})(?:st|nd|rd|th)?"
    year = r"(?:,?\s*(\d{4}))?"
    for m in re.finditer(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", t):
        add(Quantity("date", (int(m[1]), int(m[2]), int(m[3]))), m.span())
    for m in re.finditer(r"\b(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?\b", t):
        if free(*m.span()) and 1 <= int(m[1]) <= 12 and 1 <= int(m[2]) <= 31:
            yr = int(m[3]) if m[3] else None
            if yr is not None and yr < 100:
                yr += 2000
            add(Quantity("date", (yr, int(m[1]), int(m[2]))), m.span())
    for m in re.finditer(rf"\b{month}\.?\s+{day}\b{year}", t):
        if free(*m.span()) and 1 <= int(m[2]) <= 31:
            yr = int(m[3]) if m[3] else None
            add(Quantity("date", (yr, _MONTHS[m[1]], int(m[2]))), m.span())
    for m in re.finditer(rf"\b{day}\s+(?:of\s+)?{month}\b{year}", t):
        if free(*m.span()) and 1 <= int(m[1]) <= 31:
            yr = int(m[3]) if m[3] else None
            add(Quantity("date", (yr, _MONTHS[m[2]], int(m[1]))), m.span())
    for m in re.finditer(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?\b|\b(\d{1,2}):(\d{2})\b", t):
        if not free(*m.span()):
            continue
        if m[3]:
            h = int(m[1]) % 12 + (12 if m[3] == "p" else 0)
            mins = int(m[2] or 0)
        else:
            h, mins = int(m[4]), int(m[5])
        add(Quantity("clock", float(h * 60 + mins)), m.span())

    # Numbers (digits, words, ordinals) and the unit that follows them.
    tokens = [
        (m.group(), m.start(), m.end())
        for m in re.finditer(r"[a-z]+(?:-[a-z]+)?|(?<![\w.])-?\d+(?:\.\d+)?(?:st|nd|rd|th)?", t)
    ]  # noqa: E501
    words = [w for w, _, _ in tokens]
    i = 0
    while i < len(tokens):
        w, a, _ = tokens[i]
        value: float | None = None
        used = 1
        digits = re.fullmatch(r"(-?\d+(?:\.\d+)?)(?:st|nd|rd|th)?", w)
        if digits:
            value = float(digits[1])
        elif w in _ORDINALS:  # "the third": a number, never a duration ("second week")
            if free(a, tokens[i][2]):
                add(Quantity("number", float(_ORDINALS[w])), (a, tokens[i][2]))
            i += 1
            continue
        elif w in ("a", "an", "one") and i + 1 < len(words) and _unit_of(words[i + 1]):
            value = 1.0
        elif w == "twice":
            value = 2.0
        elif w == "once":
            value = 1.0
        elif w == "dozen" or (w == "a" and i + 1 < len(words) and words[i + 1] == "dozen"):
            value, used = 12.0, 1 if w == "dozen" else 2
        elif w == "half" and i + 2 < len(words) and words[i + 1] in ("a", "an"):
            unit = _unit_of(words[i + 2])
            if unit:
                dim, scale = _UNITS[unit]
                end = tokens[i + 2][2]
                if free(a, end):
                    add(Quantity(dim, 0.5 * scale, unit), (a, end))
                i += 3
                continue
        else:
            parsed = _word_number(words, i)
            if parsed:
                value, used = parsed
        if value is None:
            i += 1
            continue
        if words[i + used : i + used + 3] == ["and", "a", "half"]:  # "two and a half weeks"
            value, used = value + 0.5, used + 3
        end = tokens[i + used - 1][2]
        if not free(a, end):
            i += used
            continue
        nxt = words[i + used] if i + used < len(words) else ""
        unit = _unit_of(nxt)
        if unit:
            dim, scale = _UNITS[unit]
            stop = i + used + 1
            if words[stop : stop + 3] == ["and", "a", "half"]:  # "a week and a half"
                value, stop = value + 0.5, stop + 3
            add(Quantity(dim, value * scale, unit), (a, tokens[stop - 1][2]))
            i = stop
            continue
        add(Quantity("number", value), (a, end))
        i += used
    return _compound(out, t)


def _compound(found: list[Quantity], text: str) -> list[Quantity]:
    """ "3 weeks and 1 day", "1 hour 20 minutes": one duration (or length, mass), not two."""
    out: list[Quantity] = []
    for q in sorted(found, key=lambda q: q.span):
        last = out[-1] if out else None
        if (
            last is not None
            and last.unit is not None
            and q.unit is not None
            and q.kind == last.kind
            and q.kind in ("time", "month", "length", "mass", "volume")
            and _UNITS[q.unit][1] < _UNITS[last.unit][1]
            and re.fullmatch(r"\s*(?:,|and|,\s*and)?\s*", text[last.span[1] : q.span[0]])
        ):
            merged = float(last.value) + float(q.value)  # type: ignore[arg-type]
            out[-1] = replace(last, value=merged, span=(last.span[0], q.span[1]))
            continue
        out.append(q)
    return out


def _same(ref: Quantity, got: Quantity, *, off_by_one: bool) -> bool:
    if ref.kind != got.kind:
        # A bare number on either side ("3" and "3 weeks") matches the count of the other.
        bare = (ref.kind == "number" and got.unit is not None) or (
            got.kind == "number" and ref.unit is not None
        )
        return bare and abs(_count(got) - _count(ref)) < 1e-6
    if ref.kind == "date":
        ry, rm, rd = ref.value  # type: ignore[misc]
        gy, gm, gd = got.value  # type: ignore[misc]
        return (rm, rd) == (gm, gd) and (ry is None or gy is None or ry == gy)
    a, b = float(ref.value), float(got.value)  # type: ignore[arg-type]
    if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)):
        return True
    if off_by_one and ref.unit in _OFF_BY_ONE_UNITS:
        scale = _UNITS[ref.unit][1]
        return abs(float(ref.value) - float(got.value)) <= scale + 1e-9  # type: ignore[arg-type]
    return False


def _given(ref: Quantity, got: list[Quantity], off_by_one: bool) -> bool:
    """The reference value is in `got`, and not only as a bare number the response also
    writes with another unit ("7.5 + 5 = 12.5, so 12.5 miles" does not give 12.5 km)."""
    same = [g for g in got if _same(ref, g, off_by_one=off_by_one)]
    if ref.unit is None or any(g.unit is not None for g in same):
        return bool(same)
    other_unit = [g for g in got if g.unit is not None and g.unit != ref.unit
                  and abs(_count(g) - _count(ref)) < 1e-6]  # fmt: skip
    return bool(same) and not other_unit


def _count(q: Quantity) -> float:
    if q.unit is None:
        return float(q.value)  # type: ignore[arg-type]
    return float(q.value) / _UNITS[q.unit][1]  # type: ignore[arg-type]


def _stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def content_words(text: str) -> set[str]:
    """The reference's words that carry its content (no stop words, numbers or units)."""
    t = normalise(text)
    out = set()
    for w in _WORD.findall(t):
        w = w.split("'")[0]
        if w in _STOP or w in ("am", "pm") or re.fullmatch(r"\d+(?:st|nd|rd|th)?", w):
            continue
        if _unit_of(w) or w in _SMALL or w in _TENS or w in ("half", "quarter", "dozen"):
            continue
        if w in _MONTHS or w in _ORDINALS or len(w) < 2:
            continue
        out.add(_stem(w))
    return out


def _found(word: str, response_words: set[str]) -> bool:
    if word in response_words:
        return True
    # A longer form of the same word ("vegan" / "veganism"), never a short fragment.
    return len(word) >= 5 and any(r.startswith(word) or word.startswith(r) and len(r) >= 5
                                  for r in response_words)  # fmt: skip


ABSTENTION_RULE_PREFIX = "abstention:"  # every rule of the abstention branch says so


def decide(
    reference: str, response: str, *, question_type: str, abstention: bool, question: str = ""
) -> Match:
    """The protocol's verdict where a rule settles it, else an undecided Match.

    The rules read what the response concludes (`final_answer`), and a reference as every
    answer it accepts (`reference_answer.accepted`)."""
    if not (response or "").strip():
        return Match("no", "empty response", 0.0)
    if _pasted(response):
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
        cov = _coverage(words or content_words(reference), [], response)
        refused = bool(_REFUSAL.search(normalise(final.text)))
        return Match(None, "rubric: needs reading", cov, refused)
    alternatives = accepted(reference, question) or [reference]
    polar = _polarity_verdict(reference, final.text, response)
    if polar is not None:
        return polar
    chosen = _option_verdict(reference, final.text, question)
    if (chosen is None or chosen.verdict is None) and final.how != "whole":
        chosen = _option_verdict(reference, response, question) or chosen
    if chosen is not None:
        return chosen
    ordered = _order_verdict(reference, final.text, question)
    if ordered is not None:
        return ordered
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
    _stem(w)
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
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_LEAD_IN = re.compile(
    r"^\W*(?:(?:based\s+on|according\s+to|from|looking\s+at|after\s+(?:reviewing|checking))"
    r"\b[^,.:]{0,80}[,:]\s*)?",
    re.IGNORECASE,
)


def _polarity_verdict(reference: str, final: str, response: str) -> Match | None:
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
                return Match("yes" if same else "no", f"yes/no answer: {said[1].lower()}",
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


def _option_verdict(reference: str, text: str, question: str) -> Match | None:
    """An either/or question ("Which came first, A or B?", "Did I go with A or B?"): the
    option the response chooses, compared with the one the reference names; a response that
    names both and chooses neither has not answered. None when the question offers no two
    options or the reference is neither."""
    opt_words = _question_options(question)
    if opt_words is None:
        return None
    ref_words = content_words(reference)
    own = [len(ref_words & w) / max(1, len(w)) for w in opt_words]
    if max(own) < 0.5 or own[0] == own[1]:
        return None
    wanted = 0 if own[0] > own[1] else 1
    temporal = bool(_EARLIER.search(question) or _LATER.search(question))
    asks_later = bool(_LATER.search(question)) and not _EARLIER.search(question)
    resp = normalise(text)
    chosen = _chosen_option(resp, opt_words, asks_later, temporal)
    if chosen is None:
        named = [any(_first_place(c, w) is not None for c in _CLAUSE.split(resp)
                     if not _REFUSAL.search(c)) for w in opt_words]  # fmt: skip
        if all(named):
            return Match(None, "either/or: both options named, none chosen", 0.5)
        return None
    ok = chosen == wanted
    return Match("yes" if ok else "no", "either/or: the option the response chose", float(ok))


def _chosen_option(
    text: str, opt_words: list[set[str]], asks_later: bool, temporal: bool = True
) -> int | None:
    """Which option the response chooses: for a question of time, the one its last sentence
    naming them puts first (or last); otherwise the one its last sentence naming exactly one
    asserts (not denied)."""
    for sentence in reversed(re.split(r"(?<=[.!?\n])\s+", text)):
        if _REFUSAL.search(sentence):
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


def _word_places(text: str, word: str) -> list[tuple[int, int]]:
    """Where `word` (a content word, stemmed) occurs in `text` as a word of its own."""
    return [
        m.span() for m in _WORD.finditer(text) if _found(word, {_stem(m.group().split("'")[0])})
    ]


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


def _order_verdict(reference: str, text: str, question: str) -> Match | None:
    """A question about the order of events: the reference's items must appear in the
    response's conclusion in the same order. None when the reference is not a list of three or
    more items, or an item cannot be found (the other rules read it)."""
    if not _ORDER_QUESTION.search(question) or _REFUSAL.search(normalise(text)):
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
    return Match("yes" if ok else "no", "order: the reference's items in the response's order",
                 float(ok))  # fmt: skip


def plain_text(text: str) -> str:
    return re.sub(r"[*_`#]+", "", text).strip()


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


def _abstention(final: str, response: str) -> Match:
    """An unanswerable question: yes when the response says the record does not hold the
    answer (anywhere: "X is there, but not Y" is how a careful reader abstains), unless it
    guesses after all, or concludes with a value of its own."""
    whole, last = normalise(response), normalise(final)
    refusals = list(_REFUSAL.finditer(whole))
    if not refusals:
        return Match("no", "abstention: answered instead of recognising the gap", 0.0)
    after = whole[refusals[-1].end() :]
    if any(_GUESS.match(s) for s in re.split(r"(?<=[.!?])\s+", after) if s.strip()):
        return Match("no", "abstention: a refusal followed by a guess", 0.0, True)
    if last != whole and not _REFUSAL.search(last) and quantities(final):
        return Match("no", "abstention: concludes with an answer of its own", 0.0, True)
    return Match("yes", "abstention: recognised as unanswerable", 1.0, True)


def _decide_one(
    reference: str, response: str, *, question_type: str, question: str, revisions: bool = True
) -> Match:
    resp = normalise(response)
    refused = bool(_REFUSAL.search(resp))
    question_words = content_words(question)
    ref_values = quantities(reference)
    got_values = quantities(response)
    words = content_words(reference) - question_words or content_words(reference)
    off_by_one = question_type == "temporal-reasoning"
    matched = [_given(r, got_values, off_by_one) for r in ref_values]
    if not words and not ref_values:
        # Nothing but letters or symbols ("C D E F G"): the reference as written, in order.
        tokens = " ".join(_WORD.findall(normalise(reference)))
        there = bool(tokens) and f" {tokens} " in f" {' '.join(_WORD.findall(resp))} "
        return Match("yes" if there else "no", "the reference's sequence as written", float(there))
    cov = _coverage(words, matched, response)
    word_cov = _coverage(words, [], response) if words else 1.0

    if refused and _asserted_coverage(words, ref_values, response, off_by_one) < 0.5:
        # What the response says outside its "there is no record of X" sentences: a
        # reference named only where the response says it cannot find it is not given.
        return Match("no", "answerable question refused", cov, True)
    if ref_values and not all(matched):
        wrong = [
            r
            for r, ok in zip(ref_values, matched, strict=True)
            if not ok and any(_comparable(r, g) for g in got_values)
        ]
        if wrong and not words - _words_in(response):
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
    revised = list(_REVISION.finditer(resp)) if revisions else []
    last_ref = _ref_span(resp, words, ref_values, off_by_one)
    revised = [r for r in revised if last_ref is not None and r.start() >= last_ref[1]]
    if revised:
        tail = resp[revised[-1].end() :]
        if len(content_words(tail)) + len(quantities(tail)) >= 1:
            # Named, then revised away: the answer settled on is another one.
            return Match("no", "reference set aside by a revision", cov, refused)
    uncommitted = _uncommitted(reference, response, words, ref_values, off_by_one, refused)
    if uncommitted is not None:
        return Match("no", uncommitted, cov, refused)
    if _CORRECTION.search(resp) or _negated(resp, words, ref_values):
        return Match(None, "reference there beside a correction or negation", cov, refused)
    extra = [g for g in got_values if not any(_same(r, g, off_by_one=off_by_one)
                                              for r in ref_values)]  # fmt: skip
    if ref_values and any(_comparable(r, g) for r in ref_values for g in extra):
        return Match(None, "reference value beside other values of its kind", cov, refused)
    return Match("yes", "every reference value and word in the response", cov, refused)


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


def _uncommitted(
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
    if refused and all(_GUESS.match(c) for c in holding):
        return "a refusal, then a guess"
    return None


def _holds(clause: str, words: set[str], values: list[Quantity], off_by_one: bool) -> bool:
    got = quantities(clause)
    matched = [any(_same(r, g, off_by_one=off_by_one) for g in got) for r in values]
    return _coverage(words, matched, clause) >= 0.5 or (bool(values) and all(matched))


def _ref_span(
    clause: str, words: set[str], values: list[Quantity] = (), off_by_one: bool = False
) -> tuple[int, int] | None:
    """From the first to the last place the reference is named in `clause` (its words, as
    prefixes of the clause's words, and its values)."""
    spots = [span for w in words for span in _word_places(clause, w)]
    spots += [q.span for q in quantities(clause) if any(_same(r, q, off_by_one=off_by_one)
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
            ours = [any(_same(r, q, off_by_one=off_by_one) for r in values) for q in (a, b)]
            if ours[0] == ours[1] or not any(_comparable(r, q) for r in values for q in (a, b)):
                continue
            gap, before = clause[a.span[1] : b.span[0]], clause[max(0, a.span[0] - 12) : a.span[0]]
            joined = re.fullmatch(r"\s*(?:[ap]m\s*)?(?:,|or|to|-|–)\s*(?:maybe\s+)?", gap) or (
                re.fullmatch(r"\s*(?:[ap]m\s*)?and\s*", gap) and re.search(r"between\s*$", before)
            )
            # "from 3 to 4 a week" is a change, "3.1 weeks (or about 3)" the same value twice.
            if joined and not re.search(r"\bfrom\s*$", before) and not _near(a, b):
                return True
        return False
    span = _ref_span(clause, words)
    if span is None or len(words) > 4:
        return False
    before, after = clause[max(0, span[0] - 30) : span[0]], clause[span[1] : span[1] + 15]
    return bool(_NEXT_TO_OR.search(before) or (_OR_NEXT.match(after) and _CANDIDATES.search(
        clause[span[1] :])))  # fmt: skip


def _near(a: Quantity, b: Quantity) -> bool:
    """Two readings of about the same value (within 15 %): a restatement, not a choice."""
    if a.kind == "date" or b.kind == "date":
        return False
    x, y = _count(a), _count(b)
    return abs(x - y) <= 0.15 * max(abs(x), abs(y), 1e-9)


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
    span = _ref_span(clause, words, values)
    if span is None:
        return False
    start = span[0]
    head = clause[:start].rsplit(",", 1)[-1]  # "it wasn't Target, it was Walmart"
    neg = list(_NEGATION.finditer(head))
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
    span = _ref_span(clause, words, values)
    if span is None:
        return False
    head = clause[: span[0]]
    if not _BEFORE_NOW.search(head):
        return False
    tail = clause[span[1] :]
    # "from A to B": A is the source; a clause that names nothing after it is a plain past.
    return bool(re.search(r"\bto\b|\bbut\b|\bnow\b|\binstead\b", tail)) or "used to" in head


def _asserted_coverage(
    words: set[str], ref_values: list[Quantity], response: str, off_by_one: bool
) -> float:
    """The reference's coverage by the sentences of `response` that refuse nothing."""
    parts = re.split(r"(?<=[.!?;\n])\s+|,?\s+\b(?:but|however|although|though)\b", response)
    # Neither a refusal nor a question ("Pickle? Actually, I don't think you told me") asserts.
    kept = " ".join(
        s for s in parts if s and not s.rstrip().endswith("?") and not _REFUSAL.search(normalise(s))
    )
    got = quantities(kept)
    matched = [any(_same(r, g, off_by_one=off_by_one) for g in got) for r in ref_values]
    return _coverage(words, matched, kept)


# A transcript or retrieved passage handed back as the answer: a speaker or date label.
_TRANSCRIPT_LABEL = re.compile(
    r"^\s*\[[^\]\n]{0,40}\b(?:user|assistant)\]|^\s*(?:user|assistant|human|ai)\s*:",
    re.IGNORECASE | re.MULTILINE,
)


def _pasted(response: str) -> bool:
    """The response is (or starts with) a transcript: labelled turns, not an answer."""
    labels = _TRANSCRIPT_LABEL.findall(response)
    return bool(labels) and (len(labels) >= 2 or _TRANSCRIPT_LABEL.match(response) is not None)


def _list_part_missing(reference: str, response: str, question_words: set[str]) -> bool:
    """A short reference that lists items ("A, B and C") with one item wholly absent from
    the response while another is there: a partial answer, which the protocol calls a no."""
    if len(_WORD.findall(normalise(reference))) > 12:
        return False
    parts = [
        p for p in re.split(r",|;|\band\b(?!\s+a\s+half)|&", normalise(reference)) if p.strip()
    ]
    if len(parts) < 2:
        return False
    have = _words_in(response)
    found = []
    for part in parts:
        words = content_words(part) - question_words
        values = quantities(part)
        if not words and not values:
            return False  # a part with nothing to look for: not a list of answers
        got = [any(_same(v, g, off_by_one=False) for g in quantities(response)) for v in values]
        found.append(any(_found(w, have) for w in words) or any(got))
    return any(found) and not all(found)


def _comparable(ref: Quantity, got: Quantity) -> bool:
    if ref.kind.startswith("money:") and got.kind.startswith("money:"):
        return True  # another currency is another amount, not another kind of thing
    return ref.kind == got.kind or ref.kind == "number" and got.unit is not None


def _words_in(text: str) -> set[str]:
    return {_stem(w.split("'")[0]) for w in _WORD.findall(normalise(text))}


def _coverage(words: set[str], matched: list[bool], response: str) -> float:
    have = _words_in(response)
    found = sum(1 for w in words if _found(w, have)) + sum(matched)
    total = len(words) + len(matched)
    return found / total if total else 0.0


def _negated(resp: str, words: set[str], values: list[Quantity]) -> bool:
    """A negation in the same sentence as a reference word (the answer may be denied)."""
    for sentence in re.split(r"(?<=[.!?;])\s+", resp):
        if not _NEGATION.search(sentence):
            continue
        have = _words_in(sentence)
        if any(_found(w, have) for w in words) or (values and quantities(sentence)):
            return True
    return False
