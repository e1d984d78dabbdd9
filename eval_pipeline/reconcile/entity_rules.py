"""Entities by rules, no model: proper names, quantities and dates in a piece of text.

Proper names are runs of capitalised words ("New York City", "Bank of America", "Zoë
Kravitz"); a lone capitalised word counts when it is not the first word of a sentence (where
every word is capitalised) unless the gazetteer knows it. Their type comes from the gazetteer,
titles and suffixes ("Dr. Patel", "Lake Tahoe", "Acme Inc"), or a cue word just before
("my sister Ana", "a trip to Lisbon"); otherwise `other` — a guess would be worse than no type.
Values (dates, quantities) are found first and never become part of a name.

Capitalisation is read with `str.isupper()`, so accented and non-Latin cased scripts work;
scripts without case (CJK, Arabic, …) yield no names, only values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eval_pipeline.reconcile import gazetteer as gz
from eval_pipeline.reconcile.models import entity_key, normalise_name
from eval_pipeline.reconcile.value_rules import find_values, pick_non_overlapping

# A word: starts and ends with a letter or digit; may hold ' ’ . - & inside ("O'Neil",
# "U.S", "Ji-woo", "AT&T").
_WORD = re.compile(r"[^\W_](?:[\w'’.&-]*[^\W_])?")
_POSSESSIVE = re.compile(r"['’]s$")
# Characters after which the next word starts a sentence, list item, heading or table cell.
_BOUNDARY_CHARS = frozenset('.!?:;"“”(*#-•|>[')
_CONNECTORS = frozenset("of the de la del da di du von van der den le y el los las".split())
_TITLE_CASE_FUNCTION_WORDS = frozenset(
    "Of And For To In With On At By From A An Is Are Your".split()
)
_MAX_NAME_WORDS = 6  # longer capitalised runs are headings in Title Case, not names

# Capitalised words that are not names (sentence openers, pronouns, interjections, headings).
_COMMON = frozenset(
    """
    i i'm i've i'll i'd the a an my our your his her their its this that these those it we you
    he she they me us them here there what when where why how who which yes no not hi hello hey
    thanks thank sure also and but so or if please oh well great okay ok let let's can could
    would should do does did is are was were be been have has had will just some any many most
    all each every as at in on for from to with by after before since then now today yesterday
    tomorrow additionally however finally first second third next lastly overall note step tip
    example remember consider try make use keep start check look find get take set add plan
    choose include don't didn't isn't it's that's there's here's what's you're we're they're
    one two three four five six seven eight nine ten another other more less very really maybe
    perhaps also anyway actually definitely absolutely certainly good nice wow awesome cool
    sounds dear best regards cheers sorry congratulations congrats welcome goodbye bye
    understanding key important option options benefits pros cons summary conclusion introduction
    tips ideas steps things ways notes question answer user assistant morning evening afternoon
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december spring summer autumn fall winter
    """.split()
)
_NOT_PLACE_ENDINGS = ("ish", "ese", "ism", "ian", "ic", "ics", "ing")


@dataclass(frozen=True)
class FoundEntity:
    start: int
    end: int
    type: str
    name: str
    key: str


class _Token:
    """A word that can be part of a name: capitalised, or a lower-case connector ("of")."""

    __slots__ = ("start", "end", "text", "initial", "capitalised", "norm")

    def __init__(self, start: int, end: int, text: str, initial: bool, capitalised: bool) -> None:
        self.start = start
        self.end = end
        self.text = text
        self.initial = initial  # first word of a sentence, list item, heading or table cell
        self.capitalised = capitalised
        self.norm = text.casefold().replace("’", "'")


def find_entities(text: str) -> list[FoundEntity]:
    """Entities in `text` in order of appearance; overlapping spans never both appear."""
    values = pick_non_overlapping(list(find_values(text)))
    found = [FoundEntity(v.start, v.end, v.type, v.text, v.key) for v in values]
    found.extend(_find_names(text, [(v.start, v.end) for v in values]))
    found.sort(key=lambda e: (e.start, e.end))
    return found


# ---- proper names ----------------------------------------------------------------------


# Most words are lower-case and can never be part of a name. `_SCAN` consumes them, with the
# separators between words, inside the regex engine, so the Python loop in `_tokens` sees only
# the other words (capitalised, digits, connectors, lower-case words outside Latin-1 — those are
# still judged there, as before). Word boundaries stay exactly `_WORD`'s: a word is a maximal
# run of [\w'’.&-] trimmed to its first and last letter or digit, so a word is skipped only when
# no letter or digit follows in the same run (`_RUN_ENDS`); otherwise `word` matches it whole.
# `gap` is the run of non-alphanumerics right before `word` (the last separator consumed).
_LOWER = "a-zß-öø-ÿ"  # str.islower() holds for every one of these (checked in the tests)
_RUN_ENDS = r"(?![\w'’.&-]*[^\W_])"
_SKIPPED_WORD = (
    rf"(?!(?:{'|'.join(sorted(_CONNECTORS))}){_RUN_ENDS})"
    rf"[{_LOWER}]++(?:['’.&-]++[{_LOWER}]++)*+{_RUN_ENDS}"  # possessive: no backtracking
)
_SCAN = re.compile(rf"(?:(?P<gap>[\W_]++)|{_SKIPPED_WORD})*+(?P<word>{_WORD.pattern})?")


def _tokens(text: str, masked: list[tuple[int, int]]) -> list[_Token]:
    """The words that can make names, in order: capitalised words, lower-case connectors
    ("Bank of America") and numbers (a model after a product line: "iPhone 14"). Words
    between two of them show in the gap, which then does not join them into one name.

    This runs over every word of the corpus, so the common case — a lower-case word — is
    dismissed first, mostly by `_SCAN` before any Python code runs.
    """
    out: list[_Token] = []
    mask_index, n_masked = 0, len(masked)
    for match in _SCAN.finditer(text):
        word = match.group("word")
        if word is None:
            continue  # the text's tail: separators and skipped words only
        first = word[0]
        if first.islower():
            if word.islower():
                if word not in _CONNECTORS:
                    continue
                capitalised = False
            else:
                capitalised = True  # brand casing: "iPhone", "eBay", "macOS"
        elif first.isupper():
            capitalised = True
        elif first.isdigit():
            capitalised = False
        else:
            continue  # scripts without case (CJK, Arabic, ...)
        start, end = match.span("word")
        while mask_index < n_masked and masked[mask_index][1] <= start:
            mask_index += 1
        if mask_index < n_masked and masked[mask_index][0] < end:
            continue  # part of a date or quantity
        gap_start = match.start("gap")
        if gap_start < 0 or match.end("gap") != start:  # no separator: the text's first word
            gap_start = start
            while gap_start > 0 and not text[gap_start - 1].isalnum():
                gap_start -= 1
        gap = text[gap_start:start]
        stripped = gap.strip()
        initial = gap_start == 0 or (bool(stripped) and stripped[-1] in _BOUNDARY_CHARS)
        if "\n" in gap:
            initial = True
        elif stripped == "." and _after_title(text, gap_start):
            initial = False  # "Dr. Patel": the period closes the title, not a sentence
        out.append(_Token(start, end, word, initial, capitalised))
    return out


# Every ending of a title ("mrs", "rs", "s", ...), to rule out most words by their last two
# characters. Case folding is per character, so a word that folds to a title ends with two
# characters that fold to an ending of it; no single character folds to a whole title.
_TITLE_ENDINGS = frozenset(title[i:] for title in gz.PERSON_TITLES for i in range(len(title)))


def _after_title(text: str, end: int) -> bool:
    """True when the word ending at `end` is a person's title ("Dr", "Mrs"). Every sentence
    start asks, so most words are ruled out before any tokenising."""
    if end < 2 or text[end - 2 : end].casefold() not in _TITLE_ENDINGS:
        return False
    return bool(set(_words_before(text, end, 1)) & gz.PERSON_TITLES)


_WORDS_BEFORE = 60  # characters looked back for cue words ("my friend", "a trip to")


def _words_before(text: str, start: int, count: int) -> list[str]:
    """Up to `count` words right before `start`, nearest first, case-folded."""
    words = _WORD.findall(text, max(0, start - _WORDS_BEFORE), start)
    return [w.casefold().replace("’", "'") for w in reversed(words[-count:])]


def _joinable_gap(text: str, left: _Token, right: _Token) -> bool:
    gap = text[left.end : right.start]
    return gap == " " or gap == " & "


def _runs(text: str, tokens: list[_Token]) -> list[list[_Token]]:
    """Maximal runs of capitalised words, with lower-case connectors inside."""
    runs: list[list[_Token]] = []
    i, n = 0, len(tokens)
    while i < n:
        if not tokens[i].capitalised:
            i += 1
            continue
        run = [tokens[i]]
        j = i + 1
        while j < n:
            nxt = tokens[j]
            if nxt.initial or not _joinable_gap(text, run[-1], nxt):
                break
            if nxt.capitalised or _continues_product(run, nxt):
                run.append(nxt)
                j += 1
                continue
            # Lower-case connectors inside a name: "Bank of America", "Lord of the Rings".
            k = j
            while (
                k + 1 < n
                and not tokens[k].capitalised
                and tokens[k].norm in _CONNECTORS
                and _joinable_gap(text, tokens[k], tokens[k + 1])
            ):
                k += 1
            if k > j and k < n and tokens[k].capitalised and not tokens[k].initial:
                run.extend(tokens[j : k + 1])
                j = k + 1
                continue
            break
        runs.append(run)
        i = j
    return runs


def _continues_product(run: list[_Token], nxt: _Token) -> bool:
    """A model number after a product line: "iPhone 14", "PlayStation 5"."""
    return any(c.isdigit() for c in nxt.text) and (
        normalise_name(" ".join(t.text for t in run)) in gz.PRODUCT_LINES
    )


def _find_names(text: str, masked: list[tuple[int, int]]) -> list[FoundEntity]:
    tokens = _tokens(text, masked)
    found: list[FoundEntity] = []
    for run in _runs(text, tokens):
        # Strip openers ("When Sarah" → "Sarah") and dangling connectors from both ends.
        if len(run) > 1 and any(t.text in _TITLE_CASE_FUNCTION_WORDS for t in run[1:]):
            continue  # "Key Benefits Of Regular Exercise": a heading in Title Case
        if run[0].initial and text[run[-1].end : run[-1].end + 3].lstrip("*_ ").startswith(":"):
            if _gazetteer_type(normalise_name(" ".join(t.text for t in run))) is None:
                continue  # "**Better Sleep:** ...": a list item's label
        lead = 0
        while lead < len(run) and _is_filler(run[lead]):
            lead += 1
        words = run[lead:]
        while words and _is_filler(words[-1]):
            words = words[:-1]
        if not words or len(words) > _MAX_NAME_WORDS:
            continue
        if words[-1].text.isupper() and len(words[-1].text) > 5 and len(words) == 1:
            continue  # shouting ("IMPORTANT"), not an acronym
        name = " ".join(w.text for w in words)
        if name.endswith(("'s", "’s")):  # a name holds no line break, so `$` is its end
            name = _POSSESSIVE.sub("", name)
        norm = normalise_name(name)
        if not norm:
            continue
        known = _gazetteer_type(norm)
        starts_sentence = words[0].initial and lead == 0
        if len(words) == 1 and starts_sentence and known is None and norm not in gz.FIRST_NAMES:
            continue  # every sentence starts with a capital: no evidence of a name
        # The cue words are read only when the gazetteer does not know the name already.
        entity_type = known or _type_by_context(words, norm, _words_before(text, words[0].start, 2))
        found.append(
            FoundEntity(
                words[0].start,
                words[0].start + len(name),
                entity_type,
                name,
                entity_key(entity_type, name),
            )
        )
    return found


def _is_filler(token: _Token) -> bool:
    norm = token.norm
    return norm in _COMMON or norm in _CONNECTORS or norm in gz.PERSON_TITLES


def _gazetteer_type(norm: str) -> str | None:
    if norm in gz.PLACES:
        return "place"
    if norm in gz.ORGANISATIONS:
        return "organisation"
    if norm in gz.PRODUCTS or norm in gz.PRODUCT_LINES:
        return "product"
    head = norm.split(" ")[0]
    if head in gz.PRODUCT_LINES and any(c.isdigit() for c in norm):
        return "product"
    return None


def _type_by_context(words: list[_Token], norm: str, previous: list[str]) -> str:
    parts = norm.split(" ")
    before = previous[0] if previous else ""
    if before in gz.PERSON_TITLES:
        return "person"
    if len(parts) > 1:
        if parts[-1] in gz.ORG_SUFFIXES:
            return "organisation"
        if parts[-1] in gz.PLACE_SUFFIXES or parts[0] in gz.PLACE_PREFIXES:
            return "place"
    if parts[0] in gz.FIRST_NAMES:
        return "person"
    if before in gz.PERSON_CUES:
        return "person"
    if before in gz.PLACE_CUES and not norm.endswith(_NOT_PLACE_ENDINGS):
        if before not in gz.PLACE_CUES_NEED_VERB:
            return "place"
        if len(previous) > 1 and previous[1] in gz.PLACE_VERBS:
            return "place"
    return "other"
