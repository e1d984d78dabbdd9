"""Where a secret hides in text: the forms an echo may give a value we know, and the shapes of
keys whose value we do not.

A careless or hostile endpoint does not have to echo a key verbatim: it may reverse it,
base64 it, cut it into short pieces, interleave invisible characters or write it as `\\u`
escapes (issue 28's probe tried each). So a known secret is searched

- in the text as it is, and in the text *normalised*: format characters (zero-width spaces,
  joiners, BOM, soft hyphens, bidi marks; Unicode category Cf) dropped and `\\uXXXX`,
  `\\UXXXXXXXX`, `\\xXX` and `&#...;` escapes decoded; a match there is mapped back to the
  characters it came from, so exactly those are blanked;
- as itself, reversed, and as the base64 (standard and URL-safe) of itself at each of the 3
  byte alignments, so base64 of any long enough part of it is found too;
- by runs: any run of `LONG_RUN` characters of one of those forms, or of `CHUNK_MIN` when the
  run looks random (a digit and a letter, or mixed case), grown to the longest run aligned with
  it. The "random" condition keeps an 8-character run of a secret made of words ("anthropi")
  from blanking ordinary text; real keys are random, so their short runs qualify.

Shapes (`shape_spans`) find keys by what they look like (`sk-`, `sk-ant-`, `hf_`, `ghp_`,
`AKIA`, Bearer tokens, JWTs, `api_key=` assignments), in the text, normalised, reversed, and
inside base64 runs that decode to one.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from functools import lru_cache

CHUNK_MIN = 8  # a random-looking run this long of a secret's form is the secret
LONG_RUN = 16  # any run this long is, whatever it looks like

# Every Unicode format character (category Cf), as ranges; test_secret_forms checks the list
# against unicodedata, so a new Unicode release cannot slip one past.
FORMAT_CHARS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
_FORMAT = f"[{FORMAT_CHARS}]"
# Any number of backslashes: text JSON-encoded twice (Dagster's event log) doubles them.
_ESCAPE = (
    r"\\+u[0-9a-fA-F]{4}|\\+U[0-9a-fA-F]{8}|\\+x[0-9a-fA-F]{2}"
    r"|&#[0-9]{1,7};|&#[xX][0-9a-fA-F]{1,6};"
)
_NEEDS_NORMALISING = re.compile(f"{_FORMAT}|{_ESCAPE}")
_TOKEN = re.compile(f"({_FORMAT})|({_ESCAPE})")
_FORMAT_ONLY = re.compile(f"{_FORMAT}$")

Span = tuple[int, int]


def _unescape(token: str) -> str:
    if token.startswith("&#"):
        body = token[2:-1]
        code = int(body[1:], 16) if body[:1] in "xX" else int(body)
    else:
        code = int(token.lstrip("\\")[1:], 16)
    return chr(code) if code <= 0x10FFFF else token


def normalise(text: str) -> tuple[str, list[Span]] | None:
    """`text` with format characters dropped and escapes decoded, and for each of its
    characters the span of `text` it came from; None when there is nothing to normalise."""
    if not _NEEDS_NORMALISING.search(text):
        return None
    out: list[str] = []
    origin: list[Span] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        for i in range(pos, match.start()):
            out.append(text[i])
            origin.append((i, i + 1))
        if match.group(2):
            char = _unescape(match.group(2))
            if not _FORMAT_ONLY.match(char):  # an escaped zero-width space is dropped too
                out.append(char)
                origin.append(match.span())
        pos = match.end()
    for i in range(pos, len(text)):
        out.append(text[i])
        origin.append((i, i + 1))
    return "".join(out), origin


def _back(spans: list[Span], origin: list[Span]) -> list[Span]:
    """Spans of the normalised text as spans of the text it came from. A span swallows the
    invisible characters inside it (they sit between its characters' origins)."""
    return [(origin[s][0], origin[e - 1][1]) for s, e in spans if e > s]


def looks_random(run: str) -> bool:
    """A digit and a letter, or a lower-case letter followed later by an upper-case one:
    what a random key's short run looks like and a word does not."""
    has_digit = any(c.isdigit() for c in run)
    letters = [c for c in run if c.isalpha()]
    if has_digit and letters:
        return True
    seen_lower = False
    for c in letters:
        if c.islower():
            seen_lower = True
        elif c.isupper() and seen_lower:
            return True
    return False


def base64_cores(secret: str) -> list[str]:
    """The base64 characters that only `secret`'s bytes decide, at each of the 3 alignments it
    can have in an encoded stream, standard and URL-safe alphabets."""
    data = secret.encode("utf-8")
    cores: list[str] = []
    for lead in range(3):
        padded = b"\0" * lead + data
        whole = padded[: len(padded) // 3 * 3]  # the last partial group depends on what follows
        core = base64.b64encode(whole).decode("ascii")[(0, 2, 3)[lead] :]
        for form in (core, core.replace("+", "-").replace("/", "_")):
            if len(form) >= CHUNK_MIN and form not in cores:
                cores.append(form)
    return cores


def forms_of(secret: str) -> list[str]:
    """Every form of `secret` searched for: itself, reversed, and its base64 cores."""
    forms = [secret, secret[::-1], *base64_cores(secret)]
    return list(dict.fromkeys(forms))


@dataclass(frozen=True)
class _Matcher:
    forms: tuple[str, ...]
    pattern: re.Pattern[str]  # every window worth matching, longest first
    where: dict[str, tuple[tuple[int, int], ...]]  # window -> (form index, offset) pairs
    runs: re.Pattern[str]  # a run of the characters the forms are made of
    grams: frozenset[str]  # every CHUNK_MIN-gram of every form


@lru_cache(maxsize=256)
def _matcher(secret: str) -> _Matcher:
    forms = tuple(forms_of(secret))
    where: dict[str, list[tuple[int, int]]] = {}
    for f, form in enumerate(forms):
        if len(form) < LONG_RUN:
            where.setdefault(form, []).append((f, 0))  # the whole form, whatever it looks like
        for i in range(len(form) - LONG_RUN + 1):
            where.setdefault(form[i : i + LONG_RUN], []).append((f, i))
        for i in range(len(form) - CHUNK_MIN + 1):
            window = form[i : i + CHUNK_MIN]
            if looks_random(window):
                where.setdefault(window, []).append((f, i))
    alternatives = sorted(where, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(w) for w in alternatives))
    chars = "".join(sorted({c for form in forms for c in form}))
    runs = re.compile(f"[{re.escape(chars)}]{{{CHUNK_MIN},}}")
    grams = frozenset(
        form[i : i + CHUNK_MIN] for form in forms for i in range(len(form) - CHUNK_MIN + 1)
    )
    return _Matcher(forms, pattern, {w: tuple(p) for w, p in where.items()}, runs, grams)


def _value_spans_plain(text: str, secret: str) -> list[Span]:
    """A match lies inside one run of the forms' characters and holds one of their
    CHUNK_MIN-grams: runs without one are skipped at set-lookup speed (a 200 MB fixtures
    file is redacted line by line), the others matched exactly."""
    m = _matcher(secret)
    spans: list[Span] = []
    for run in m.runs.finditer(text):
        word = run.group(0)
        if any(word[i : i + CHUNK_MIN] in m.grams for i in range(len(word) - CHUNK_MIN + 1)):
            spans += [(run.start() + s, run.start() + e) for s, e in _match_in(word, m)]
    return spans


def _match_in(text: str, m: _Matcher) -> list[Span]:
    spans: list[Span] = []
    pos = 0
    while (match := m.pattern.search(text, pos)) is not None:
        best = match.span()
        for f, i in m.where[match.group(0)]:
            form = m.forms[f]
            # Grow the match to the longest run of this form aligned with it.
            left, right = match.start(), match.end()
            j, k = i, i + (right - left)
            while left > 0 and j > 0 and text[left - 1] == form[j - 1]:
                left, j = left - 1, j - 1
            while right < len(text) and k < len(form) and text[right] == form[k]:
                right, k = right + 1, k + 1
            if right - left > best[1] - best[0]:
                best = (left, right)
        spans.append(best)
        pos = best[1]
    return spans


def value_spans(text: str, secret: str) -> list[Span]:
    """Spans of `text` holding `secret` in any of its forms, in the text as it is or
    normalised (merged, in order)."""
    spans = _value_spans_plain(text, secret)
    normal = normalise(text)
    if normal is not None:
        spans += _back(_value_spans_plain(normal[0], secret), normal[1])
    return merge(spans)


# Key shapes, each with the group that is the secret (0: the whole match).
SHAPES: tuple[tuple[re.Pattern[str], int], ...] = (
    # OpenAI (sk-..., sk-proj-...) and Anthropic (sk-ant-...) keys.
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), 0),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), 0),  # Hugging Face tokens
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), 0),  # GitHub
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), 0),  # AWS access key ids
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), 0),  # JWT
    (re.compile(r"(?i)\bbearer\s+(?!\[REDACTED\])([A-Za-z0-9._~+/=\-]{8,})"), 1),
    # A value assigned to a credential's name: "x-api-key: ...", "password=...".
    (
        re.compile(
            r"(?i)(?:x-api-key|api[_-]?key|authorization|password|passwd|secret|access[_-]?token)"
            r"[\"']?\s*[:=]\s*[\"']?(?!\[REDACTED\])(?!bearer\s)([^\"'\s,;}&]{8,})"
        ),
        1,
    ),
)
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")


