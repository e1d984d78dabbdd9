"""Chunks of a session: a short turn is one chunk; a long one is cut into sentence windows.

Chunks never cross turns, so each one links to exactly the turn its text came from. Spans
index into the turn's text, so entities found once per turn can be assigned to chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval_pipeline.reconcile.sentences import sentence_spans


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def chunk_spans(
    text: str, max_chars: int, sentences: list[tuple[int, int]] | None = None
) -> list[Span]:
    """One span for a turn up to `max_chars`, else consecutive sentences packed up to it
    (a longer sentence stands alone). `sentences` is `sentence_spans(text)` when the caller
    has it already (the extractive reconciler needs both): it is computed here otherwise."""
    stripped = text.strip()
    if not stripped:
        return []
    if len(stripped) <= max_chars:
        lead = len(text) - len(text.lstrip())
        return [Span(lead, lead + len(stripped))]
    windows: list[Span] = []
    start = end = -1
    for a, b in sentence_spans(text) if sentences is None else sentences:
        if start < 0:
            start, end = a, b
        elif b - start <= max_chars:
            end = b
        else:
            windows.append(Span(start, end))
            start, end = a, b
    if start >= 0:
        windows.append(Span(start, end))
    return windows
