"""Size limits of the input, stated once: what one record may hold before anything is built.

A session becomes one row of one Bolt message at injection (`graph/inject.py`), and a row over
`graph.batched_writes.MAX_ROW_BYTES` is refused there — after the wipe, when only the write
finds it. These limits refuse such input where it is read (the corpus validation,
`longmemeval.parse_record`, which preflight runs over a local file no pin identifies, and the
fixtures' validation pass before the wipe), naming the record and the field.

They sit far above LongMemEval (about 10 turns of ~1,000 characters per session; the two real
records in ../shared/data hold at most 3,208 characters in a turn, 12 turns and 17,565
characters in a session; the full S file could not be measured here) and low enough that the
largest session they allow still fits one row: every character JSON-escaped to 12 bytes (a
non-BMP character as two `\\uXXXX`), plus each turn's fixed fields (`TURN_ROW_OVERHEAD`),
stays under the row limit (`eval_pipeline_tests/corpus/test_limits.py` holds that).
"""

from __future__ import annotations

# One turn's text (role and content), in characters.
MAX_TURN_CHARS = 200_000
# Turns in one session.
MAX_SESSION_TURNS = 2_000
# All the text of one session (every turn's role and content), in characters.
MAX_SESSION_CHARS = 800_000
# Bytes of one turn's row besides its text: the field names, a turn id of a 128-character
# session id, index and timestamp.
TURN_ROW_OVERHEAD = 256
# How deep one record's JSON may nest (LongMemEval's: 4). Deeper input is refused before it
# is decoded: Python's decoder would raise RecursionError past ~1,000 levels.
MAX_JSON_DEPTH = 32


def worst_session_row_bytes() -> int:
    """The largest session row the limits allow, JSON-escaped (an upper bound)."""
    return MAX_SESSION_CHARS * 12 + MAX_SESSION_TURNS * TURN_ROW_OVERHEAD


def text_problem(role: str, content: str) -> str | None:
    """Why one turn is too large, or None."""
    size = len(role) + len(content)
    if size > MAX_TURN_CHARS:
        return f"{size:,} characters, over the limit of {MAX_TURN_CHARS:,} per turn"
    return None


def session_problem(turns: int, chars: int) -> str | None:
    """Why one session is too large (its turn count, its text), or None."""
    if turns > MAX_SESSION_TURNS:
        return f"{turns:,} turns, over the limit of {MAX_SESSION_TURNS:,} per session"
    if chars > MAX_SESSION_CHARS:
        return f"{chars:,} characters of text, over the limit of {MAX_SESSION_CHARS:,} per session"
    return None
