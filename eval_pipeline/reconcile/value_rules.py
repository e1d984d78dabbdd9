"""Rules for values in text: numbers with units ("25 minutes", "$40", "12.5%") and dates
("May 5th", "2023-05-30", "last Tuesday", "3 days ago" — kept as written, not resolved).

Each rule yields a `ValueMatch` (span, type, surface text, key). Overlaps are settled by the
caller (`entity_rules`): the earliest, then the longest match wins, so "25 minutes ago" is one
date rather than a quantity plus a stray word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from eval_pipeline.reconcile.models import normalise_name

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_WORD_NUMBERS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15",
    "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
    "a hundred": "100", "hundred": "100",
}  # fmt: skip
_WORDNUM = "|".join(sorted(_WORD_NUMBERS, key=len, reverse=True))

# Unit spelling → canonical form used in the entity key ("25 min" and "25 minutes" are one).
_UNIT_CANON = {
    "seconds": ("seconds", "second", "secs", "sec"),
    "minutes": ("minutes", "minute", "mins", "min"),
    "hours": ("hours", "hour", "hrs", "hr"),
    "days": ("days", "day"),
    "nights": ("nights", "night"),
    "weeks": ("weeks", "week"),
    "months": ("months", "month"),
    "years": ("years", "year", "yrs"),
    "km": ("kilometers", "kilometres", "kilometer", "kilometre", "km"),
    "miles": ("miles", "mile", "mi"),
    "meters": ("meters", "metres", "meter", "metre"),
    "cm": ("centimeters", "centimetres", "cm"),
    "mm": ("millimeters", "millimetres", "mm"),
    "feet": ("feet", "foot", "ft"),
    "inches": ("inches", "inch"),
    "yards": ("yards", "yard"),
    "kg": ("kilograms", "kilogram", "kilos", "kilo", "kg"),
    "g": ("grams", "gram", "g"),
    "lbs": ("pounds", "pound", "lbs", "lb"),
    "oz": ("ounces", "ounce", "oz"),
    "liters": ("liters", "litres", "liter", "litre", "l"),
    "ml": ("milliliters", "millilitres", "ml"),
    "gallons": ("gallons", "gallon", "gal"),
    "cups": ("cups", "cup"),
    "tbsp": ("tablespoons", "tablespoon", "tbsp"),
    "tsp": ("teaspoons", "teaspoon", "tsp"),
    "calories": ("calories", "calorie", "kcal", "cal"),
    "dollars": ("dollars", "dollar", "bucks", "usd"),
    "euros": ("euros", "euro", "eur"),
    "cents": ("cents", "cent"),
    "%": ("percent", "per cent", "%"),
    "°F": ("°f",),
    "°C": ("°c",),
    "degrees": ("degrees", "degree", "°"),
    "mph": ("mph",),
    "km/h": ("km/h", "kph"),
    "gb": ("gb",),
    "mb": ("mb",),
    "tb": ("tb",),
    "k": ("k",),
    "steps": ("steps",),
    "laps": ("laps",),
    "reps": ("reps",),
    "sets": ("sets",),
    "servings": ("servings", "serving"),
    "pages": ("pages", "page"),
    "books": ("books",),
    "chapters": ("chapters",),
    "episodes": ("episodes",),
    "times": ("times",),
    "people": ("people", "persons"),
    "guests": ("guests",),
    "items": ("items",),
    "pieces": ("pieces",),
    "tickets": ("tickets",),
    "sessions": ("sessions",),
    "classes": ("classes",),
    "lessons": ("lessons",),
    "movies": ("movies",),
    "songs": ("songs",),
    "photos": ("photos",),
    "points": ("points",),
    "stars": ("stars",),
    "bedrooms": ("bedrooms",),
    "rooms": ("rooms",),
    "followers": ("followers",),
    "plants": ("plants",),
    "bottles": ("bottles",),
    "acres": ("acres",),
    "sq ft": ("square feet", "sq ft"),
}
_GLUED_UNITS = frozenset({"%", "°F", "°C", "k"})
_UNIT_OF = {spelling: canon for canon, spellings in _UNIT_CANON.items() for spelling in spellings}
_UNITS = "|".join(re.escape(u) for u in sorted(_UNIT_OF, key=len, reverse=True))
# Boundaries are ASCII-only on purpose: text without spaces (Chinese, Japanese) puts letters
# right against numbers ("東京で3 km走った"), and `\w` would refuse those matches.

# Word numbers only make sense with units of time, distance or count ("two hours").
_WORD_UNITS = "|".join(
    re.escape(u)
    for u in sorted(_UNIT_OF, key=len, reverse=True)
    if _UNIT_OF[u] not in {"%", "degrees", "°F", "°C", "g", "k", "gb", "mb", "tb", "mph", "km/h"}
    and len(u) > 2
)

_CURRENCY_SYMBOL = {"$": "$", "€": "€", "£": "£", "¥": "¥", "₹": "₹"}
_SCALES = r"k|K|million|billion|thousand|bn|M"

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_MONTH_ABBR = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec"
_MON = f"{_MONTHS}|{_MONTH_ABBR}"
_WEEKDAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_ORD = r"(?:st|nd|rd|th)?"


def _cases(alternatives: str) -> str:
    """Each alternative as written and capitalised ("last|Last|next|Next"): a case-sensitive
    alternation is much faster than `(?i:...)` at the start of a pattern."""
    words = alternatives.split("|")
    return "|".join(dict.fromkeys(w2 for w in words for w2 in (w, w[:1].upper() + w[1:])))


_HOLIDAYS = (
    r"Christmas(?: Eve| Day)?|Thanksgiving|Easter|Halloween|New Year's(?: Eve| Day)?|"
    r"Valentine's Day|Mother's Day|Father's Day|Labor Day|Memorial Day|Fourth of July|"
    r"Black Friday|Hanukkah|Diwali|Ramadan|Lunar New Year"
)


def _starting_with_one_of(alternatives: str) -> str:
    """A lookahead for the first letters of `alternatives` (plain words, `|`-separated). Put
    after a leading `\\b`, it rejects most positions with one set test instead of trying every
    alternative there (a pattern that starts with `\\b` gets no first-character scan from the
    regex compiler). It only restates what the alternatives require, so matches are the same."""
    return "(?=[" + "".join(sorted({re.escape(w[0]) for w in alternatives.split("|")})) + "])"


# Patterns compiled without their leading `\b`, which `_word_start_matches` checks instead. A
# pattern that starts with a plain alternation gets a first-character scan from the regex
# compiler; one that starts with `\b` is tried at every position, several times slower.
_AT_WORD_START: set[re.Pattern[str]] = set()


def _at_word_start(source: str) -> re.Pattern[str]:
    """`source` is `\\b` and then a pattern whose every match starts with a word character."""
    if not source.startswith("\\b(?:"):
        raise ValueError(f"not a word-start pattern: {source[:20]!r}")
    pattern = re.compile(source[2:])
    _AT_WORD_START.add(pattern)
    return pattern


def _word_start_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """What `finditer` of `\\b` + `pattern` yields. Its match at a position is `pattern`'s when
    `\\b` holds there — `pattern` starts with a word character, so when the character before is
    none (or there is none) — and there is none where `\\b` fails; so the leftmost match is
    taken when it starts a word, else the search goes on one character later."""
    pos = 0
    while (match := pattern.search(text, pos)) is not None:
        start = match.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            yield match
            pos = match.end()  # never empty: it holds a word character
        else:
            pos = start + 1


_DIGIT = re.compile(r"\d")
_MONTH_WORD = re.compile(_MON)
_WEEKDAY_WORD = re.compile(_WEEKDAYS)


class _AnyOf:
    """A gate of plain substrings, for words a regex would scan for slowly (their first letters
    are common): `in` runs several times faster than a regex over the same text."""

    def __init__(self, *needles: str) -> None:
        self.needles = needles

    def search(self, text: str) -> bool | None:
        return True if any(needle in text for needle in self.needles) else None


# A tuple gate: every one of its gates must find something.
_Gate = re.Pattern[str] | _AnyOf | tuple[re.Pattern[str] | _AnyOf, ...] | None
_RELATIVE_WORD = _AnyOf("ago", "later", "earlier")
_MONTH_AND_DIGIT = (_MONTH_WORD, _DIGIT)  # a month name with a day or year
# Every spelling the "yesterday" pattern knows, minus its first letter (either case).
_NEAR_DAY_WORD = _AnyOf("esterday", "oday", "onight", "omorrow")

# (pattern, gate): a pattern runs only if its gate (a cheap scan) finds something. Most turns
# hold no month name, weekday, holiday or "ago", so most patterns are skipped. A gate must find
# something in every text its pattern matches (it is a part every match contains).
QUANTITY_PATTERNS: tuple[tuple[re.Pattern[str], _Gate], ...] = (
    (
        re.compile(rf"(?<![A-Za-z0-9$€£¥₹])[$€£¥₹]\s?{_NUM}(?:\s?(?:{_SCALES})(?![A-Za-z0-9]))?"),
        _DIGIT,
    ),
    (
        re.compile(rf"(?<![A-Za-z0-9.,:/$€£¥₹-]){_NUM}(?:\s?|-)(?i:{_UNITS})(?![A-Za-z0-9])"),
        _DIGIT,
    ),
    (
        re.compile(
            rf"\b{_starting_with_one_of(_cases(_WORDNUM))}(?:{_cases(_WORDNUM)})[\s-]"
            rf"(?i:{_WORD_UNITS})\b"
        ),
        None,
    ),
    # Currency after the amount, with a decimal comma as written in much of Europe ("3,50 €").
    (re.compile(r"(?<![A-Za-z0-9.,])\d+(?:[.,]\d{1,2})?\s?[€£¥₹](?![A-Za-z0-9])"), _DIGIT),
)

DATE_PATTERNS: tuple[tuple[re.Pattern[str], _Gate], ...] = (
    (re.compile(r"(?<![\w/-])\d{4}[-/]\d{1,2}[-/]\d{1,2}(?![\w/-])"), _DIGIT),
    (re.compile(r"(?<![\w/-])\d{1,2}/\d{1,2}/(?:\d{4}|\d{2})(?![\w/-])"), _DIGIT),
    (re.compile(rf"\b(?:{_MON})\.?\s+\d{{1,2}}{_ORD}(?:,?\s+\d{{4}})?\b(?!:)"), _MONTH_AND_DIGIT),
    (
        re.compile(rf"\b\d{{1,2}}{_ORD}\s+(?:of\s+)?(?:{_MON})\b\.?(?:,?\s+\d{{4}}\b)?"),
        _MONTH_AND_DIGIT,
    ),
    (re.compile(rf"\b(?:{_MONTHS})\s+(?:of\s+)?\d{{4}}\b"), _MONTH_AND_DIGIT),
    (
        re.compile(rf"\b(?:{_cases('last|next|this|early|late|mid|past')})[\s-]+(?:{_MONTHS})\b"),
        _MONTH_WORD,
    ),
    (
        re.compile(
            rf"\b(?:{_cases('in|since|until|till|by|during|through|from')})\s+"
            rf"(?P<d>{_MONTHS})\b"
        ),
        _MONTH_WORD,
    ),
    (
        re.compile(
            rf"\b(?:(?:{_cases('last|next|this|every|past|coming')})\s+)?(?:{_WEEKDAYS})s?\b"
        ),
        _WEEKDAY_WORD,
    ),
    (
        _at_word_start(
            rf"\b(?:{_cases('the day before yesterday|the day after tomorrow|yesterday|today')}"
            rf"|{_cases('tonight|tomorrow')})\b"
        ),
        _NEAR_DAY_WORD,
    ),
    (
        _at_word_start(
            rf"\b(?:{_cases('last|next|this|past|coming|previous')})\s+(?:week|weekend|month|"
            r"year|summer|winter|spring|fall|autumn|night|morning|evening|afternoon|semester|"
            r"quarter)\b"
        ),
        None,
    ),
    (
        re.compile(
            rf"(?<![\w.,])(?:{_NUM}|(?i:{_WORDNUM}|a couple of|a few|several|an|a))\s+"
            r"(?i:days?|weeks?|months?|years?|hours?|minutes?)\s+(?:ago|later|earlier)\b"
        ),
        _RELATIVE_WORD,
    ),
    (
        re.compile(
            rf"\b(?:{_cases('in|since|from|until|till|by|during|around|circa')})\s+"
            r"(?P<d>(?:19|20)\d{2})\b(?!\s*(?:%|[a-z]))"
        ),
        _DIGIT,
    ),
    (re.compile(r"(?<![\w:.])\d{1,2}(?::\d{2})?\s?(?i:am|pm|a\.m\.|p\.m\.)(?!\w)"), _DIGIT),
    (re.compile(r"(?<![\w:.])(?:[01]?\d|2[0-3]):[0-5]\d(?![\w:])"), _DIGIT),
    (re.compile(rf"\b(?:{_HOLIDAYS})\b"), re.compile(_HOLIDAYS)),
)


@dataclass(frozen=True)
class ValueMatch:
    start: int
    end: int
    type: str  # "quantity" | "date"
    text: str
    key: str


def quantity_key(text: str) -> str:
    """Canonical key of a quantity: commas dropped, unit spellings folded ("2 hrs" = "two
    hours" = "2 hours")."""
    surface = text.strip()
    if surface[:1] in _CURRENCY_SYMBOL or surface[-1:] in _CURRENCY_SYMBOL:
        return "quantity:" + re.sub(r"[\s,]", "", surface).lower()
    match = re.match(rf"(?i)({_NUM}|{_WORDNUM})(?:-|\s?)(.+)$", surface)
    if not match:
        return "quantity:" + normalise_name(surface)
    number, unit = match.group(1), match.group(2)
    number = _WORD_NUMBERS.get(number.casefold(), number).replace(",", "")
    canon = _UNIT_OF.get(unit.casefold(), normalise_name(unit))
    glue = "" if canon in _GLUED_UNITS else " "
    return f"quantity:{number}{glue}{canon}"


def date_key(text: str) -> str:
    return "date:" + normalise_name(text)


def _gate_parts(gate: _Gate) -> tuple[re.Pattern[str] | _AnyOf, ...]:
    if gate is None:
        return ()
    return gate if isinstance(gate, tuple) else (gate,)


# (pattern, the gates that must all find something, is-a-date), in the order they run.
_RULES = tuple(
    (pattern, _gate_parts(gate), is_date)
    for patterns, is_date in ((DATE_PATTERNS, True), (QUANTITY_PATTERNS, False))
    for pattern, gate in patterns
)
# Every gate serves at least one pattern, so each is scanned once per text, up front.
_ALL_GATES = tuple(dict.fromkeys(g for _, parts, _ in _RULES for g in parts))


def find_values(text: str) -> Iterator[ValueMatch]:
    """Every date and quantity candidate in `text` (overlapping; the caller picks)."""
    hit = {gate: gate.search(text) is not None for gate in _ALL_GATES}
    for pattern, gates, is_date in _RULES:
        if not all(map(hit.__getitem__, gates)):
            continue
        matches = (
            _word_start_matches(pattern, text)
            if pattern in _AT_WORD_START
            else pattern.finditer(text)
        )
        if is_date:
            for match in matches:
                group = "d" if "d" in pattern.groupindex and match.group("d") else 0
                start, end = match.span(group)
                surface = text[start:end]
                yield ValueMatch(start, end, "date", surface, date_key(surface))
        else:
            for match in matches:
                surface = match.group(0)
                yield ValueMatch(
                    match.start(), match.end(), "quantity", surface, quantity_key(surface)
                )


def pick_non_overlapping(matches: list[ValueMatch]) -> list[ValueMatch]:
    """Earliest first, then longest; a later match overlapping an accepted one is dropped."""
    chosen: list[ValueMatch] = []
    last_end = -1
    for m in sorted(matches, key=lambda m: (m.start, -(m.end - m.start), m.type)):
        if m.start >= last_end:
            chosen.append(m)
            last_end = m.end
    return chosen
