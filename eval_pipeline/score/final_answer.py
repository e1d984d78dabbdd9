"""The answer a response commits to: its final answer, apart from the reasoning before it.

Real readers answer at length (a median of about 100 words in published LongMemEval runs):
chain of thought, numbered evidence, "Final Answer: ...", closing offers of help. The
reference judge reads such a response for what it concludes; a rule that looks for the
reference anywhere in it reads the candidates the reasoning weighed as if they were answers.
`final_answer` returns the part that concludes:

1. after the last explicit answer marker ("Final Answer:", "Answer:", "the answer is");
2. else, in a long response, from the last sentence that opens with a conclusion word
   ("Therefore", "So", "That means", "In conclusion", "Overall", ...) to the end;
3. else, in a long response, its last sentence when it restates the question ("You see Dr.
   Smith every week."), unless it is a condition ("If you sold it, ...");
4. else the whole response (`how` says which: "marker", "conclusion", "restatement",
   "whole").

Closing pleasantries ("Let me know if ...") and questions back to the user ("Could you provide
more details?") are dropped first: they never hold the answer. Markdown emphasis is removed,
never the words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A response this short (in words) is its own final answer whatever its shape.
SHORT_WORDS = 45

_EMPHASIS = re.compile(r"(\*\*|__|\*|`|^#+\s*)", re.MULTILINE)
# Markup some readers wrap parts of a reply in (<answer>, <asks>, <thinking>): the tags go, the
# words stay; an answer tag marks the answer.
_ANSWER_TAG = re.compile(r"<\s*(?:final[_ ]?)?answer\s*>", re.IGNORECASE)
_TAG = re.compile(r"<\s*/?\s*[A-Za-z][\w-]{0,30}\s*>")
_MARKER = re.compile(
    r"(?:\bfinal\s+answer\b|(?:^|(?<=[.!?]))\s*(?:short\s+|direct\s+)?answer\s*(?=[:：])|"
    r"^\s*(?:short\s+|direct\s+)?answer\b|\bthe\s+(?:final\s+|short\s+|"
    r"direct\s+)?answer\s+(?:to\s+(?:the|your)\s+question\s+)?is\b)\s*[:：\-–—]?",
    re.IGNORECASE | re.MULTILINE,
)
_CONCLUSION = re.compile(
    r"(?:^|(?<=[.!?:\n])\s*)(?:therefore|thus|hence|so|consequently|accordingly|in\s+conclusion|"
    r"in\s+summary|to\s+summari[sz]e|to\s+sum\s+up|in\s+short|overall|in\s+total|conclusion|"
    r"summary|putting\s+it\s+(?:all\s+)?together|all\s+in\s+all|(?:that|this|which)\s+means|"
    r"total)\b[\s,:]",
    re.IGNORECASE,
)
# Sentences that close a reply without answering anything.
_CLOSING = re.compile(
    r"^(?:if\s+you\s+(?:have|need|want|would|'d|ever|can|could)|let\s+me\s+know|feel\s+free|"
    r"i\s+hope\s+(?:this|that)|hope\s+(?:this|that)|please\s+(?:let|feel|provide|confirm|share|"
    r"clarify|check)|could\s+you\s+(?:provide|share|clarify|confirm|give|tell)|"
    r"would\s+you\s+like|do\s+you\s+(?:want|need|have)|is\s+there\s+anything|enjoy|"
    r"happy\s+to\s+help|good\s+luck|have\s+(?:a|fun))",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9*])|\n+")


@dataclass(frozen=True)
class FinalAnswer:
    text: str  # what the response concludes
    how: str  # "marker" | "conclusion" | "whole"
    words: int  # length of the whole response, in words


def plain(text: str) -> str:
    """The response without markdown emphasis and with single spaces inside lines."""
    text = _ANSWER_TAG.sub("\nAnswer: ", text or "")
    text = _TAG.sub("\n", text)
    text = _EMPHASIS.sub("", text)
    return "\n".join(re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines())


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _without_closing(text: str) -> str:
    """The text with its trailing pleasantries and offers of help removed (never all of it)."""
    parts = sentences(text)
    # A question back to the user is never the answer, nor an offer of help.
    while len(parts) > 1 and (_CLOSING.match(parts[-1]) or parts[-1].endswith("?")):
        parts.pop()
    if len(parts) == len(sentences(text)):
        return text
    # Cut at the start of the first dropped sentence, keeping the original layout before it.
    keep = parts[-1]
    return text[: text.rfind(keep) + len(keep)]


def final_answer(response: str, question: str = "") -> FinalAnswer:
    """The part of `response` that states its conclusion (see the module docstring)."""
    text = plain(response)
    words = len(text.split())
    body = _without_closing(text).strip()
    markers = list(_MARKER.finditer(body))
    if markers:
        tail = body[markers[-1].end() :].strip()
        if tail:
            return FinalAnswer(tail, "marker", words)
    if words > SHORT_WORDS:
        conclusions = list(_CONCLUSION.finditer(body))
        if conclusions:
            tail = body[conclusions[-1].start() :].strip()
            if len(tail.split()) >= 3:
                return FinalAnswer(tail, "conclusion", words)
        restated = _restatement(body, question)
        if restated is not None:
            return FinalAnswer(restated, "restatement", words)
    return FinalAnswer(body, "whole", words)


def _restatement(body: str, question: str) -> str | None:
    """The response's last sentence when it restates the question (the answer sentence a
    reply that explains first ends with: "You see Dr. Smith every week."); a condition ("If
    you sold it, ...") or a line of evidence is not one."""
    wanted = _question_words(question)
    if len(wanted) < 2:
        return None
    last = sentences(body)[-1] if sentences(body) else ""
    if not last or _CONDITION.match(last) or last.endswith(":") or _BULLET.match(last):
        return None
    return last if restates(last, question) else None


def restates(sentence: str, question: str) -> bool:
    """Whether `sentence` restates `question` (half its words or more, at least two): the
    sentence that answers it, whatever it answers."""
    wanted = _question_words(question)
    have = {_root(w) for w in _WORDS.findall(sentence.lower())}
    return len(wanted) >= 2 and len(wanted & have) >= max(2, (len(wanted) + 1) // 2)


_WORDS = re.compile(r"[a-z0-9]+")
_BULLET = re.compile(r"\s*(?:[-*•>]|\d+[.)])\s")
_CONDITION = re.compile(r"\s*(?:if|unless|assuming|in\s+case|should\s+you|had\s+you)\b", re.I)
_QUESTION_STOP = frozenset(
    """a an the and or of to in on at for from by with about as is are was were be been do did
    does have has had i my me you your what which who whom whose when where why how many much
    long often ago that this these those it its can could would should will there their they
    any some get got last first current currently""".split()
)


def _root(word: str) -> str:
    return word[:5]  # a crude common root: "watching"/"watched", "bought"/"buy" aside


def _question_words(question: str) -> set[str]:
    return {_root(w) for w in _WORDS.findall(question.lower()) if w not in _QUESTION_STOP}
