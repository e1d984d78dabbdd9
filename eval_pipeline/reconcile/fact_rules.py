"""Rule-based facts from a user's own words: (subject, attribute, value) statements.

Offline and deterministic, for the `consolidating` reconciler. Assistant turns are not read
(the user states facts about themselves; an assistant repeating them is not a second source);
every other speaker is (tier 2's sources: chat, pull requests, ...). Each
rule finds one kind of statement that a later session can update:

- where someone lives ("My sister just moved to Zürich", "I live in Leeds");
- which team the user is on ("joined the payments team", "moved to the data platform team");
- "my <attribute> is <value>" ("my target pace is now 5:30 per km");
- "<attribute> of <number>" ("a pace of 5:45 per km");
- what the user can do ("I can now do 9 pull-ups in a row");
- a switch ("I switched my language app course from Spanish to Italian").

The attribute is keyed by its head noun ("target pace" and "pace" are one attribute), so a new
value for the same subject and attribute is a knowledge update. The fact text is rewritten
into a self-contained statement ("The user's sister lives in Zürich."): retrieval and scoring
must find it through its provenance, not by matching the turn's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eval_pipeline.reconcile.models import normalise_name
from eval_pipeline.reconcile.sentences import sentence_spans

_RELATIVES = (
    "sister|brother|mother|mom|mum|father|dad|parents|son|daughter|friend|best friend|partner|"
    "wife|husband|boyfriend|girlfriend|cousin|aunt|uncle|grandma|grandmother|grandpa|"
    "grandfather|boss|roommate|niece|nephew"
)
_ADVERBS = r"(?:(?:just|recently|finally|now|already|officially|also|actually)\s+)*"
_PLACE = r"(?P<value>[A-Z][\w'’-]*(?:[ -](?:[A-Z][\w'’-]*|de|del|la|le|am|upon))*)"

_RELATIVE_LIVES = re.compile(
    rf"(?i:\b(?:my|our)\s+(?P<rel>{_RELATIVES})\s+{_ADVERBS}"
    r"(?:lives|is living|moved|has moved|relocated|has relocated|is moving)"
    r"(?:\s+back)?\s+(?:in|to)\s+)" + _PLACE
)
_SELF_LIVES = re.compile(
    rf"(?i:\bI\s+{_ADVERBS}(?:live|moved|relocated|am moving|'ve moved|have moved|"
    r"'m moving)(?:\s+back)?\s+(?:in|to)\s+)" + _PLACE
)
_TEAM = re.compile(
    r"(?i:\b(?:joined|moved to|switched to|transferred to|on|to|into|part of)\s+the\s+"
    r"(?P<value>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2})\s+team)\b"
)
_MY_IS = re.compile(
    r"(?i:\bmy\s+(?P<attr>(?:[a-z-]+\s+){0,2}[a-z-]+)\s+(?:is|are)\s+"
    r"(?:now\s+|currently\s+|still\s+)?(?P<value>[^,;!?]+?))(?=\s+(?:and|but|because|since|so)\b|[,;!?]|\.(?:\s|$)|$)"
)
_OF_NUMBER = re.compile(
    r"(?i:\b(?:a|an|my|the)\s+(?P<attr>(?:[a-z-]+\s+)?[a-z-]+)\s+of\s+"
    r"(?P<value>[$€£]?\d[\d:.,]*(?:\s?(?:per|/)\s?[a-z]+|\s?[a-z%]+)?))"
)
_CAN_DO = re.compile(
    r"(?i:\bI\s+can\s+(?:now\s+|currently\s+|only\s+|already\s+)*(?P<verb>do|run|lift|swim|"
    r"bench|hold|read|type|walk|cycle)\s+(?P<value>\d+(?:\.\d+)?)(?:\s+(?P<noun>(?!in\b)[a-z][a-z-]*))?"
    r"(?P<rest>\s+in a row|\s+without stopping|\s+straight)?)"
)
_SWITCH = re.compile(
    r"(?i:\b(?:switched|changed|moved)\s+my\s+(?P<attr>(?:[a-z-]+\s+){0,3}[a-z-]+)\s+from\s+"
    r"(?P<old>[^,.;!?]+?)\s+to\s+(?P<value>[^,.;!?]+?))"
    r"(?=\s+(?:last|this|yesterday|today|because|since|and)\b|[,;!?]|\.(?:\s|$)|$)"
)
_TOPIC = re.compile(r"(?i:\b(?:for|doing|of|with)\s+(?P<noun>[a-z]+(?:-[a-z]+)?s)\b)")
_MODIFIERS = frozenset({"current", "new", "old", "latest", "present", "actual"})
_BAD_VALUES = frozenset({"a", "an", "the", "my", "our", "your", "their", "that", "this", "it"})
_VALUE_STOP = re.compile(
    r"\s+(?:for|because|since|when|while|with|before|after|which|who|but|so)\b.*$", re.I
)
MAX_VALUE_WORDS = 6


@dataclass(frozen=True)
class StatedFact:
    """One statement found in one user turn."""

    subject: str  # "user", "user's sister"
    attribute: str  # head noun or relation: "pace", "lives in", "team", "can do"
    qualifier: str | None  # narrows the attribute where the rule knows it ("pull-ups")
    value: str
    text: str  # the rewritten, self-contained statement
    turn_id: str
    start: int  # the sentence's span in the turn's text
    end: int

    @property
    def slot(self) -> tuple[str, str]:
        return (self.subject, self.attribute)

    def same_slot(self, other: StatedFact | tuple[str, str, str | None]) -> bool:
        subject, attribute, qualifier = (
            (other.subject, other.attribute, other.qualifier)
            if isinstance(other, StatedFact)
            else other
        )
        if (self.subject, self.attribute) != (subject, attribute):
            return False
        return self.qualifier is None or qualifier is None or self.qualifier == qualifier


def value_key(value: str) -> str:
    return normalise_name(value)


def _subject_name(subject: str) -> str:
    return "The user" if subject == "user" else f"The {subject}"


def _head(attr: str) -> str:
    words = [w for w in normalise_name(attr).split() if w not in _MODIFIERS]
    return words[-1] if words else normalise_name(attr)


def _clean_value(value: str) -> str | None:
    value = _VALUE_STOP.sub("", value.strip()).strip(" .'\"")
    words = value.split()
    if not words or len(words) > MAX_VALUE_WORDS or words[0].lower() in _BAD_VALUES:
        return None
    return value


def _possessive(attr: str) -> tuple[str, str]:
    """ "brother's name" → ("user's brother", "name"); "pace" → ("user", "pace")."""
    match = re.match(r"(?i)^([a-z-]+)['’]s\s+(.+)$", attr.strip())
    if match:
        return f"user's {match.group(1).lower()}", match.group(2)
    return "user", attr


Found = tuple[str, str, str | None, str, str]  # subject, attribute, qualifier, value, text


def facts_in_sentence(sentence: str, turn_text_before: str) -> list[Found]:
    """(subject, attribute, qualifier, value, text) for each statement in one sentence."""
    found: list[Found] = []
    for m in _RELATIVE_LIVES.finditer(sentence):
        rel = normalise_name(m.group("rel"))
        value = _clean_value(m.group("value"))
        if value:
            subject = f"user's {rel}"
            found.append((subject, "lives in", None, value, f"The user's {rel} lives in {value}."))
    for m in _SELF_LIVES.finditer(sentence):
        value = _clean_value(m.group("value"))
        if value:
            found.append(("user", "lives in", None, value, f"The user lives in {value}."))
    for m in _TEAM.finditer(sentence):
        value = _clean_value(m.group("value"))
        if value:
            found.append(("user", "team", None, value, f"The user is on the {value} team."))
    for m in _SWITCH.finditer(sentence):
        value, old = _clean_value(m.group("value")), m.group("old").strip()
        if value:
            subject, attr = _possessive(m.group("attr"))
            attr = normalise_name(attr)
            text = f"{_subject_name(subject)}'s {attr} is {value} (switched from {old})."
            found.append((subject, _head(attr), None, value, text))
    switched = {(s, a) for s, a, *_ in found}
    for m in _MY_IS.finditer(sentence):
        value = _clean_value(m.group("value"))
        if value:
            subject, attr = _possessive(m.group("attr"))
            attr = normalise_name(attr)
            if (subject, _head(attr)) not in switched:
                text = f"{_subject_name(subject)}'s {attr} is {value}."
                found.append((subject, _head(attr), None, value, text))
    for m in _OF_NUMBER.finditer(sentence):
        attr = normalise_name(m.group("attr"))
        value = m.group("value").strip()
        if _head(attr) not in {s[1] for s in found}:
            found.append(("user", _head(attr), None, value, f"The user's {attr} is {value}."))
    for m in _CAN_DO.finditer(sentence):
        verb, value = m.group("verb").lower(), m.group("value")
        noun = m.group("noun")
        if noun is None:  # "I can do 4 in a row": the topic is named earlier in the turn
            topics = _TOPIC.findall(turn_text_before)
            noun = topics[-1] if topics else None
        rest = (m.group("rest") or "").strip()
        what = " ".join(p for p in (value, noun, rest) if p)
        qualifier = noun.lower() if noun else None
        found.append(("user", f"can {verb}", qualifier, value, f"The user can {verb} {what}."))
    return found


def stated_facts(turn_id: str, role: str, text: str) -> list[StatedFact]:
    """The statements of one turn, in text order (none from the assistant)."""
    if role == "assistant":
        return []
    out: list[StatedFact] = []
    seen: set[tuple[str, str, str]] = set()
    for start, end in sentence_spans(text):
        for subject, attribute, qualifier, value, statement in facts_in_sentence(
            text[start:end], text[:end]
        ):
            marker = (subject, attribute, value_key(value))
            if marker in seen:
                continue
            seen.add(marker)
            out.append(
                StatedFact(subject, attribute, qualifier, value, statement, turn_id, start, end)
            )
    return out
