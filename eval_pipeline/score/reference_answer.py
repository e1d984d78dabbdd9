"""What a LongMemEval reference accepts: its alternatives, and the part an answer must give.

References are written for a reading judge, not for a string match:

- "3 days ago. 4 days (including the last day) is also acceptable." accepts either count;
  "One week. Answers ranging from 7 days to 10 days are also acceptable." a range;
- "11 days (or 12 days, if ...)" and "15 hours ... (or 30 hours for the round trip)" an
  alternative in parentheses;
- "Previously, you ... every week. Currently, you play tennis every other week." wants only
  what is current (a knowledge update);
- "2 weeks for A, 4 weeks for B, and 2 weeks for C, so a total of 8 weeks." wants the total;
- "I attended three weddings. The couples were ..." answers "how many" with its first
  sentence; the rest is what the count is made of.

`accepted(reference, question)` returns every alternative as text; a response that gives any
one of them gives the answer. A reference of another shape is one alternative, as written.
"""

from __future__ import annotations

import re

_ALSO = re.compile(
    r"(?P<alt>[^.]*?)\s*(?:\([^)]*\)\s*)?(?:is|are)\s+also\s+(?:acceptable|accepted|"
    r"correct|fine|ok(?:ay)?)\b[^.]*\.?",
    re.IGNORECASE,
)
_RANGE = re.compile(
    r"\branging\s+from\s+(?P<low>[\w.]+)\s+(?P<unit>[a-z]+)?\s*to\s+(?P<high>[\w.]+)\s+"
    r"(?P<unit2>[a-z]+)",
    re.IGNORECASE,
)
_PAREN_OR = re.compile(r"\(\s*or\s+(?P<alt>[^),]+)[^)]*\)", re.IGNORECASE)
_NOW = re.compile(
    r"(?:^|[.;]\s+)(?:now|currently|at\s+present|these\s+days|today|as\s+of\s+now|"
    r"most\s+recently|recently)\b,?\s*(?P<now>[^.]+)",
    re.IGNORECASE,
)
_BEFORE = re.compile(r"^\s*(?:previously|before|initially|originally|at\s+first|when\b)", re.I)
_ALIAS = re.compile(r"\s*\((?P<alias>[^()]{2,40})\)\s*\.?\s*$")
_TOTAL = re.compile(
    r"\b(?:so|which\s+makes|making|for)\s+(?:a\s+|the\s+)?total\s+(?:of\s+)?(?P<total>[^.,;]+)",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|"
    r"twenty|thirty|forty|fifty|hundred|a\s+dozen|once|twice)\b",
    re.IGNORECASE,
)
_COUNT_QUESTION = re.compile(r"^\s*how\s+(?:many|much|long|often|old|far)\b", re.IGNORECASE)


def accepted(reference: str, question: str = "") -> list[str]:
    """Every answer the reference accepts, as text (the first is the main one)."""
    ref = (reference or "").strip()
    if not ref:
        return []
    alts: list[str] = []
    also = _ALSO.search(ref)
    if also:
        main = ref[: also.start()].strip().rstrip(".")
        rng = _RANGE.search(ref)
        if rng:
            unit = rng["unit2"] or rng["unit"] or ""
            alts += [main, f"{rng['low']} {unit}".strip(), f"{rng['high']} {unit}".strip()]
            alts += _between(rng["low"], rng["high"], unit)
        else:
            alts += [main, re.sub(r"\([^)]*\)", "", also["alt"]).strip()]
        return _unique(a for a in alts if a)
    paren = _PAREN_OR.search(ref)
    if paren:
        main = (ref[: paren.start()] + ref[paren.end() :]).strip()
        return _unique([main, paren["alt"].strip()])
    first, _, rest = ref.partition(". ")
    if rest and _BEFORE.match(first):
        now = _NOW.search(ref)
        if now:
            return [now["now"].strip()]
    alias = _ALIAS.search(ref)
    if alias:  # "University of California, Los Angeles (UCLA)", "Yes. (A road bike too.)"
        return _unique([ref[: alias.start()].strip(), alias["alias"].strip(), ref])
    total = _TOTAL.search(ref)
    if total and _NUMBER.search(total["total"]):
        return [total["total"].strip()]
    if _COUNT_QUESTION.match(question):
        # "I attended three weddings. The couples were ...", "I visited three doctors: a ...":
        # the count is the answer, the rest what it is made of.
        head = re.split(r"(?<=[a-z0-9)])[.:]\s+", ref, maxsplit=1)
        if len(head) == 2 and _NUMBER.search(head[0]):
            return [head[0].strip()]
    return [ref]


def _between(low: str, high: str, unit: str) -> list[str]:
    """The whole numbers strictly between a range's ends, with its unit."""
    try:
        a, b = int(low), int(high)
    except ValueError:
        return []
    return [f"{n} {unit}".strip() for n in range(a + 1, b)] if 0 < b - a <= 31 else []


def _unique(items) -> list[str]:
    out: list[str] = []
    for item in items:
        if item and item not in out:
            out.append(item)
    return out
