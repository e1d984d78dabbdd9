"""Values in an answer's text, compared as values: numbers (digits, number words, ordinals,
thousands separators, "12k", a dozen), durations, lengths, masses and volumes in their units
(two weeks is 14 days, 1500 ml is 1.5 litres, "3 weeks and 1 day" one duration), money in its
currency ("€1,200" is not "$1,200"), temperatures ("24 °F" is not 24 °C), dates in any common
order and clock times. `normalise` writes a text so its values read one way (currency signs as
units, "every week" as "weekly"); `quantities` reads them, each with where it was read.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace

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


SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip


TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip


ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12,
}  # fmt: skip


_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


MONTHS = {
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


@dataclass(frozen=True)
class Quantity:
    kind: str  # "number" | "time" | "month" | "date" | "clock"
    value: float | tuple[int | None, int, int]
    unit: str | None = None  # the unit as written (singular), for the off-by-one rule
    # Where it was read in the normalised text (`normalise`); not part of the value.
    span: tuple[int, int] = field(default=(0, 0), compare=False)
    # Given as a bound ("less than 3 weeks", "on or before February 1st"), not as the value.
    bound: bool = field(default=False, compare=False)
    # A compound ("4 weeks and 2 days"): the count in its leading unit (4), as said.
    lead: float | None = field(default=None, compare=False)


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


# Words that make a value a bound rather than the value.
_BOUND = re.compile(
    r"\b(?:on\s+or\s+(?:before|after)|less\s+than|fewer\s+than|more\s+than|at\s+least|"
    r"at\s+most|no\s+more\s+than|no\s+less\s+than)\s+"
    r"(?:the\s+)?$"
)


def _celsius(fahrenheit: float) -> float:
    return (fahrenheit - 32) * 5 / 9


def _clock_words(m: re.Match) -> str:
    """ "quarter past eight" -> "8:15" (an hour word or digits; else left as written)."""
    hour = int(m[3]) if m[3].isdigit() else SMALL.get(m[3])
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
        if len(parts) == 2 and parts[0] in TENS and parts[1] in SMALL:
            val = TENS[parts[0]] + SMALL[parts[1]]
            current = (current or 0) + val
        elif w in SMALL:
            current = (current or 0) + SMALL[w]
        elif w in TENS:
            current = (current or 0) + TENS[w]
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
            and (words[j + 1] in SMALL or words[j + 1] in TENS)
        ):
            pass
        else:
            break
        j += 1
        used = j - i
    if used == 0 or current is None and total == 0:
        return None
    return float(total + (current or 0)), used


def unit_of(word: str) -> str | None:
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
        bound = _BOUND.search(t[max(0, span[0] - 20) : span[0]]) is not None
        out.append(replace(q, span=span, bound=bound))
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
            add(Quantity("date", (yr, MONTHS[m[1]], int(m[2]))), m.span())
    for m in re.finditer(rf"\b{day}\s+(?:of\s+)?{month}\b{year}", t):
        if free(*m.span()) and 1 <= int(m[1]) <= 31:
            yr = int(m[3]) if m[3] else None
            add(Quantity("date", (yr, MONTHS[m[2]], int(m[1]))), m.span())
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
        elif w in ORDINALS:  # "the third": a number, never a duration ("second week")
            if free(a, tokens[i][2]):
                add(Quantity("number", float(ORDINALS[w])), (a, tokens[i][2]))
            i += 1
            continue
        elif w in ("a", "an", "one") and i + 1 < len(words) and unit_of(words[i + 1]):
            value = 1.0
        elif w == "twice":
            value = 2.0
        elif w == "once":
            value = 1.0
        elif w == "dozen" or (w == "a" and i + 1 < len(words) and words[i + 1] == "dozen"):
            value, used = 12.0, 1 if w == "dozen" else 2
        elif w == "half" and i + 2 < len(words) and words[i + 1] in ("a", "an"):
            unit = unit_of(words[i + 2])
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
        unit = unit_of(nxt)
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
            lead = last.lead if last.lead is not None else _count(last)
            out[-1] = replace(last, value=merged, span=(last.span[0], q.span[1]), lead=lead)
            continue
        out.append(q)
    return out


def same_value(ref: Quantity, got: Quantity, *, off_by_one: bool) -> bool:
    if ref.kind != got.kind:
        # A bare number on either side ("3" and "3 weeks") matches the count of the other.
        bare = (ref.kind == "number" and got.unit is not None) or (
            got.kind == "number" and ref.unit is not None
        )
        if {ref.unit, got.unit} == {"gbp", "pound"}:  # "£230" and "230 pounds"
            return (
                abs(float(ref.value) - float(got.value) / _UNITS["pound"][1]) < 1e-6
                or abs(float(got.value) - float(ref.value) / _UNITS["pound"][1]) < 1e-6
            )
        if not bare:
            return False
        # "4 weeks and 2 days" counts 4 weeks as a bare "4" reads it.
        counts = {_count(got), *([got.lead] if got.lead is not None else [])}
        return any(abs(c - _count(ref)) < 1e-6 for c in counts)
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


def given(ref: Quantity, got: list[Quantity], off_by_one: bool) -> bool:
    """The reference value is in `got`, and not only as a bare number the response also
    writes with another unit ("7.5 + 5 = 12.5, so 12.5 miles" does not give 12.5 km)."""
    same = [g for g in got if same_value(ref, g, off_by_one=off_by_one) and not g.bound]
    if ref.unit is None or any(g.unit is not None for g in same):
        return bool(same)
    other_unit = [g for g in got if g.unit is not None and g.unit != ref.unit
                  and abs(_count(g) - _count(ref)) < 1e-6]  # fmt: skip
    return bool(same) and not other_unit


def _count(q: Quantity) -> float:
    if q.unit is None:
        return float(q.value)  # type: ignore[arg-type]
    return float(q.value) / _UNITS[q.unit][1]  # type: ignore[arg-type]


def near(a: Quantity, b: Quantity) -> bool:
    """Two readings of about the same value (within 15 %): a restatement, not a choice."""
    if a.kind == "date" or b.kind == "date":
        return False
    x, y = _count(a), _count(b)
    return abs(x - y) <= 0.15 * max(abs(x), abs(y), 1e-9)


def comparable(ref: Quantity, got: Quantity) -> bool:
    if ref.kind.startswith("money:") and got.kind.startswith("money:"):
        return True  # another currency is another amount, not another kind of thing
    return ref.kind == got.kind or ref.kind == "number" and got.unit is not None
