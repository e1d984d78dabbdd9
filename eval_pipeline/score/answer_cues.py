"""Cues an answer's reading turns on: a refusal ("there's no record of ...", "you told me
about X but not Y"), a guess ("it might be ...", "probably"), a correction, a revision ("...,
actually Y") and a negation. Patterns only, over `answer_values.normalise`d text."""

from __future__ import annotations

import re

# What a gap in the record is called, and how it is qualified ("no specific mention").
_GAP = (
    r"(?:(?:direct|clear|specific|explicit|exact|precise|concrete|such|further|relevant|"
    r"recorded|documented|mention\s+or|definitive|confirmed)\s+)*"
    r"(?:record|mention|information|info|details?|data|evidence|indication|reference|entry|"
    r"entries|note|trace|memory|memories|conversation|discussion)"
)


REFUSAL = re.compile(
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
    r"|(?:never|not|wasn't|isn't|haven't|hasn't|didn't)\s+(?:been\s+)?(?:actually\s+|really\s+|"
    r"ever\s+|explicitly\s+)?(?:mentioned|mention|told|said|shared|discussed|specified|stated|"
    r"provided|recorded|come\s+up|talked|captured|documented|included|given|found|logged|"
    r"noted|suggest(?:ed)?|recommend(?:ed)?)"
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
GUESS = re.compile(
    r"(?!\s*if\b)(?![^.?!]*\b(?:thinking\s+of|referring\s+to|related|confus))[^.?!]*\b(?:(?:it|that|this|the\s+\w+|they|you)\s+(?:might|may|could|would)"
    r"\s+(?:have\s+been|be)|(?:it|that|this|you)(?:'s|\s+(?:is|was))\s+(?:probably|likely|"
    r"perhaps|maybe|presumably)|my\s+(?:best\s+)?guess|i\s+(?:would|'d)\s+(?:guess|say|"
    r"estimate)|i\s+guess|if\s+i\s+had\s+to\s+guess|(?:most\s+)?(?:probably|likely)\b|"
    r"possibly|maybe|presumably|perhaps)\b",
    re.IGNORECASE,
)


# A correction or an update: which value the response asserts needs reading.
CORRECTION = re.compile(
    r"\b(?:actually|instead|rather\s+than|no\s+longer|not\s+anymore|any\s*more|used\s+to|"
    r"previously|originally|formerly|initially|earlier|changed|switched|replaced|"
    r"moved\s+from|turned\s+out|correction|correct(?:ed|ing)\s+(?:that|myself)|"
    r"scratch\s+that|in\s+the\s+end|ended\s+up|eventually|finally|decided|went\s+with|"
    r"settled\s+on|thought\s+about|considered|in\s+fact|wait|whereas|"
    r"before\s+(?:that|it)|but\s+(?:then|later|now|it|that|the|you|i|we|actually))",
    re.IGNORECASE,
)


# A revision: what follows it is the answer the response settles on.
REVISION = re.compile(
    # "actually" revises when it opens a clause ("..., actually it was Y"), not as "really"
    r"(?:(?:^|[.,;:!?(]\s*|\b(?:no|but|i|you|we|it),?\s+)actually\b|\b(?:in\s+the\s+end|ended\s+up|in\s+fact|correction\s*[:,]|"
    r"correct(?:ed|ing)\s+(?:that|myself)|scratch\s+that|wait\b|i\s+mean\b|i\s+misspoke|"
    r"but\s+no\b|but\s+the\s+(?:real|right|correct)|the\s+real|went\s+with|settled\s+on|"
    r"decided\s+on))",
    re.IGNORECASE,
)


# A negation, except the hedges that leave the answer standing ("not sure", "not 100%").
NEGATION = re.compile(
    r"\b(?:not|never|isn't|wasn't|aren't|weren't|didn't|doesn't|don't|no)\b"
    r"(?!\s+(?:sure|certain|completely|entirely|exactly|positive|100|quite|totally|fully|"
    r"a\s+hundred|mistaken|wrong))",
    re.IGNORECASE,
)
