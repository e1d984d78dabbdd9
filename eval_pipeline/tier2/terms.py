"""Whether a text says a term (or every term of a claim): one matching rule for tier 2.

The ingestion axis matches memory texts with it, and the corpus check matches the
scenario's own signal turns with it (an expectation must be said there), so both agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def term_in(term: str, text: str) -> bool:
    """Case-insensitive, whitespace-normalised, not inside a longer word, number or version
    ("25" does not match "250" nor "1,250", "v1.12" does not match "v1.12.0")."""
    needle = re.escape(_normalise(term))
    pattern = rf"(?<![a-z0-9])(?<![a-z0-9][.,]){needle}(?![a-z0-9])(?![.,][a-z0-9])"
    return re.search(pattern, _normalise(text)) is not None


def claim_in(terms: Sequence[str], text: str) -> bool:
    return all(term_in(t, text) for t in terms)