def _plain_shape_spans(text: str) -> list[Span]:
    return [m.span(group) for pattern, group in SHAPES for m in pattern.finditer(text)]


def _decodes_to_a_shape(run: str) -> bool:
    body = run.rstrip("=")
    for alphabet in (None, b"-_"):
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet)
        except (binascii.Error, ValueError):
            continue
        decoded = raw.decode("latin-1")
        if _plain_shape_spans(decoded) or _plain_shape_spans(decoded[::-1]):
            return True
    return False


def shape_spans(text: str) -> list[Span]:
    """Spans of key-shaped tokens in `text`: as written, normalised, reversed, or base64."""
    spans = _plain_shape_spans(text)
    normal = normalise(text)
    plain = text if normal is None else normal[0]
    n = len(plain)
    reversed_spans = [(n - e, n - s) for s, e in _plain_shape_spans(plain[::-1])]
    if normal is not None:
        spans += _back(_plain_shape_spans(plain) + reversed_spans, normal[1])
    else:
        spans += reversed_spans
    spans += [m.span() for m in _BASE64_RUN.finditer(text) if _decodes_to_a_shape(m.group(0))]
    return merge(spans)


def merge(spans: list[Span]) -> list[Span]:
    """Overlapping or touching spans as one, in order."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def blank(text: str, spans: list[Span], replacement: str) -> str:
    for start, end in reversed(merge(spans)):
        text = text[:start] + replacement + text[end:]
    return text
